package io.idem.cli;

import java.io.PrintWriter;
import java.nio.charset.Charset;
import java.util.function.BiFunction;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The {@code idem} command of the server distribution: the server and the operator commands. Every
 * subcommand has {@code --help}; errors are one line and exit 1 or 2. The lab's {@code IdemLab}
 * (idem-lab) builds on {@link #commandLine} and adds its benchmarks, campaigns and demos.
 */
@Command(
    name = "idem",
    mixinStandardHelpOptions = true,
    version = "idem 0.1.0",
    description = "Exactly-once request processing: an Idem node and its operator commands.",
    subcommands = {
      KvCommand.class,
      LeaseCommand.class,
      KeyCommand.class,
      StatusCommand.class,
      ConfigCommand.class,
      AuthCommand.class,
      MemberCommand.class,
      GroupCommand.class,
      CommandLine.HelpCommand.class
    })
public final class Idem implements Runnable {
  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Override
  public void run() {
    spec.commandLine().usage(spec.commandLine().getOut());
  }

  /** Warnings and errors only, before any logger exists (slf4j-simple reads these once). */
  public static void quietLogs() {
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

  /**
   * Builds the command line with the project's error handling, with {@code more} (picocli commands)
   * added after the distribution's own: the lab adds its commands here, since picocli hands the
   * streams and handlers set below only to the subcommands that exist when they are set.
   */
  public static CommandLine commandLine(PrintWriter out, PrintWriter err, Object... more) {
    CommandLine cli = new CommandLine(new Idem());
    cli.addSubcommand("server", new CommandLine(new ServerCommand()));
    for (Object command : more) {
      cli.addSubcommand(command);
    }
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
    runAndExit(args, Idem::commandLine);
  }

  /**
   * Runs {@code args} on the command line {@code build} makes, on standard output and error, and
   * exits with its code. Every command but {@code server} runs with quiet logs: only the server is
   * worth its logs, the rest print their own lines.
   */
  public static void runAndExit(
      String[] args, BiFunction<PrintWriter, PrintWriter, CommandLine> build) {
    if (args.length > 0 && !args[0].equals("server")) {
      quietLogs();
    }
    PrintWriter out = new PrintWriter(System.out, true, Charset.defaultCharset());
    PrintWriter err = new PrintWriter(System.err, true, Charset.defaultCharset());
    int code = build.apply(out, err).execute(args);
    out.flush();
    err.flush();
    System.exit(code);
  }
}
