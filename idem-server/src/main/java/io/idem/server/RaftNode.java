package io.idem.server;

import io.idem.proto.EntryResult;
import io.idem.proto.GetKeyReply;
import io.idem.proto.GetKeyRequest;
import io.idem.proto.GetReply;
import io.idem.proto.LogEntry;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.ratis.conf.Parameters;
import org.apache.ratis.conf.RaftProperties;
import org.apache.ratis.grpc.GrpcConfigKeys;
import org.apache.ratis.grpc.GrpcTlsConfig;
import org.apache.ratis.proto.RaftProtos.RaftPeerRole;
import org.apache.ratis.protocol.ClientId;
import org.apache.ratis.protocol.Message;
import org.apache.ratis.protocol.RaftClientReply;
import org.apache.ratis.protocol.RaftClientRequest;
import org.apache.ratis.protocol.RaftGroupId;
import org.apache.ratis.protocol.RaftPeer;
import org.apache.ratis.protocol.RaftPeerId;
import org.apache.ratis.protocol.SetConfigurationRequest;
import org.apache.ratis.server.DivisionInfo;
import org.apache.ratis.server.RaftConfiguration;
import org.apache.ratis.server.RaftServer;
import org.apache.ratis.server.RaftServerConfigKeys;
import org.apache.ratis.thirdparty.com.google.protobuf.UnsafeByteOperations;
import org.apache.ratis.util.SizeInBytes;
import org.apache.ratis.util.TimeDuration;
import org.jspecify.annotations.Nullable;

/**
 * One Raft group of an Idem node, seen as a {@link ReplicatedLog}: a division of the node's Ratis
 * server ({@link RaftHost}), which may host several. Entries are submitted to the local server
 * directly ({@link RaftServer#submitClientRequestAsync}), without a Raft client round trip; reads
 * read the local state machine behind the batcher's read barrier.
 */
final class RaftNode implements ReplicatedLog {
  /**
   * The group of a cluster of one group, and group 1 of a cluster of several: every Idem cluster
   * uses it; a cluster is defined by its peers.
   */
  static final RaftGroupId GROUP_ID =
      RaftGroupId.valueOf(UUID.nameUUIDFromBytes("idem".getBytes(StandardCharsets.UTF_8)));

  private final RaftServer server;
  private final RaftGroupId groupId;
  private final int group;
  private final ClientId clientId;
  private final AtomicLong callId = new AtomicLong();
  private final AtomicLong hints = new AtomicLong();
  // The configuration last read, for the hints of a replica Ratis closed (moved away).
  private volatile @Nullable RaftConfiguration lastConfiguration;
  private final IdemStateMachine stateMachine;

  /**
   * @param server the node's Ratis server, which hosts the group
   * @param group the group's number: 0 for the metadata group, 1 and up for data groups
   */
  RaftNode(RaftServer server, int group, IdemStateMachine stateMachine) {
    this.server = server;
    this.group = group;
    this.groupId = groupId(group);
    this.stateMachine = stateMachine;
    // The state machine admits proposals only under this id (IdemStateMachine.startTransaction).
    this.clientId = stateMachine.proposer();
  }

  /**
   * The Ratis id of group {@code group}: {@link #GROUP_ID} for group 1 (so that a cluster of one
   * group keeps the id it always had), a name-based UUID for the others.
   */
  static RaftGroupId groupId(int group) {
    if (group == 1) {
      return GROUP_ID;
    }
    return RaftGroupId.valueOf(
        UUID.nameUUIDFromBytes(
            (group == 0 ? "idem-meta" : "idem-group-" + group).getBytes(StandardCharsets.UTF_8)));
  }

  /** The group's number: 0 for the metadata group, 1 and up for data groups. */
  int group() {
    return group;
  }

  /**
   * Mutual TLS between peers when the node has TLS files (the Raft port's own, else the node's),
   * and on every node the {@link PeerGate}, which closes Ratis's client and admin services on the
   * Raft port and, under TLS, admits the named peers only.
   */
  static Parameters parameters(ServerConfig c) {
    Parameters p = new Parameters();
    TlsFiles tls = c.raftTls();
    if (tls != null) {
      GrpcConfigKeys.TLS.setConf(
          p,
          new GrpcTlsConfig(
              tls.privateKey().toFile(),
              tls.certificateChain().toFile(),
              tls.trustedCertificates().toFile(),
              true));
    }
    GrpcConfigKeys.Server.setServicesCustomizer(p, new PeerGate(c.peerSubjects()));
    return p;
  }

  static RaftProperties properties(ServerConfig c) {
    RaftProperties p = new RaftProperties();
    RaftServerConfigKeys.setStorageDir(p, List.of(c.dataDir().toFile()));
    String raft = c.self().raftAddress();
    GrpcConfigKeys.Server.setHost(p, raft.substring(0, raft.lastIndexOf(':')));
    GrpcConfigKeys.Server.setPort(p, Integer.parseInt(raft.substring(raft.lastIndexOf(':') + 1)));
    RaftServerConfigKeys.Rpc.setTimeoutMin(
        p,
        TimeDuration.valueOf(c.electionTimeoutMinMs(), java.util.concurrent.TimeUnit.MILLISECONDS));
    RaftServerConfigKeys.Rpc.setTimeoutMax(
        p,
        TimeDuration.valueOf(c.electionTimeoutMaxMs(), java.util.concurrent.TimeUnit.MILLISECONDS));
    // Idem's reads do not go through Ratis (they read the state machine behind the batcher's read
    // barrier, FrontDoor.get). A read-only request a member might send is answered with Ratis's
    // ReadIndex, never from a leader lease (Read.leaderLeaseEnabled stays off, its default).
    RaftServerConfigKeys.Read.setOption(p, RaftServerConfigKeys.Read.Option.LINEARIZABLE);
    RaftServerConfigKeys.Snapshot.setAutoTriggerEnabled(p, true);
    RaftServerConfigKeys.Snapshot.setAutoTriggerThreshold(p, c.snapshotEveryEntries());
    RaftServerConfigKeys.Snapshot.setRetentionFileNum(p, c.snapshotsRetained());
    RaftServerConfigKeys.Log.setPurgeUptoSnapshotIndex(p, true);
    // Ratis's log metadata entries record the commit index in the log: one extra entry and fsync
    // per commit, which halved throughput (docs/PERFORMANCE.md). Raft does not need the commit
    // index durable; a restarted node learns it from the leader.
    RaftServerConfigKeys.Log.setLogMetadataEnabled(p, false);
    // A follower appends each request's entries on the gRPC thread that received it (one stream's
    // requests arrive one after the other). Ratis 3.3.0's default instead chains every append onto
    // one shared future: once a single append fails, every later link fails with that same
    // exception and the follower accepts no entry until it restarts. It happened after a leader
    // isolation (docs/PERFORMANCE.md, "A follower that stopped appending").
    RaftServerConfigKeys.Log.setAppendEntriesComposeEnabled(p, false);
    // Ratis's retry cache keeps every write's reply, which holds the outcomes of all the commands
    // in its entry, so that a client's retry of the same call id gets that reply again. Idem never
    // retries a call id (every append, read and change takes a new one; retries of commands are
    // the sessions' business, in the log), so the cache is only read while a call is pending. At
    // Ratis's default of 60 s a busy leader held a minute of outcomes (339,000 results after 38 s
    // of the keys bench), all copied through the young generation (docs/PERFORMANCE.md).
    RaftServerConfigKeys.RetryCache.setExpiryTime(
        p, TimeDuration.valueOf(1, java.util.concurrent.TimeUnit.SECONDS));
    RaftServerConfigKeys.Log.setSegmentSizeMax(p, SizeInBytes.valueOf(c.logSegmentBytes()));
    RaftServerConfigKeys.Log.setPurgeGap(
        p, (int) Math.min(Integer.MAX_VALUE, c.snapshotEveryEntries()));
    // An entry holds up to maxBatchBytes of commands (or one value at the largest limit the
    // replicated configuration may set); the appender ships whole entries, and Ratis wants the gRPC
    // message limit 1 MiB above the appender's.
    // (Ratis's log write buffer, 8 MiB by default, must exceed the appender's limit: hence the
    // 2 MiB ceiling of Limits.MAX_VALUE_BYTES_LIMIT.)
    long entryMax = Math.max(c.maxBatchBytes(), Limits.MAX_VALUE_BYTES_LIMIT) * 2L;
    RaftServerConfigKeys.Log.Appender.setBufferByteLimit(p, SizeInBytes.valueOf(entryMax));
    // Snapshot install ships the file in chunks; each chunk must fit in a gRPC message too.
    RaftServerConfigKeys.Log.Appender.setSnapshotChunkSizeMax(p, SizeInBytes.valueOf(entryMax));
    GrpcConfigKeys.setMessageSizeMax(p, SizeInBytes.valueOf(entryMax + (1 << 20)));
    return p;
  }

  @Override
  public CompletableFuture<EntryResult> append(LogEntry entry) {
    RaftClientRequest request = request(RaftClientRequest.writeRequestType(), entry.toByteArray());
    stateMachine.expect(request.getCallId(), entry);
    return submit(request)
        .whenComplete((reply, error) -> stateMachine.forget(request.getCallId()))
        .thenApply(
            reply -> {
              try {
                return IdemStateMachine.resultOf(reply.getMessage());
              } catch (IOException e) {
                throw new CompletionException(e);
              }
            });
  }

  /**
   * The value of {@code key} as this node applied it, read at once: linearizable only behind a read
   * barrier ({@link Batcher#barrier}), which {@link FrontDoor} waits for. The barrier's commit
   * already proves what Ratis's ReadIndex round would, so no round of heartbeats follows it
   * (docs/VERIFICATION.md, "Reads under partitions").
   */
  @Override
  public CompletableFuture<GetReply> read(String key, String principal) {
    return CompletableFuture.completedFuture(stateMachine.get(key, principal));
  }

  /** The record of an idempotency key as this node applied it; as {@link #read}. */
  @Override
  public CompletableFuture<GetKeyReply> readKey(GetKeyRequest req, String principal) {
    return CompletableFuture.completedFuture(stateMachine.getKey(req, principal));
  }

  private RaftClientRequest request(RaftClientRequest.Type type, byte[] content) {
    return RaftClientRequest.newBuilder()
        .setClientId(clientId)
        .setServerId(server.getId())
        .setGroupId(groupId)
        .setCallId(callId.incrementAndGet())
        .setMessage(Message.valueOf(UnsafeByteOperations.unsafeWrap(content)))
        .setType(type)
        .build();
  }

  private CompletableFuture<RaftClientReply> submit(RaftClientRequest request) {
    CompletableFuture<RaftClientReply> sent;
    try {
      sent = server.submitClientRequestAsync(request);
    } catch (IOException e) {
      return CompletableFuture.failedFuture(e);
    }
    return sent.thenApply(
        reply -> {
          if (reply.isSuccess()) {
            return reply;
          }
          org.apache.ratis.protocol.exceptions.NotLeaderException nle =
              reply.getNotLeaderException();
          if (nle != null) {
            RaftPeer suggested = nle.getSuggestedLeader();
            throw new ReplicatedLog.NotLeaderException(
                suggested == null || suggested.getClientAddress() == null
                    ? ""
                    : suggested.getClientAddress());
          }
          if (reply.getException() != null) {
            throw new CompletionException(reply.getException());
          }
          throw new CompletionException(new IOException("Ratis refused the request: " + reply));
        });
  }

  /**
   * The division's view, if it runs. A replica that Ratis closed is treated as not there: a leader
   * that commits a configuration without itself closes its replica, which then keeps reporting its
   * last role (LEADER) and term.
   */
  private DivisionInfo info() throws IOException {
    DivisionInfo info = server.getDivision(groupId).getInfo();
    if (!info.isAlive()) {
      throw new IOException("this node's replica of group " + groupId + " is closed");
    }
    return info;
  }

  /** Whether Ratis closed this node's replica (it left the group's configuration, or failed). */
  boolean isClosed() {
    try {
      return !server.getDivision(groupId).getInfo().isAlive();
    } catch (IOException e) {
      return false; // not there (yet): starting
    }
  }

  /**
   * Whether Ratis says this replica leads and it is in its group's configuration in force ({@link
   * #member}): a replica moved out of its group may go on saying it leads.
   */
  @Override
  public boolean isLeader() {
    return leads(DivisionInfo::isLeader);
  }

  @Override
  public boolean isLeaderReady() {
    return leads(DivisionInfo::isLeaderReady);
  }

  /** Whether {@code role} holds of this division and this node is in its configuration. */
  private boolean leads(java.util.function.Predicate<DivisionInfo> role) {
    try {
      return role.test(info()) && member();
    } catch (IOException e) {
      return false;
    }
  }

  /**
   * Whether this node is in its group's configuration in force, as a voter or a listener, in either
   * half of a change under way; false if that cannot be read. A replica removed from its group gets
   * no more of the group's log, so its own view (role, term, leader) stops where it was: in a 3 ->
   * 5 growth by hand, one still said {@code LEADER} at its old term while the group went on under a
   * new leader.
   */
  boolean member() {
    try {
      RaftConfiguration conf = configuration();
      return conf.getPeer(server.getId(), RaftPeerRole.FOLLOWER, RaftPeerRole.LISTENER) != null;
    } catch (IOException | RuntimeException e) {
      return false;
    }
  }

  /**
   * The role to report: Ratis's, or {@code NOT_A_MEMBER} for a replica outside its group's
   * configuration ({@link #member}), whatever it last knew.
   */
  String roleName(DivisionInfo info) {
    return member() ? info.getCurrentRole().name() : NOT_A_MEMBER;
  }

  /** The role reported by a replica outside its group's configuration. */
  static final String NOT_A_MEMBER = "NOT_A_MEMBER";

  @Override
  public String leaderClientAddress() {
    RaftConfiguration conf;
    try {
      conf = configuration();
      lastConfiguration = conf;
    } catch (IOException | RuntimeException e) {
      conf = lastConfiguration;
    }
    if (conf == null) {
      return "";
    }
    try {
      RaftPeerId leader = info().getLeaderId();
      // The configuration in force, not the peers this node started with: a leader added by a
      // membership change is only there.
      RaftPeer peer = leader == null ? null : conf.getPeer(leader);
      if (peer != null && peer.getClientAddress() != null && !peer.getClientAddress().isEmpty()) {
        return peer.getClientAddress();
      }
    } catch (IOException | RuntimeException e) {
      // a replica Ratis closed: no leader known
    }
    return elsewhere(conf);
  }

  /**
   * With no leader known: the client address of a member of {@code conf} if this node is not one
   * (its replica of the group was moved away, and Ratis may have closed it), so that a client that
   * knows only this node still finds the group; else empty, the client trying its next server.
   */
  private String elsewhere(RaftConfiguration conf) {
    String self = server.getId().toString();
    List<RaftPeer> members = new java.util.ArrayList<>(conf.getCurrentPeers());
    if (members.isEmpty() || members.stream().anyMatch(p -> p.getId().toString().equals(self))) {
      return "";
    }
    RaftPeer p = members.get(Math.floorMod(hints.getAndIncrement(), members.size()));
    return p.getClientAddress() == null ? "" : p.getClientAddress();
  }

  /**
   * Whether this node has led the group for {@code leadingMs} at least and {@code peerId}, a
   * follower, answered its last append within {@code withinMs} and holds the log up to {@code
   * lagEntries} of this node's applied index: in touch and caught up, so a leadership transfer to
   * it finishes at once (one still installing a snapshot or replaying a long log is left alone).
   */
  boolean leadsWithFollowerInTouch(String peerId, long leadingMs, long withinMs, long lagEntries) {
    try {
      DivisionInfo info = info();
      org.apache.ratis.proto.RaftProtos.RoleInfoProto role = info.getRoleInfoProto();
      if (!role.hasLeaderInfo() || role.getRoleElapsedTimeMs() < leadingMs) {
        return false;
      }
      // Both lists come from the leader's log appenders, in the same order.
      List<org.apache.ratis.proto.RaftProtos.ServerRpcProto> followers =
          role.getLeaderInfo().getFollowerInfoList();
      long[] matched = info.getFollowerMatchIndices();
      if (matched == null || matched.length != followers.size()) {
        return false; // no longer leader, or an appender came or went between the two reads
      }
      for (int i = 0; i < followers.size(); i++) {
        org.apache.ratis.proto.RaftProtos.ServerRpcProto f = followers.get(i);
        if (f.getId().getId().toStringUtf8().equals(peerId)) {
          return f.getLastRpcElapsedTimeMs() <= withinMs
              && matched[i] + lagEntries >= info.getLastAppliedIndex();
        }
      }
      return false;
    } catch (IOException e) {
      return false;
    }
  }

  /** The current term, or -1 if the division is not there (starting or closed). */
  long term() {
    try {
      return info().getCurrentTerm();
    } catch (IOException e) {
      return -1;
    }
  }

  /**
   * The role, or null if the division is not there or this node is not a member ({@link #member}).
   */
  RaftPeerRole role() {
    try {
      RaftPeerRole role = info().getCurrentRole();
      return member() ? role : null;
    } catch (IOException e) {
      return null;
    }
  }

  /** The highest index this node knows committed, or -1 if the division is not there. */
  long commitIndex() {
    try {
      return server.getDivision(groupId).getRaftLog().getLastCommittedIndex();
    } catch (IOException e) {
      return -1;
    }
  }

  /** Raft's view: role, term, leader id, applied index. */
  DivisionInfo division() throws IOException {
    return info();
  }

  /**
   * Asks this node, if it leads, to hand leadership to {@code peerId}; waits up to {@code
   * timeoutMs}.
   */
  void transferLeadership(String peerId, long timeoutMs) throws IOException {
    org.apache.ratis.protocol.TransferLeadershipRequest request =
        new org.apache.ratis.protocol.TransferLeadershipRequest(
            clientId,
            server.getId(),
            groupId,
            callId.incrementAndGet(),
            RaftPeerId.valueOf(peerId),
            timeoutMs);
    RaftClientReply reply;
    try {
      reply =
          server
              .transferLeadershipAsync(request)
              .get(timeoutMs + 5_000, java.util.concurrent.TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
      throw new IOException("leadership transfer to " + peerId + " failed: " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted", e);
    }
    if (!reply.isSuccess()) {
      throw new IOException(
          "leadership transfer to " + peerId + " refused: " + reply.getException());
    }
  }

  /**
   * If this node leads, steps down without naming a successor (an election follows), which also
   * drops a membership change Ratis still stages; waits up to {@code timeoutMs}.
   */
  void stepDown(long timeoutMs) throws IOException {
    org.apache.ratis.protocol.TransferLeadershipRequest request =
        new org.apache.ratis.protocol.TransferLeadershipRequest(
            clientId, server.getId(), groupId, callId.incrementAndGet(), null, timeoutMs);
    RaftClientReply reply;
    try {
      reply =
          server
              .transferLeadershipAsync(request)
              .get(timeoutMs + 5_000, java.util.concurrent.TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
      throw new IOException("stepping down failed: " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted", e);
    }
    if (!reply.isSuccess()) {
      throw new IOException("stepping down refused: " + reply.getException());
    }
  }

  /** The first index still in the local log (above 0 once purged behind a snapshot). */
  long logStartIndex() throws IOException {
    return server.getDivision(groupId).getRaftLog().getStartIndex();
  }

  /** This node's id. */
  String id() {
    return server.getId().toString();
  }

  /**
   * The Raft configuration in force on this node: the latest it holds, committed or not, with the
   * previous one while a change is under way (joint consensus).
   */
  RaftConfiguration configuration() throws IOException {
    return server.getDivision(groupId).getRaftConf();
  }

  /**
   * Asks this node, which should lead, to change the voting members from {@code current} to {@code
   * next}; Ratis refuses if the configuration in force is no longer {@code current} or another
   * change is under way. New members first catch up as non-voters; the future completes once the
   * new configuration committed, or fails (a new member that makes no progress for three election
   * timeouts fails the change).
   */
  CompletableFuture<RaftClientReply> setConfiguration(List<RaftPeer> current, List<RaftPeer> next) {
    SetConfigurationRequest request =
        new SetConfigurationRequest(
            clientId,
            server.getId(),
            groupId,
            callId.incrementAndGet(),
            SetConfigurationRequest.Arguments.newBuilder()
                .setServersInCurrentConf(current)
                .setServersInNewConf(next)
                .setMode(SetConfigurationRequest.Mode.COMPARE_AND_SET)
                .build());
    try {
      return server.setConfigurationAsync(request);
    } catch (IOException e) {
      return CompletableFuture.failedFuture(e);
    }
  }
}
