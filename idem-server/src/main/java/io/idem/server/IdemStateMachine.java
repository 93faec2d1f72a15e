package io.idem.server;

import io.idem.proto.Command;
import io.idem.proto.ConfigureCmd;
import io.idem.proto.EntryResult;
import io.idem.proto.GetKeyReply;
import io.idem.proto.GetKeyRequest;
import io.idem.proto.GetReply;
import io.idem.proto.LogEntry;
import io.idem.proto.ReadQuery;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.ratis.proto.RaftProtos.LogEntryProto;
import org.apache.ratis.protocol.ClientId;
import org.apache.ratis.protocol.Message;
import org.apache.ratis.protocol.RaftClientRequest;
import org.apache.ratis.protocol.RaftGroupId;
import org.apache.ratis.protocol.RaftPeerId;
import org.apache.ratis.server.RaftServer;
import org.apache.ratis.server.protocol.TermIndex;
import org.apache.ratis.server.storage.RaftStorage;
import org.apache.ratis.statemachine.SnapshotInfo;
import org.apache.ratis.statemachine.TransactionContext;
import org.apache.ratis.statemachine.impl.BaseStateMachine;
import org.apache.ratis.statemachine.impl.SimpleStateMachineStorage;
import org.apache.ratis.statemachine.impl.SingleFileSnapshotInfo;
import org.apache.ratis.thirdparty.com.google.protobuf.UnsafeByteOperations;
import org.apache.ratis.util.LifeCycle;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Adapts {@link ReplicatedState} to Ratis: applies entries, answers linearizable reads after their
 * read index is applied, freezes snapshots and loads them; a {@link SnapshotWriter} writes them.
 * One lock guards the state; apply, query, snapshot and the front door's adminDenial take it.
 */
final class IdemStateMachine extends BaseStateMachine {
  private static final Logger LOG = LoggerFactory.getLogger(IdemStateMachine.class);

  private final SimpleStateMachineStorage storage = new SimpleStateMachineStorage();
  private final ReplicatedConfig local;
  private final Command bootstrap;
  private final Object lock = new Object();
  private final java.util.concurrent.ConcurrentHashMap<Long, LogEntry> appending =
      new java.util.concurrent.ConcurrentHashMap<>();
  // Volatile for authenticate, which reads the sessions without the lock.
  private volatile ReplicatedState state = new ReplicatedState();

  /**
   * How far past the leader's own clock a proposal's stamp may be. The batcher stamps the wall
   * clock when it builds an entry, a few milliseconds before this check; the bound only leaves room
   * for that.
   */
  static final long MAX_STAMP_AHEAD_MS = 5_000;

  /**
   * The Ratis client id of this node's own proposals: random, known only to this node and to its
   * peers (the entries they replicate carry it).
   */
  private final ClientId proposer = ClientId.randomId();

  /** Writes the snapshots frozen on the apply thread, and keeps what is reported to Ratis. */
  private final SnapshotWriter snapshots;

  private final ServerMetrics metrics;

  /** A snapshot is frozen at every index that is a multiple of this. */
  private final long snapshotEvery;

  /**
   * The state's digest at an index where a snapshot was taken: equal on every replica at the same
   * index, since they snapshot at the same indexes.
   *
   * @param index the log index it was taken at (0: none yet)
   * @param hex the digest ({@link StateSnapshot#digest})
   */
  record Digest(long index, String hex) {}

  /** Whether {@link #state} has a configuration applied; read without the lock by the batcher. */
  private volatile boolean configured;

  /**
   * The log format leaders write: the format in force, or this code's own while none is configured
   * (the first entry then carries the bootstrap, which sets it). Read without the lock.
   */
  private volatile int writeFormat = ReplicatedState.LOG_FORMAT_VERSION;

  /** The configuration revision last reported, so that a difference is logged once per change. */
  private long reportedRevision = -1;

  /**
   * @param local this node's own limits and session bounds: they seed the bootstrap command of a
   *     leader that finds no configuration applied, and decide nothing themselves
   */
  IdemStateMachine(ReplicatedConfig local, long snapshotEvery, ServerMetrics metrics) {
    this(local, "", snapshotEvery, metrics);
  }

  /**
   * @param authAdmin the principal a bootstrap makes admin, turning auth on; empty: auth stays off
   */
  IdemStateMachine(
      ReplicatedConfig local, String authAdmin, long snapshotEvery, ServerMetrics metrics) {
    this(local, local.bootstrapCommand(authAdmin), snapshotEvery, metrics);
  }

  /**
   * @param bootstrap the configuration command a leader appends while none is applied
   */
  IdemStateMachine(
      ReplicatedConfig local, ConfigureCmd bootstrap, long snapshotEvery, ServerMetrics metrics) {
    this.metrics = metrics;
    this.snapshots = new SnapshotWriter(storage, metrics);
    if (snapshotEvery < 1) {
      throw new IllegalArgumentException("snapshotEvery must be positive, got " + snapshotEvery);
    }
    this.snapshotEvery = snapshotEvery;
    this.local = local;
    this.bootstrap = Command.newBuilder().setConfigure(bootstrap).build();
  }

  /**
   * The command a leader puts first in its next entry while no configuration is applied here, or
   * null once one is. Does not take the lock (the batcher calls it under its own).
   */
  Command bootstrapCommand() {
    return configured ? null : bootstrap;
  }

  /**
   * Notes a configuration newly applied or loaded, and warns when this node's own flags differ from
   * it (they decide nothing: the replicated configuration does). Called under the lock.
   */
  private void noteConfiguration() {
    configured = state.configuration.configured();
    int inForce = state.configuration.logFormat();
    writeFormat = inForce == 0 ? ReplicatedState.LOG_FORMAT_VERSION : inForce;
    if (state.configuration.revision() == reportedRevision) {
      return;
    }
    reportedRevision = state.configuration.revision();
    ReplicatedConfig replicated = state.configuration.current();
    if (!configured) {
      return;
    }
    if (!replicated.equals(local)) {
      LOG.warn(
          "this node's limits and session bounds {} differ from the replicated configuration {}"
              + " (set at log index {}); the replicated one applies: change it with the Configure"
              + " RPC",
          local,
          replicated,
          state.configuration.revision());
    } else {
      LOG.info(
          "replicated configuration {} (set at log index {})",
          replicated,
          state.configuration.revision());
    }
  }

  @Override
  public void initialize(RaftServer server, RaftGroupId groupId, RaftStorage raftStorage)
      throws IOException {
    getLifeCycle()
        .startAndTransition(
            () -> {
              super.initialize(server, groupId, raftStorage);
              storage.init(raftStorage);
              loadLatestSnapshot();
            });
  }

  @Override
  public void pause() {
    // Ratis pauses the state machine before it installs a snapshot from the leader: a write of our
    // own must not land after it.
    snapshots.awaitWrite();
    getLifeCycle().transition(LifeCycle.State.PAUSING);
    getLifeCycle().transition(LifeCycle.State.PAUSED);
  }

  @Override
  public void reinitialize() throws IOException {
    // Ratis installed the leader's snapshot, newer than anything this node wrote: a write of its
    // own that finished while pause() waited for it (say, the snapshot at index 20 of a follower
    // that restarted far behind) must not be reported now. Ratis takes the installed index as its
    // snapshot index, and a lower one reported after it stops its apply thread ("Failed to
    // updateIncreasingly for snapshotIndex: 440 -> 20", seen in SnapshotRecoveryTest).
    snapshots.forgetWritten();
    loadLatestSnapshot();
    if (getLifeCycleState() == LifeCycle.State.PAUSED) {
      getLifeCycle().transition(LifeCycle.State.STARTING);
      getLifeCycle().transition(LifeCycle.State.RUNNING);
    }
  }

  private void loadLatestSnapshot() throws IOException {
    SingleFileSnapshotInfo snapshot = storage.loadLatestSnapshot();
    if (snapshot == null) {
      return;
    }
    Path file = snapshot.getFile().getPath();
    ReplicatedState loaded;
    try (InputStream in = Files.newInputStream(file)) {
      loaded = StateSnapshot.read(in);
    }
    synchronized (lock) {
      state = loaded;
      updateLastAppliedTermIndex(snapshot.getTermIndex());
      noteConfiguration();
    }
    LOG.info(
        "loaded snapshot {} ({} sessions, {} keys)",
        file,
        loaded.sessions.size(),
        loaded.kv.size());
  }

  @Override
  public SimpleStateMachineStorage getStateMachineStorage() {
    return storage;
  }

  /**
   * The leader's check of a proposal, before Ratis appends it: only this node's own front door
   * proposes entries ({@link RaftNode} submits them in-process under {@link #proposer()}), in the
   * log format this node writes, stamped with a time no later than {@link #MAX_STAMP_AHEAD_MS} past
   * this node's clock. Anything else is refused and never reaches the log. {@link PeerGate} already
   * closes Ratis's client service to the network; this check holds even if a service were opened by
   * mistake, and keeps a proposal from moving log time (and with it every session's, lease's and
   * key's expiry) ahead.
   */
  @Override
  public TransactionContext startTransaction(RaftClientRequest request) throws IOException {
    TransactionContext trx = super.startTransaction(request);
    String refusal = proposalRefusal(request, System.currentTimeMillis());
    if (refusal != null) {
      metrics.proposalRefused();
      LOG.warn("refused a proposal from Ratis client {}: {}", request.getClientId(), refusal);
      trx.setException(new IOException("proposal refused: " + refusal));
    }
    return trx;
  }

  /** Why {@code request} may not be appended at wall time {@code nowMs}, or null if it may. */
  String proposalRefusal(RaftClientRequest request, long nowMs) {
    if (!request.getClientId().equals(proposer)) {
      return "only this node's front door proposes entries";
    }
    LogEntry entry = appending.get(request.getCallId());
    if (entry == null) {
      return "not an entry this node's batcher built";
    }
    String undecodable = ReplicatedState.undecodable(entry);
    if (undecodable != null) {
      return undecodable;
    }
    if (entry.getFormatVersion() > writeFormat) {
      return "log format version "
          + entry.getFormatVersion()
          + ", above the format in force ("
          + writeFormat
          + ")";
    }
    if (entry.getLeaderTimeMs() > nowMs + MAX_STAMP_AHEAD_MS) {
      return "stamped "
          + (entry.getLeaderTimeMs() - nowMs)
          + " ms ahead of this node's clock (at most "
          + MAX_STAMP_AHEAD_MS
          + ")";
    }
    return null;
  }

  /** The Ratis client id under which this node's front door proposes entries. */
  ClientId proposer() {
    return proposer;
  }

  @Override
  public CompletableFuture<Message> applyTransaction(TransactionContext trx) {
    LogEntryProto entry = trx.getLogEntry();
    // Someone waits for the outcomes only of an entry this leader appended in this term: its
    // transaction still carries the client request (followers and replays build theirs from the
    // log). For those the batcher's own object is at hand and the bytes need no parsing.
    RaftClientRequest request = trx.getClientRequest();
    boolean answering = request != null;
    LogEntry parsed = answering ? appending.get(request.getCallId()) : null;
    String undecodable = null;
    if (parsed == null) {
      try {
        parsed =
            LogEntry.parseFrom(entry.getStateMachineLogEntry().getLogData().asReadOnlyByteBuffer());
      } catch (IOException e) {
        undecodable = "it does not parse (" + e.getMessage() + ")";
      }
    }
    if (undecodable == null) {
      undecodable = ReplicatedState.undecodable(parsed);
    }
    if (undecodable != null) {
      // Every replica meets the same bytes and decides alike: the entry is a no-op everywhere.
      metrics.entrySkipped();
      LOG.error(
          "log entry {} (term {}) is applied as a no-op: {}",
          entry.getIndex(),
          entry.getTerm(),
          undecodable);
      parsed = null;
    }
    EntryResult result;
    StateSnapshot.Frozen frozen;
    long frozenNanos;
    long applyStart = System.nanoTime();
    synchronized (lock) {
      long revision = state.configuration.revision();
      result =
          parsed == null
              ? state.skip(entry.getIndex(), entry.getTerm())
              : state.apply(entry.getIndex(), entry.getTerm(), parsed, answering);
      updateLastAppliedTermIndex(entry.getTerm(), entry.getIndex());
      if (state.configuration.revision() != revision) {
        noteConfiguration();
      }
      long start = System.nanoTime();
      try {
        frozen = freezeIfDue(entry.getIndex());
      } catch (IOException e) {
        LOG.error("freezing the state at {} for a snapshot failed", entry.getIndex(), e);
        frozen = null;
      }
      frozenNanos = System.nanoTime() - start;
    }
    if (parsed != null) {
      metrics.applied(parsed, result, System.nanoTime() - applyStart - frozenNanos);
    }
    if (frozen != null) {
      snapshots.submit(
          frozen,
          TermIndex.valueOf(entry.getTerm(), entry.getIndex()),
          frozenNanos,
          writePosition());
    }
    return CompletableFuture.completedFuture(new ResultMessage(result));
  }

  /**
   * Notes that the entry with Ratis call id {@code callId} is being appended from {@code entry}, so
   * that applying it here can use the object (serialized from it, so equal to what the log holds).
   */
  void expect(long callId, LogEntry entry) {
    appending.put(callId, entry);
  }

  /** The append of {@code callId} finished, applied or not. */
  void forget(long callId) {
    appending.remove(callId);
  }

  /**
   * An entry's outcome as the reply's message. On the leader the reply reaches the batcher in the
   * same process, which takes the object back ({@link #resultOf}) instead of parsing bytes; the
   * bytes are made only if Ratis asks for them.
   */
  static final class ResultMessage implements Message {
    private final EntryResult result;
    private org.apache.ratis.thirdparty.com.google.protobuf.ByteString content;

    ResultMessage(EntryResult result) {
      this.result = result;
    }

    @Override
    public synchronized org.apache.ratis.thirdparty.com.google.protobuf.ByteString getContent() {
      if (content == null) {
        content = UnsafeByteOperations.unsafeWrap(result.toByteArray());
      }
      return content;
    }
  }

  /** The outcome carried by {@code message}: the object if it is a {@link ResultMessage}. */
  static EntryResult resultOf(Message message) throws IOException {
    if (message instanceof ResultMessage m) {
      return m.result;
    }
    return EntryResult.parseFrom(message.getContent().asReadOnlyByteBuffer());
  }

  /**
   * The value of {@code key} as applied on this node now, for {@code principal}. Linearizable only
   * behind a read barrier ({@link Batcher#barrier}); {@link FrontDoor} puts it there.
   */
  GetReply get(String key, String principal) {
    synchronized (lock) {
      return state.get(key, principal);
    }
  }

  /** The record of an idempotency key as applied on this node now; as {@link #get}. */
  GetKeyReply getKey(GetKeyRequest request, String principal) {
    synchronized (lock) {
      return state.getKey(request, principal);
    }
  }

  /**
   * A read-only query through Ratis (its ReadIndex). Idem's reads do not come this way (they read
   * {@link #get} behind a barrier); Ratis's client port is closed to clients, so only a member
   * could ask.
   */
  @Override
  public CompletableFuture<Message> query(Message request) {
    try {
      ReadQuery q = ReadQuery.parseFrom(request.getContent().asReadOnlyByteBuffer());
      byte[] reply =
          switch (q.getQueryCase()) {
            case GET -> get(q.getGet().getKey(), q.getPrincipal()).toByteArray();
            case GET_KEY -> getKey(q.getGetKey(), q.getPrincipal()).toByteArray();
            case QUERY_NOT_SET -> throw new IOException("a read query without a query");
          };
      return CompletableFuture.completedFuture(
          Message.valueOf(UnsafeByteOperations.unsafeWrap(reply)));
    } catch (IOException e) {
      return CompletableFuture.failedFuture(e);
    }
  }

  /**
   * Reports to Ratis the snapshot written since its last call, if any; -1 otherwise. Ratis calls it
   * on its apply thread once {@code snapshotEvery} entries were applied since the last snapshot it
   * knows of, and again after every batch until one is reported, and purges the log up to the index
   * returned: so an index is returned only once its snapshot is on disk. The snapshots themselves
   * are frozen in {@link #applyTransaction}, at every index that is a multiple of {@code
   * snapshotEvery}, and written by the writer thread.
   */
  @Override
  public long takeSnapshot() throws IOException {
    TermIndex written = snapshots.takeWritten();
    if (written != null) {
      return written.getIndex();
    }
    snapshots.failIfLastWriteFailed();
    return -1;
  }

  /**
   * Freezes the state for a snapshot at {@code index} if it is a multiple of {@code snapshotEvery}
   * and the writer is idle; called under the lock right after the entry was applied. The same
   * indexes on every replica, so that their digests ({@link #digestAtSnapshot}) can be compared.
   */
  private StateSnapshot.Frozen freezeIfDue(long index) throws IOException {
    if (index % snapshotEvery != 0) {
      return null;
    }
    if (snapshots.busy()) {
      LOG.warn("the snapshot writer is still busy at index {}: no snapshot there", index);
      return null;
    }
    SnapshotInfo latest = storage.getLatestSnapshot();
    if (latest != null && latest.getIndex() >= index) {
      return null;
    }
    return StateSnapshot.freeze(state);
  }

  /**
   * This node's place in the order in which the nodes write a snapshot ({@link SnapshotStagger}),
   * from the current configuration and leader as this node sees them; 0 if it cannot tell.
   */
  private int writePosition() {
    try {
      RaftServer server = getServer().getNow(null);
      if (server == null) {
        return 0;
      }
      RaftServer.Division division = server.getDivision(getGroupId());
      List<String> peers =
          division.getRaftConf().getCurrentPeers().stream().map(p -> p.getId().toString()).toList();
      RaftPeerId leader = division.getInfo().getLeaderId();
      return SnapshotStagger.position(
          getId().toString(), peers, leader == null ? null : leader.toString());
    } catch (IOException | RuntimeException e) { // not started yet, or closing: no wait
      return 0;
    }
  }

  @Override
  public void close() throws IOException {
    snapshots.close();
    super.close();
  }

  /**
   * Why a read of {@code partition} does not belong to this group, or null ({@link
   * GroupState#readRefusal}). Without the lock, like {@link #authenticate}: a read never waits for
   * an apply to learn what is fixed at bootstrap.
   */
  String readRefusal(int partition) {
    return state.configuration.groups.readRefusal(partition);
  }

  /** The outcome of the front door's secret check. */
  enum Authentication {
    OK,
    UNKNOWN_SESSION,
    WRONG_SECRET
  }

  /**
   * The front door's check of a stream's Hello, before anything reaches the log: the secret, and
   * that {@code principal} (the client certificate's subject, or null) may use the session. It does
   * not take the state's lock, so a Hello never waits for an apply or a snapshot freeze: the
   * session table keeps a concurrent index of credentials for it.
   */
  Authentication authenticate(long clientId, long secretHi, long secretLo, String principal) {
    SessionState sessions = state.sessions;
    if (!sessions.exists(clientId)) {
      return Authentication.UNKNOWN_SESSION;
    }
    return sessions.authenticate(clientId, secretHi, secretLo, principal)
        ? Authentication.OK
        : Authentication.WRONG_SECRET;
  }

  /** The log format this node writes as leader (see {@link #writeFormat}). Without the lock. */
  int writeFormat() {
    return writeFormat;
  }

  /**
   * Why {@code principal} may not {@code what} (a change only the role admin may make), or null if
   * it may: the front door's check of a change that does not go through the log (membership).
   */
  String adminDenial(String principal, String what) {
    synchronized (lock) {
      return state.auth.adminDenial(principal, what);
    }
  }

  /** The digest at the last snapshot this node wrote (index 0 if none yet). */
  Digest digestAtSnapshot() {
    return snapshots.lastDigest();
  }

  /** Reads the state under the lock, for status and digests. */
  <T> T inspect(java.util.function.Function<ReplicatedState, T> reader) {
    synchronized (lock) {
      return reader.apply(state);
    }
  }
}
