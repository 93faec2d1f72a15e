package io.idem.lab;

import io.idem.cli.Idem;
import java.io.PrintWriter;
import picocli.CommandLine;

/**
 * The lab's {@code idem}: every command of the server distribution ({@link Idem}) plus the
 * benchmarks ({@code bench}), the fault campaigns and their checker ({@code verify}) and the demos
 * ({@code demo}). The repository's {@code ./idem} script runs it. None of it ships in the server
 * distribution, which holds {@link Idem}'s commands only.
 */
public final class IdemLab {
  private IdemLab() {}

  /** The distribution's command line with the lab's commands added. */
  public static CommandLine commandLine(PrintWriter out, PrintWriter err) {
    CommandLine cli =
        Idem.commandLine(
            out,
            err,
            new DemoCommand(),
            new BenchCommand(),
            new BenchKafkaCommand(),
            new BenchPlotCommand(),
            new VerifyCommand());
    cli.getCommandSpec()
        .usageMessage()
        .description(
            "Exactly-once request processing: an Idem node, its operator commands, and the lab"
                + " (demos, benchmarks, fault campaigns).");
    return cli;
  }

  /** Entry point of {@code ./idem}. */
  public static void main(String[] args) {
    Idem.runAndExit(args, IdemLab::commandLine);
  }
}
