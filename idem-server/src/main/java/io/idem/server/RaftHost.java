package io.idem.server;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.ratis.protocol.ClientId;
import org.apache.ratis.protocol.GroupManagementRequest;
import org.apache.ratis.protocol.RaftClientReply;
import org.apache.ratis.protocol.RaftGroup;
import org.apache.ratis.protocol.RaftGroupId;
import org.apache.ratis.protocol.RaftPeer;
import org.apache.ratis.protocol.RaftPeerId;
import org.apache.ratis.server.RaftServer;
import org.apache.ratis.server.storage.RaftStorage;

/**
 * A node's Ratis server and the Raft groups it hosts: one for a cluster of one group; the metadata
 * group (0) and the data groups 1 to G for a cluster of several. Every group has its own {@link
 * IdemStateMachine}, log and snapshots, in a directory of its own under the node's data directory;
 * they share the Raft port, its connections and the server's threads.
 *
 * <p>On a first start every group is created with the configured peers. In a cluster of several
 * groups each group prefers one node as its leader (Ratis's peer priority: a leader yields to a
 * caught-up peer of higher priority), group {@code g} the peer at position {@code g - 1} modulo the
 * number of peers (the metadata group the first), so that leaders spread over the nodes and come
 * back after a node restarts; the leader balancer ({@link LeaderPlan}) plans the groups that lose
 * that member to a membership change. On a restart each group is recovered from its directory, with
 * the configured peers as its initial configuration and the configuration stored there, if any,
 * over it ({@link #park}).
 */
final class RaftHost implements AutoCloseable {
  /** How long adding a group to the local server at the first start may take. */
  private static final long ADD_GROUP_TIMEOUT_MS = 30_000;

  private final RaftServer server;

  /**
   * Starts the server with the given groups' state machines.
   *
   * @param machines the state machine of each group number (0: metadata, 1...: data)
   */
  RaftHost(ServerConfig config, Map<Integer, IdemStateMachine> machines) throws IOException {
    Map<RaftGroupId, IdemStateMachine> byId = new java.util.HashMap<>();
    machines.forEach((g, m) -> byId.put(RaftNode.groupId(g), m));
    Set<Integer> recovering = park(config.dataDir(), machines.keySet());
    this.server =
        RaftServer.newBuilder()
            .setServerId(RaftPeerId.valueOf(config.id()))
            .setStateMachineRegistry(
                id -> {
                  IdemStateMachine m = byId.get(id);
                  if (m == null) {
                    throw new IllegalStateException(
                        "the data directory holds Raft group "
                            + id
                            + ", which is not one of this node's "
                            + machines.size()
                            + " groups: was it started with another --groups?");
                  }
                  return m;
                })
            .setProperties(RaftNode.properties(config))
            .setParameters(RaftNode.parameters(config))
            .setOption(RaftStorage.StartupOption.RECOVER)
            .build();
    server.start();
    try {
      addGroups(config, machines.keySet(), recovering);
    } catch (IOException | RuntimeException e) {
      server.close();
      throw e;
    }
  }

  /**
   * The Raft group {@code g} with the configured peers and their priorities, or with no peers for a
   * joining node (the leader's configuration names it later).
   */
  private static RaftGroup group(ServerConfig config, int g) {
    RaftGroupId id = RaftNode.groupId(g);
    if (config.join()) {
      return RaftGroup.valueOf(id);
    }
    String preferred = preferredLeader(config, g);
    List<RaftPeer> raft = new ArrayList<>();
    for (ServerConfig.Peer p : config.peers()) {
      raft.add(
          RaftPeer.newBuilder()
              .setId(p.id())
              .setAddress(p.raftAddress())
              .setClientAddress(p.clientAddress())
              .setPriority(p.id().equals(preferred) ? 1 : 0)
              .build());
    }
    return RaftGroup.valueOf(id, raft);
  }

  /**
   * The node group {@code g} prefers as its leader in a cluster of several groups: the metadata
   * group the first of {@code --peers}, data group g the one at position {@code (g - 1) mod N};
   * null in a cluster of one group.
   */
  static String preferredLeader(ServerConfig config, int g) {
    List<ServerConfig.Peer> peers = config.peers();
    if (config.groups() == 1 || peers.isEmpty()) {
      return null;
    }
    return peers.get(g == 0 ? 0 : (g - 1) % peers.size()).id();
  }

  /** The name a group's directory has while the node starts ({@link #park}). */
  private static Path parked(Path dataDir, int g) {
    return dataDir.resolve(RaftNode.groupId(g).getUuid() + PARKED);
  }

  private static final String PARKED = ".recovering";

  /**
   * Moves the directories of this node's groups aside before Ratis starts, and says which groups
   * had one. Ratis recovers every group directory it finds at start with an empty initial
   * configuration, and a replica whose storage holds no configuration yet (killed before it applied
   * its group's first configuration entry, an empty log) then finds itself in no configuration and
   * closes for good ({@code NOT_IN_CONF}): the node serves without that replica. Moved aside, each
   * is added back by {@link #addGroups} with the configured peers as its initial configuration, as
   * Ratis does for the one group given to its builder; a configuration in the replica's storage
   * (its metadata file or its log) still overrides it.
   *
   * <p>A directory already moved aside by a start that died before adding it back is taken as is.
   */
  private static Set<Integer> park(Path dataDir, Set<Integer> groups) throws IOException {
    Set<Integer> found = new java.util.TreeSet<>();
    for (int g : groups) {
      Path dir = dataDir.resolve(RaftNode.groupId(g).getUuid().toString());
      Path aside = parked(dataDir, g);
      boolean live = Files.isDirectory(dir);
      if (live && Files.exists(aside)) {
        throw new IOException(
            "group "
                + g
                + " has two directories, "
                + dir
                + " and "
                + aside
                + ": keep the one with the newer log and remove the other");
      }
      if (live) {
        Files.move(dir, aside, StandardCopyOption.ATOMIC_MOVE);
      }
      if (live || Files.isDirectory(aside)) {
        found.add(g);
      }
    }
    return found;
  }

  /**
   * Adds every group to the started server: a recovered one from its directory moved aside ({@link
   * #park}), a new one formatted; each with the configured peers as its initial configuration.
   */
  private void addGroups(ServerConfig config, Set<Integer> groups, Set<Integer> recovering)
      throws IOException {
    ClientId me = ClientId.randomId();
    long call = 0;
    for (int g : groups) {
      boolean recover = recovering.contains(g);
      if (recover) {
        Files.move(
            parked(config.dataDir(), g),
            config.dataDir().resolve(RaftNode.groupId(g).getUuid().toString()),
            StandardCopyOption.ATOMIC_MOVE);
      }
      GroupManagementRequest add =
          GroupManagementRequest.newAdd(me, server.getId(), ++call, group(config, g), !recover);
      String what = (recover ? "recover" : "create") + " Raft group " + g;
      RaftClientReply reply;
      try {
        reply = server.groupManagementAsync(add).get(ADD_GROUP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
      } catch (ExecutionException | TimeoutException e) {
        throw new IOException("cannot " + what + ": " + e, e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException("interrupted while trying to " + what, e);
      }
      if (!reply.isSuccess()) {
        throw new IOException("cannot " + what + ": " + reply.getException());
      }
    }
    List<RaftGroupId> now = new ArrayList<>();
    server.getGroupIds().forEach(now::add);
    if (now.size() != groups.size()) {
      throw new IOException(
          "the node hosts "
              + now.size()
              + " Raft groups, expected "
              + groups.size()
              + ": its data directory was made with another --groups");
    }
  }

  /** The Ratis server. */
  RaftServer server() {
    return server;
  }

  @Override
  public void close() throws IOException {
    server.close();
  }
}
