package io.idem.cli;

import io.idem.client.ClusterStatus;
import io.idem.client.IdemClient;
import io.idem.client.InvalidArgumentException;
import io.idem.client.MembershipChange;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code idem member list|add|remove|replace}: the cluster's members, changed through Raft's
 * configuration change on the leader (the ChangeMembers RPC; docs/OPERATIONS.md).
 */
@Command(
    name = "member",
    mixinStandardHelpOptions = true,
    description = "The cluster's members: list them, add, remove or replace one.",
    subcommands = {
      MemberCommand.ListMembers.class,
      MemberCommand.Add.class,
      MemberCommand.Remove.class,
      MemberCommand.Replace.class
    })
final class MemberCommand {
  private MemberCommand() {}

  /** How long a change may take: a new member catches up first. */
  static final String DEFAULT_WAIT = "60s";

  static IdemClient client(ClientOptions options) {
    return IdemClient.builder()
        .servers(options.servers)
        .requestTimeout(options.timeout)
        .tls(options.tls())
        .build();
  }

  /** The members as the first server that answers (the leader, if one does) reports them. */
  static Optional<ClusterStatus> leaderStatus(ClientOptions options) {
    ClusterStatus first = null;
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
        if (s.role().equals("LEADER")) {
          return Optional.of(s);
        }
        first = first == null ? s : first;
        if (!s.leaderAddress().isEmpty()) {
          try (IdemClient l =
              IdemClient.builder()
                  .servers(s.leaderAddress())
                  .requestTimeout(options.timeout)
                  .tls(options.tls())
                  .build()) {
            return Optional.of(l.status());
          } catch (RuntimeException e) {
            // the leader did not answer: report what this server says
          }
        }
      } catch (RuntimeException e) {
        // try the next server
      }
    }
    return Optional.ofNullable(first);
  }

  /** Runs a change and prints its outcome; the exit code. */
  static int change(
      ClientOptions options,
      CommandSpec spec,
      List<ClusterStatus.Member> add,
      List<String> remove,
      Duration wait,
      String what) {
    return change(options, spec, -1, add, remove, wait, what);
  }

  /**
   * Runs a change of group {@code group}'s members (-1: the cluster's, as a cluster of one group)
   * and prints its outcome; the exit code.
   */
  static int change(
      ClientOptions options,
      CommandSpec spec,
      int group,
      List<ClusterStatus.Member> add,
      List<String> remove,
      Duration wait,
      String what) {
    PrintWriter out = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    MembershipChange c;
    try (IdemClient client = client(options)) {
      c =
          group < 0
              ? client.changeMembers(add, remove, wait)
              : client.changeMembers(group, add, remove, wait);
    } catch (InvalidArgumentException e) {
      err.println("idem: refused, nothing changed: " + e.getMessage());
      return 1;
    }
    if (!c.committed()) {
      err.println("idem: " + what + " did not commit: " + c.message());
      printMembers(err, c.members());
      return 1;
    }
    out.println(what + " committed" + (c.message().isEmpty() ? "" : " (" + c.message() + ")"));
    printMembers(out, c.members());
    return 0;
  }

  static void printMembers(PrintWriter out, List<ClusterStatus.Member> members) {
    out.print("members:");
    members.forEach(
        m -> out.print(" " + m.id() + "=" + m.clientAddress() + (m.voter() ? "" : "(leaving)")));
    out.println();
  }

  @Command(
      name = "list",
      mixinStandardHelpOptions = true,
      description =
          "Lists the members (as the leader reports them) with their raft and client addresses,"
              + " and each one's role and applied index as it reports them itself.")
  static final class ListMembers implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Override
    public Integer call() {
      PrintWriter out = spec.commandLine().getOut();
      Optional<ClusterStatus> leader = leaderStatus(options);
      if (leader.isEmpty()) {
        spec.commandLine().getErr().println("idem: no server reachable at " + options.servers);
        return 1;
      }
      String format = "%-10s %-22s %-22s %-12s %-8s %s%n";
      out.printf(format, "id", "raft", "client", "role", "voter", "applied");
      for (ClusterStatus.Member m : leader.get().members()) {
        String role;
        String applied;
        try (IdemClient c =
            IdemClient.builder()
                .servers(m.clientAddress())
                .requestTimeout(options.timeout)
                .tls(options.tls())
                .build()) {
          ClusterStatus s = c.status();
          role = s.role();
          applied = Long.toString(s.appliedIndex());
        } catch (RuntimeException e) {
          role = "unreachable";
          applied = "-";
        }
        out.printf(
            format,
            m.id(),
            m.raftAddress(),
            m.clientAddress(),
            role,
            m.voter() ? "voter" : "leaving",
            applied);
      }
      return 0;
    }
  }

  @Command(
      name = "add",
      mixinStandardHelpOptions = true,
      description =
          "Adds a member. Start its process first, empty, with `idem server --join --id ID"
              + " --raft-address HOST:PORT --client-address HOST:PORT`; the leader lets it catch up"
              + " as a non-voter, then makes it a voter. The id must be new: never the id of a"
              + " node that was ever a member (docs/OPERATIONS.md).")
  static final class Add implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Option(names = "--id", required = true, description = "The new member's id.")
    String id;

    @Option(
        names = "--raft-address",
        required = true,
        description = "host:port where its peers reach it (its --raft-address).")
    String raftAddress;

    @Option(
        names = "--client-address",
        required = true,
        description = "host:port where clients reach it (its --client-address).")
    String clientAddress;

    @Option(
        names = "--wait",
        defaultValue = DEFAULT_WAIT,
        converter = DurationConverter.class,
        description =
            "How long the new member may take to catch up and the change to commit. Default:"
                + " ${DEFAULT-VALUE}.")
    Duration wait;

    @Override
    public Integer call() {
      ClusterStatus.Member m;
      try {
        m = member(id, raftAddress, clientAddress);
      } catch (IllegalArgumentException e) {
        spec.commandLine().getErr().println("idem: " + e.getMessage() + " (see --help)");
        return 2;
      }
      return change(options, spec, List.of(m), List.of(), wait, "adding " + id);
    }
  }

  @Command(
      name = "remove",
      mixinStandardHelpOptions = true,
      description =
          "Removes a member. Removing the leader is allowed: it commits the change, then steps"
              + " down, and the others elect a leader. The last member cannot be removed. Stop the"
              + " removed node's process afterwards.")
  static final class Remove implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Option(names = "--id", required = true, description = "The member to remove.")
    String id;

    @Option(
        names = "--wait",
        defaultValue = DEFAULT_WAIT,
        converter = DurationConverter.class,
        description = "How long the change may take to commit. Default: ${DEFAULT-VALUE}.")
    Duration wait;

    @Override
    public Integer call() {
      return change(options, spec, List.of(), List.of(id), wait, "removing " + id);
    }
  }

  @Command(
      name = "replace",
      mixinStandardHelpOptions = true,
      description =
          "Replaces member --old by a new member (started first with `idem server --join`): adds"
              + " the new one (it catches up, then votes), and only once that committed removes the"
              + " old one. If the removal fails, the new member stays and the old one is named:"
              + " run `idem member remove --id OLD`.")
  static final class Replace implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Option(names = "--old", required = true, description = "The member to replace.")
    String old;

    @Option(names = "--id", required = true, description = "The new member's id (a new one).")
    String id;

    @Option(
        names = "--raft-address",
        required = true,
        description = "host:port where its peers reach the new member.")
    String raftAddress;

    @Option(
        names = "--client-address",
        required = true,
        description = "host:port where clients reach the new member.")
    String clientAddress;

    @Option(
        names = "--wait",
        defaultValue = DEFAULT_WAIT,
        converter = DurationConverter.class,
        description = "How long each of the two changes may take. Default: ${DEFAULT-VALUE}.")
    Duration wait;

    @Override
    public Integer call() {
      return replace(options, spec, -1, old, id, raftAddress, clientAddress, wait);
    }
  }

  /**
   * Replaces member {@code old} of group {@code group} (-1: of the cluster, as a cluster of one
   * group) by a new member: checks the input and that {@code old} is a member, adds the new one,
   * and once that committed removes {@code old}. Prints each step; the exit code.
   */
  static int replace(
      ClientOptions options,
      CommandSpec spec,
      int group,
      String old,
      String id,
      String raftAddress,
      String clientAddress,
      Duration wait) {
    PrintWriter err = spec.commandLine().getErr();
    ClusterStatus.Member m;
    try {
      m = member(id, raftAddress, clientAddress);
    } catch (IllegalArgumentException e) {
      err.println("idem: " + e.getMessage() + " (see --help)");
      return 2;
    }
    if (old.equals(id)) {
      err.println(
          "idem: the new member needs a new id, not "
              + id
              + " (a node never comes back under its old id: docs/OPERATIONS.md) (see --help)");
      return 2;
    }
    // Check the old id before adding anything, so that a typo changes nothing.
    Optional<ClusterStatus> before;
    if (group < 0) {
      before = leaderStatus(options);
    } else {
      try (IdemClient client = client(options)) {
        before = Optional.of(client.status(group));
      } catch (io.idem.client.IdemException e) {
        err.println("idem: refused, nothing changed: " + e.getMessage());
        return 1;
      }
    }
    String in = group < 0 ? "" : " in group " + group;
    if (before.isPresent() && before.get().members().stream().noneMatch(x -> x.id().equals(old))) {
      err.println(
          "idem: refused, nothing changed: "
              + (group < 0
                  ? "no member " + old + " to replace"
                  : old + " holds no replica of group " + group));
      printMembers(err, before.get().members());
      return 1;
    }
    int added = change(options, spec, group, List.of(m), List.of(), wait, "adding " + id + in);
    if (added != 0) {
      return added;
    }
    int removed =
        change(options, spec, group, List.of(), List.of(old), wait, "removing " + old + in);
    if (removed != 0) {
      err.println(
          "idem: "
              + id
              + " was added"
              + in
              + " but "
              + old
              + " is still a member: run `"
              + (group < 0
                  ? "idem member remove --id " + old
                  : "idem group remove --group " + group + " --id " + old)
              + "`");
    }
    return removed;
  }

  /** A member from the options; IllegalArgumentException names a bad part. */
  static ClusterStatus.Member member(String id, String raftAddress, String clientAddress) {
    if (!id.matches("[A-Za-z0-9_-]{1,64}")) {
      throw new IllegalArgumentException(
          "--id must be 1-64 letters, digits, '_' or '-', got \"" + id + "\"");
    }
    checkAddress("--raft-address", raftAddress);
    checkAddress("--client-address", clientAddress);
    return new ClusterStatus.Member(id, raftAddress, clientAddress, true);
  }

  private static void checkAddress(String option, String address) {
    int colon = address.lastIndexOf(':');
    boolean ok = colon > 0;
    if (ok) {
      try {
        int port = Integer.parseInt(address.substring(colon + 1));
        ok = port > 0 && port <= 65535;
      } catch (NumberFormatException e) {
        ok = false;
      }
    }
    if (!ok) {
      throw new IllegalArgumentException(option + " must be host:port, got \"" + address + "\"");
    }
  }
}
