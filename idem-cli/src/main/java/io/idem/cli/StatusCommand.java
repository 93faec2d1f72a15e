package io.idem.cli;

import io.idem.client.ClusterStatus;
import io.idem.client.IdemClient;
import java.io.PrintWriter;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

/** {@code idem status}: what every listed node says about itself and the cluster. */
@Command(
    name = "status",
    mixinStandardHelpOptions = true,
    description = "Members, leader, term, applied index, live sessions, duplicates suppressed.")
final class StatusCommand implements Callable<Integer> {
  @Mixin ClientOptions options;
  @Spec CommandSpec spec;

  @Override
  public Integer call() {
    PrintWriter out = spec.commandLine().getOut();
    int reachable = 0;
    String format = "%-6s %-10s %6s %-8s %10s %9s %11s %8s %12s %7s %12s  %s%n";
    out.printf(
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
    StringBuilder maxFormats = new StringBuilder();
    long skipped = 0;
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
        maxFormats.append(' ').append(s.id()).append('=').append(s.maxLogFormat());
        skipped += s.entriesSkipped();
        reachable++;
        String perEntry =
            s.entriesAppended() == 0
                ? "-"
                : String.format("%.1f", s.commandsAppended() / (double) s.entriesAppended());
        out.printf(
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
        out.printf("%-22s unreachable: %s%n", server.trim(), Errors.oneLine(e));
      }
    }
    printGroups(out);
    if (any != null) {
      out.print("members:");
      any.members().forEach(m -> out.print(" " + m.id() + "=" + m.clientAddress()));
      out.println();
      out.println("config revision: " + any.config().revision() + " (idem config show prints it)");
      out.println(
          "log-format: "
              + (any.logFormat() == 0 ? "not configured" : any.logFormat())
              + "; max-log-format:"
              + maxFormats
              + (skipped == 0 ? "" : "; entries skipped as undecodable: " + skipped));
      if (any.config().backendBytes() != 0) {
        out.printf(
            "backend: %.1f of %.1f MiB (%d%%)%s%n",
            any.backendUsedBytes() / 1048576.0,
            any.config().backendBytes() / 1048576.0,
            any.backendUsedBytes() * 100 / any.config().backendBytes(),
            any.noSpaceAlarm()
                ? "; NO_SPACE alarm raised: writes that grow the state are refused until it is"
                    + " below 90% (delete, complete or release to free space, or raise"
                    + " --backend-bytes with idem config set)"
                : "");
      }
      out.println(
          any.authEnabled()
              ? "auth: on"
              : "auth: OFF: anyone who reaches the client port may do anything, reconfigure the"
                  + " cluster included (docs/SECURITY.md)");
    }
    if (reachable == 0) {
      spec.commandLine().getErr().println("idem: no server reachable at " + options.servers);
      return 1;
    }
    return 0;
  }

  /**
   * In a cluster of several Raft groups, one line per group and node: its role, leader, term and
   * applied index as that node sees it.
   */
  private void printGroups(PrintWriter out) {
    boolean header = false;
    for (String server : options.servers.split(",")) {
      if (server.isBlank()) {
        continue;
      }
      io.idem.proto.StatusReply s;
      try {
        s = LeaderCall.status(options, server.trim());
      } catch (RuntimeException e) {
        continue; // the table above says it is unreachable
      }
      if (s.getGroupsCount() == 0) {
        return; // a cluster of one group
      }
      String format = "%-6s %-6s %-10s %-8s %6s %10s %9s %8s %12s%n";
      if (!header) {
        out.printf(
            "groups: %d data groups and the metadata group (0); partition map epoch %d%n",
            s.getMap().getGroupCount(), s.getMap().getEpoch());
        out.printf(
            format,
            "node",
            "group",
            "role",
            "leader",
            "term",
            "applied",
            "sessions",
            "kv keys",
            "key records");
        header = true;
      }
      for (io.idem.proto.GroupStatus g : s.getGroupsList()) {
        out.printf(
            format,
            s.getId(),
            g.getGroup(),
            g.getRole(),
            g.getLeaderId().isEmpty() ? "?" : g.getLeaderId(),
            g.getTerm(),
            g.getAppliedIndex(),
            g.getLiveSessions(),
            g.getKeys(),
            g.getKeyRecords());
      }
    }
  }
}
