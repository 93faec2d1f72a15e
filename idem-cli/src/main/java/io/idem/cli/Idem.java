package io.idem.cli;

import io.idem.server.Main;
import java.io.PrintWriter;
import java.nio.charset.Charset;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The {@code idem} command. Every subcommand has {@code --help}; errors are one line and exit 1 or
 * 2.
 */
@Command(
    name = "idem",
    mixinStandardHelpOptions = true,
    version = "idem 0.1.0",
    description = "Exactly-once request processing: an Idem node, its client, and a demo.",
    subcommands = {
      KvCommand.class,
      LeaseCommand.class,
      KeyCommand.class,
      StatusCommand.class,
      ConfigCommand.class,
      AuthCommand.class,
      MemberCommand.class,
      DemoCommand.class,
      BenchCommand.class,
      VerifyCommand.class,
      CommandLine.HelpCommand.class
    })
public final class Idem implements Runnable {
  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Override
  public void run() {
    spec.commandLine().usage(spec.commandLine().getOut());
  }

  /** Warnings and errors only, before any logger exists (slf4j-simple reads these once). */
  static void quietLogs() {
    System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "error");
    // The server jar's simplelogger.properties names these; a system property wins over it.
    System.setProperty("org.slf4j.simpleLogger.log.org.apache.ratis", "off");
    System.setProperty("org.slf4j.simpleLogger.log.io.idem", "error");
    java.util.logging.Logger root = java.util.logging.Logger.getLogger("");
    root.setLevel(java.util.logging.Level.OFF);
    for (java.util.logging.Handler h : root.getHandlers()) {
      h.setLevel(java.util.logging.Level.OFF);
    }
  }

  /** Builds the command line with the project's error handling. */
  static CommandLine commandLine(PrintWriter out, PrintWriter err) {
    CommandLine cli = new CommandLine(new Idem());
    cli.addSubcommand("server", new CommandLine(new Main()).setCommandName("server"));
    cli.setOut(out);
    cli.setErr(err);
    cli.setParameterExceptionHandler(
        (ex, args) -> {
          ex.getCommandLine().getErr().println("idem: " + ex.getMessage() + " (see --help)");
          return 2;
        });
    // With --help, picocli prints the help and leaves unknown words unreported; an unknown command
    // must fail like any other bad argument, help or not.
    cli.setExecutionStrategy(
        parseResult -> {
          for (CommandLine.ParseResult p = parseResult; p != null; p = p.subcommand()) {
            if (!p.unmatched().isEmpty()) {
              p.commandSpec()
                  .commandLine()
                  .getErr()
                  .println(
                      "idem: unknown command or argument '"
                          + p.unmatched().get(0)
                          + "' (see --help)");
              return 2;
            }
          }
          return new CommandLine.RunLast().execute(parseResult);
        });
    cli.setExecutionExceptionHandler(
        (ex, commandLine, parseResult) -> {
          commandLine.getErr().println("idem: " + Errors.oneLine(ex));
          return 1;
        });
    return cli;
  }

  /** Entry point. */
  public static void main(String[] args) {
    if (args.length > 0 && !args[0].equals("server")) {
      quietLogs(); // only the server is worth its logs; the rest print their own lines
    }
    PrintWriter out = new PrintWriter(System.out, true, Charset.defaultCharset());
    PrintWriter err = new PrintWriter(System.err, true, Charset.defaultCharset());
    int code = commandLine(out, err).execute(args);
    out.flush();
    err.flush();
    System.exit(code);
  }
}
