package io.idem.verify;

import io.idem.cli.ServerCommand;
import io.idem.server.IdemServer;
import io.idem.server.NegativeControls;
import java.util.ArrayList;
import java.util.List;
import picocli.CommandLine;

/**
 * The main class of the nodes that {@link ProcessCluster} starts: {@code idem server} with its
 * flags, plus the switches of the negative controls, which the server distribution does not have.
 *
 * <ul>
 *   <li>{@value #UNSAFE_LOCAL_READS}: reads answered from the local state machine without
 *       confirming leadership ({@link NegativeControls#startWithUnsafeLocalReads}), so that a
 *       deposed leader answers stale reads: {@code PartitionTest}'s negative control.
 * </ul>
 */
public final class LabNode {
  /** Breaks linearizability: reads without the read barrier. */
  public static final String UNSAFE_LOCAL_READS = "--unsafe-local-reads";

  private LabNode() {}

  /** Runs one node until SIGTERM, like {@code idem server}. */
  public static void main(String[] args) {
    List<String> rest = new ArrayList<>(List.of(args));
    boolean unsafe = rest.remove(UNSAFE_LOCAL_READS);
    ServerCommand command =
        new ServerCommand(unsafe ? NegativeControls::startWithUnsafeLocalReads : IdemServer::start);
    CommandLine cli = new CommandLine(command);
    cli.setParameterExceptionHandler(
        (ex, a) -> {
          System.err.println("idem-lab node: " + ex.getMessage());
          return 2;
        });
    System.exit(cli.execute(rest.toArray(String[]::new)));
  }
}
