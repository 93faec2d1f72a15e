package io.idem.server;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
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
 * back after a node restarts. On a restart Ratis recovers the groups from the data directory, with
 * the configurations stored there.
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
  RaftHost(ServerConfig config, Map<Integer, IdemStateMachine> machines, boolean unsafeLocalReads)
      throws IOException {
    Map<RaftGroupId, IdemStateMachine> byId = new java.util.HashMap<>();
    machines.forEach((g, m) -> byId.put(RaftNode.groupId(g), m));
    this.server =
        RaftServer.newBuilder()
            .setServerId(RaftPeerId.valueOf(config.id()))
            .setGroup(group(config, 1))
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
            .setProperties(RaftNode.properties(config, unsafeLocalReads))
            .setParameters(RaftNode.parameters(config))
            .setOption(RaftStorage.StartupOption.RECOVER)
            .build();
    server.start();
    try {
      addMissing(config, machines);
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

  /** Adds the groups a first start has not created yet (a restart recovered them all). */
  private void addMissing(ServerConfig config, Map<Integer, IdemStateMachine> machines)
      throws IOException {
    List<RaftGroupId> present = new ArrayList<>();
    server.getGroupIds().forEach(present::add);
    ClientId me = ClientId.randomId();
    long call = 0;
    for (int g : machines.keySet()) {
      if (present.contains(RaftNode.groupId(g))) {
        continue;
      }
      GroupManagementRequest add =
          GroupManagementRequest.newAdd(me, server.getId(), ++call, group(config, g), true);
      RaftClientReply reply;
      try {
        reply = server.groupManagementAsync(add).get(ADD_GROUP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
      } catch (ExecutionException | TimeoutException e) {
        throw new IOException("cannot create Raft group " + g + ": " + e, e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException("interrupted while creating Raft group " + g, e);
      }
      if (!reply.isSuccess()) {
        throw new IOException("cannot create Raft group " + g + ": " + reply.getException());
      }
    }
    List<RaftGroupId> now = new ArrayList<>();
    server.getGroupIds().forEach(now::add);
    if (now.size() != machines.size()) {
      throw new IOException(
          "the node hosts "
              + now.size()
              + " Raft groups, expected "
              + machines.size()
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
