package io.idem.cli;

import io.idem.client.ClusterStatus;
import io.idem.client.IdemClient;
import io.idem.client.IdemException;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code idem group members|add|move|remove}: the members of one Raft group of a cluster of
 * several, and moving a group's replica from one node to another through that group's own
 * configuration change (the ChangeMembers RPC naming the group; docs/OPERATIONS.md, "Moving a
 * group").
 */
@Command(
    name = "group",
    mixinStandardHelpOptions = true,
    description =
        "One Raft group of a cluster of several: list its members, add a node to it, or move its"
            + " replica from one node to another.",
    subcommands = {
      GroupCommand.Members.class,
      GroupCommand.Add.class,
      GroupCommand.Move.class,
      GroupCommand.Remove.class
    })
final class GroupCommand {
  private GroupCommand() {}

  /** The node a replica goes to: its id and addresses, as `idem server --join` started it. */
  static final class NewNode {
    @Option(names = "--id", required = true, description = "The new node's id.")
    String id;

    @Option(
        names = "--raft-address",
        required = true,
        description = "host:port where its peers reach the new node.")
    String raftAddress;

    @Option(
        names = "--client-address",
        required = true,
        description = "host:port where clients reach the new node.")
    String clientAddress;
  }

  @Command(
      name = "members",
      mixinStandardHelpOptions = true,
      description =
          "Prints the members of group --group as the first server that answers sees them.")
  static final class Members implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Option(names = "--group", required = true, description = "The group: 0 (metadata) to G.")
    int group;

    @Override
    public Integer call() {
      try (IdemClient client = MemberCommand.client(options)) {
        ClusterStatus s = client.status(group);
        PrintWriter out = spec.commandLine().getOut();
        out.println(
            "group "
                + group
                + ": leader "
                + (s.leaderId().isEmpty() ? "?" : s.leaderId())
                + ", term "
                + s.term()
                + ", applied "
                + s.appliedIndex());
        MemberCommand.printMembers(out, s.members());
        return 0;
      } catch (IdemException e) {
        spec.commandLine().getErr().println("idem: " + e.getMessage());
        return 1;
      }
    }
  }

  @Command(
      name = "add",
      mixinStandardHelpOptions = true,
      description =
          "Adds node --id (started first with `idem server --join --groups G`) to group --group: it"
              + " catches up, then votes. A node joins the metadata group (0) before any data"
              + " group, whose leaders check clients' registrations in their replica of group 0.")
  static final class Add implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Option(names = "--group", required = true, description = "The group: 0 (metadata) to G.")
    int group;

    @Mixin NewNode node;

    @Option(
        names = "--wait",
        defaultValue = MemberCommand.DEFAULT_WAIT,
        converter = DurationConverter.class,
        description = "How long the change may take. Default: ${DEFAULT-VALUE}.")
    Duration wait;

    @Override
    public Integer call() {
      ClusterStatus.Member m;
      try {
        m = MemberCommand.member(node.id, node.raftAddress, node.clientAddress);
      } catch (IllegalArgumentException e) {
        spec.commandLine().getErr().println("idem: " + e.getMessage() + " (see --help)");
        return 2;
      }
      return MemberCommand.change(
          options,
          spec,
          group,
          List.of(m),
          List.of(),
          wait,
          "adding " + node.id + " in group " + group);
    }
  }

  @Command(
      name = "remove",
      mixinStandardHelpOptions = true,
      description =
          "Removes node --id's replica of group --group (the second step of a move, alone). The"
              + " group must keep at least one member.")
  static final class Remove implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Option(names = "--group", required = true, description = "The group: 0 (metadata) to G.")
    int group;

    @Option(names = "--id", required = true, description = "The node whose replica leaves.")
    String id;

    @Option(
        names = "--wait",
        defaultValue = MemberCommand.DEFAULT_WAIT,
        converter = DurationConverter.class,
        description = "How long the change may take. Default: ${DEFAULT-VALUE}.")
    Duration wait;

    @Override
    public Integer call() {
      return MemberCommand.change(
          options,
          spec,
          group,
          List.of(),
          List.of(id),
          wait,
          "removing " + id + " in group " + group);
    }
  }

  @Command(
      name = "move",
      mixinStandardHelpOptions = true,
      description =
          "Moves group --group's replica from node --from to node --id (started first with `idem"
              + " server --join --groups G`, which hosts every group as a member of none): adds the"
              + " new replica (it catches up, then votes), and only once that committed removes the"
              + " old one. The other groups keep their members. If the removal fails, the new"
              + " replica stays and the old one is named: run `idem group remove`.")
  static final class Move implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Option(names = "--group", required = true, description = "The group: 0 (metadata) to G.")
    int group;

    @Option(names = "--from", required = true, description = "The node the replica leaves.")
    String from;

    @Mixin NewNode node;

    @Option(
        names = "--wait",
        defaultValue = MemberCommand.DEFAULT_WAIT,
        converter = DurationConverter.class,
        description = "How long each of the two changes may take. Default: ${DEFAULT-VALUE}.")
    Duration wait;

    @Override
    public Integer call() {
      return MemberCommand.replace(
          options, spec, group, from, node.id, node.raftAddress, node.clientAddress, wait);
    }
  }
}
