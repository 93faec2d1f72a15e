package io.idem.cli;

import io.idem.client.ClusterStatus;
import io.idem.client.IdemClient;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;

/** {@code idem status}: what every listed node says about itself and the cluster. */
@Command(
    name = "status",
    mixinStandardHelpOptions = true,
    description = "Members, leader, term, applied index, live sessions, duplicates suppressed.")
final class StatusCommand implements Callable<Integer> {
  @Mixin ClientOptions options;

  @Override
  public Integer call() {
    int reachable = 0;
    String format = "%-6s %-10s %6s %-8s %10s %9s %11s %8s %12s %7s %12s  %s%n";
    System.out.printf(
        format,
        "node",
        "role",
        "term",
        "leader",
        "applied",
        "sessions",
        "duplicates",
        "kv keys",
        "key records",
        "leases",
        "cmds/entry",
        "digest@snapshot");
    ClusterStatus any = null;
    for (String server : options.servers.split(",")) {
      if (server.isBlank()) {
        continue;
      }
      try (IdemClient c =
          IdemClient.builder()
              .servers(server.trim())
              .requestTimeout(options.timeout)
              .tls(options.tls())
              .build()) {
        ClusterStatus s = c.status();
        any = s;
        reachable++;
        String perEntry =
            s.entriesAppended() == 0
                ? "-"
                : String.format("%.1f", s.commandsAppended() / (double) s.entriesAppended());
        System.out.printf(
            format,
            s.id(),
            s.role(),
            s.term(),
            s.leaderId().isEmpty() ? "?" : s.leaderId(),
            s.appliedIndex(),
            s.liveSessions(),
            s.duplicatesSuppressed(),
            s.keys(),
            s.keyRecords(),
            s.leases(),
            perEntry,
            s.digestIndex() == 0
                ? "-"
                : s.digest().substring(0, Math.min(16, s.digest().length()))
                    + "@"
                    + s.digestIndex());
      } catch (RuntimeException e) {
        System.out.printf("%-22s unreachable: %s%n", server.trim(), Errors.oneLine(e));
      }
    }
    if (any != null) {
      System.out.print("members:");
      any.members().forEach(m -> System.out.print(" " + m.id() + "=" + m.clientAddress()));
      System.out.println();
      System.out.println(
          "config revision: " + any.config().revision() + " (idem config show prints it)");
    }
    if (reachable == 0) {
      System.err.println("idem: no server reachable at " + options.servers);
      return 1;
    }
    return 0;
  }
}
