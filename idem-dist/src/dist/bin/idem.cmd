@echo off
rem The idem command of an installation (Windows): %JAVA_HOME%\bin\java, else java on the PATH.
setlocal
set "IDEM_HOME=%~dp0.."
if defined JAVA_HOME (set "JAVA=%JAVA_HOME%\bin\java.exe") else (set "JAVA=java")
if not defined IDEM_JAVA_OPTS set "IDEM_JAVA_OPTS=-XX:+UseG1GC -XX:MaxGCPauseMillis=20"
"%JAVA%" %IDEM_JAVA_OPTS% "-Didem.home=%IDEM_HOME%" -cp "%IDEM_HOME%\lib\*" io.idem.cli.Idem %*
exit /b %ERRORLEVEL%
