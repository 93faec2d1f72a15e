package io.idem.server;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import io.idem.core.Admission;
import io.idem.core.SnapshotFormatException;
import io.idem.proto.Code;
import io.idem.proto.Command;
import io.idem.proto.CommandResult;
import io.idem.proto.EntryResult;
import io.idem.proto.GetKeyReply;
import io.idem.proto.GetKeyRequest;
import io.idem.proto.GetReply;
import io.idem.proto.LogEntry;
import io.idem.proto.Operation;
import io.idem.proto.RegisterReply;
import io.idem.proto.Result;
import io.idem.proto.ServerFrame;
import io.idem.proto.SessionCmd;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.List;

/**
 * Everything the log replicates, and the deterministic function that applies one log entry to it.
 * The state is split into domains, each owning its data, its commands and its snapshot section:
 * {@link SessionState}, {@link ConfigState}, {@link LeaseState}, {@link KvState} and {@link
 * KeyState}. This class keeps the log position (clock, applied index and term), the
 * log-format-version rules, the dispatch of each command to its domain, and the admission and
 * record steps around an operation, which {@link Operations} executes. Ratis-free, so that it can
 * be tested and simulated alone; {@link IdemStateMachine} adapts it to Ratis.
 *
 * <p>Determinism: time is the entries' leader stamps ({@code clock = max(clock, stamp)}), session
 * ids and key fencing tokens are log positions, and every collection is ordered. Not thread-safe:
 * the state machine holds a lock around every call.
 */
final class ReplicatedState {
  /**
   * The log-entry format this code writes. It applies versions 1 to 9: in version 1 entries any
   * session may renew or revoke a lease, and a revoke answers no log time; version 2 entries
   * (leases have holders) are refused by nodes that only know version 1, so a rolling upgrade stops
   * old nodes instead of letting them apply new entries differently. Version 3 adds {@code
   * ConfigureCmd} (the replicated configuration), which a version 2 node would skip as an unknown
   * command and so decide by other limits than its peers; it stops instead. Version 4 adds the
   * application idempotency key operations ({@code AcquireKey}, {@code CompleteKey}, {@code
   * ReleaseKey}, {@code RenewKey}) and fenced writes ({@code Fence} on a put, compare-and-set,
   * increment or append), which a version 3 node would answer as no operation, or apply unfenced;
   * it stops instead. Inside an entry of version 3 or older they are decided as a version 3 node
   * decides them: a key operation is answered {@code INVALID_ARGUMENT} ("the request carries no
   * operation") and a fence is ignored. Version 5 makes fences exact (a fenced write needs a key
   * record with exactly its token: a released or expired key refuses it, where version 4 let it
   * through) and adds a complete's {@code effect}, a write applied in the same step as the
   * completion, which a version 4 node would drop; inside a version 4 entry both are decided as
   * version 4 decides them. Version 9 adds cursors ({@code ClaimCursor}, {@code CommitCursor}),
   * answered as no operation inside older entries.
   *
   * <p>Nodes of this code apply an entry of a version they do not know as a no-op ({@link
   * #undecodable}): it never stops the applier, so no entry can poison the log. The leader checks
   * every proposal's version before it appends ({@link IdemStateMachine#startTransaction}), so such
   * an entry can only come from a leader of newer code; the next version must therefore be written
   * only once every member applies it: {@link ConfigState#logFormat}, the format in force, which an
   * operator raises once every member runs the new code, is the version leaders write.
   *
   * <p>Version 6 adds access control: {@code AuthCmd}, the principal of a {@code ConfigureCmd}
   * (only an admin may change the configuration while auth is on), the permission checks of every
   * session operation by its session's principal ({@link AuthState}), and session names per
   * principal. Inside an entry of version 5 or older none of them applies. A version 6 leader also
   * logs a registration's secret as its hash only ({@code RegisterCmd.secret_hash}).
   *
   * <p>Version 7 adds quotas per principal and the backend budget ({@link QuotaState}, {@link
   * Payer}): a new session, a saved answer, a KV write, a lease or a key record past its
   * principal's quota is refused with {@code QUOTA_EXCEEDED}, and a command that grows the state
   * while it is at its budget with {@code NO_SPACE}; what such entries add is charged to its
   * principal (its owner). A configuration change in a version 7 entry may set the default quotas
   * and the budget, and is held to tighter ranges ({@link ReplicatedConfig#with}); a role in one
   * may carry quotas. Inside an entry of version 6 or older none of them applies, and nothing it
   * adds has an owner.
   *
   * <p>Version 8 holds a fence's token to its owner's deadline ({@link
   * KeyState.FenceRules#UNTIL_DEADLINE}): a fenced write goes through only if the key's record
   * holds the fence's token and the entry's log time is at or before that record's owner deadline.
   * Format 7 let a write through after the deadline until someone took the key over, so an owner's
   * write delayed past its deadline (resent to a new leader after a failover longer than the
   * in-progress timeout) landed, and the duplicate that took the key over next wrote again (issue
   * 36). Inside an entry of version 7 or older the write is judged as before.
   */
  static final int LOG_FORMAT_VERSION = 9;

  /** The first log-entry format with access control and session names per principal. */
  static final int AUTH_SINCE_VERSION = 6;

  /** The first log-entry format with quotas, the backend budget and clamped configurations. */
  static final int QUOTAS_SINCE_VERSION = 7;

  /** The first log-entry format in which leases have holders ({@link LeaseState.Rules#HELD}). */
  static final int LEASE_HOLDERS_SINCE_VERSION = 2;

  /** The first log-entry format in which {@code ConfigureCmd} is applied. */
  static final int CONFIGURE_SINCE_VERSION = 3;

  /** The first log-entry format in which key operations and fences are applied. */
  static final int KEYS_SINCE_VERSION = 4;

  /** The first log-entry format with exact fences, a complete's effect and a key table capacity. */
  static final int EXACT_FENCES_SINCE_VERSION = 5;

  /**
   * The first log-entry format in which a fence's token holds its key only until the owner's
   * deadline ({@link KeyState.FenceRules#UNTIL_DEADLINE}).
   */
  static final int FENCE_DEADLINES_SINCE_VERSION = 8;

  /** The first log-entry format with cursors ({@code ClaimCursor}, {@code CommitCursor}). */
  static final int CURSORS_SINCE_VERSION = 9;

  /** The oldest log-entry format this code still applies. */
  static final int OLDEST_LOG_FORMAT_VERSION = 1;

  /**
   * Most commands in one entry. A registration's client id is {@code index * this + position}, so
   * ids stay unique although one entry registers many clients.
   */
  static final int MAX_COMMANDS_PER_ENTRY = 4096;

  // The domains. Each owns its fields; the others reach it only through its methods.
  final SessionState sessions = new SessionState();
  final ConfigState configuration = new ConfigState(sessions);
  final LeaseState leases = new LeaseState(configuration);
  final KvState kv = new KvState(configuration, leases);
  final KeyState keys = new KeyState();
  final AuthState auth = new AuthState();

  /** Runs the operations that sessions send, on the domains above. */
  private final Operations operations = new Operations(kv, leases, keys);

  /**
   * The snapshot's sections, in the order they are written and read (see {@link StateSnapshot}):
   * id, the first snapshot version that carries it, and the part. A new domain is one more line.
   */
  final List<StateSnapshot.Section> sections =
      List.of(
          new StateSnapshot.Section(1, 1, new Position()),
          new StateSnapshot.Section(2, 3, configuration),
          new StateSnapshot.Section(3, 1, leases),
          new StateSnapshot.Section(4, 1, kv),
          new StateSnapshot.Section(5, 1, sessions),
          new StateSnapshot.Section(6, 5, keys),
          new StateSnapshot.Section(7, 7, configuration.format),
          new StateSnapshot.Section(8, 7, auth),
          new StateSnapshot.Section(9, 8, configuration.quotas),
          new StateSnapshot.Section(10, 9, configuration.groups));

  private long clock;
  private long lastTerm;
  private long appliedIndex;
  private long appliedTerm;
  private long duplicatesSuppressed;

  /** The format version of the entry being applied (not part of the state). */
  private int entryVersion = LOG_FORMAT_VERSION;

  /** An empty state, deciding by {@link ReplicatedConfig#DEFAULTS} until one is configured. */
  ReplicatedState() {}

  /** The log index of the last entry applied. */
  long appliedIndex() {
    return appliedIndex;
  }

  /** The log time: the highest leader stamp applied. */
  long clock() {
    return clock;
  }

  /** How many retried operations were answered from a saved response. */
  long duplicatesSuppressed() {
    return duplicatesSuppressed;
  }

  /**
   * Why {@code entry} cannot be applied by this code, or null if it can: a format version outside
   * {@link #OLDEST_LOG_FORMAT_VERSION} to {@link #LOG_FORMAT_VERSION}. Such an entry is applied as
   * a no-op ({@link #skip}), never half-understood.
   */
  static String undecodable(LogEntry entry) {
    int v = entry.getFormatVersion();
    if (v < OLDEST_LOG_FORMAT_VERSION || v > LOG_FORMAT_VERSION) {
      return "it has log format version "
          + v
          + "; this node applies versions "
          + OLDEST_LOG_FORMAT_VERSION
          + " to "
          + LOG_FORMAT_VERSION;
    }
    return null;
  }

  /**
   * Applies entry {@code index} of term {@code term} as a no-op: the log position advances, and
   * nothing else changes (not even the clock: the entry's stamp cannot be trusted). The entry's
   * commands get no outcomes.
   */
  EntryResult skip(long index, long term) {
    appliedIndex = index;
    appliedTerm = term;
    return EntryResult.getDefaultInstance();
  }

  /**
   * Applies entry {@code index} of term {@code term} and returns one outcome per command.
   *
   * <p>With {@code answering} false (a follower, or an entry replayed from the log: nobody waits
   * for its outcomes) the state changes alike, saved responses included, but no outcomes are built
   * and the result is empty.
   *
   * @throws IllegalArgumentException for an entry this code cannot apply ({@link #undecodable}):
   *     the caller applies it with {@link #skip} instead
   */
  EntryResult apply(long index, long term, LogEntry entry, boolean answering) {
    String undecodable = undecodable(entry);
    if (undecodable != null) {
      throw new IllegalArgumentException("log entry " + index + ": " + undecodable);
    }
    entryVersion = entry.getFormatVersion();
    clock = Math.max(clock, entry.getLeaderTimeMs());
    if (term > lastTerm) {
      // A new leader: its predecessor's lease keep-alives may have been lost in the failover.
      leases.afterLeaderChange(clock);
      lastTerm = term;
    }
    expire();
    EntryResult.Builder out = EntryResult.newBuilder();
    for (int i = 0; i < entry.getCommandsCount(); i++) {
      Command c = entry.getCommands(i);
      CommandResult r =
          i >= MAX_COMMANDS_PER_ENTRY
              ? rejectedCommand(c, "more than " + MAX_COMMANDS_PER_ENTRY + " commands")
              : applyCommand(index, i, c, answering);
      if (answering) {
        out.addResults(r);
      }
    }
    if (entryVersion >= QUOTAS_SINCE_VERSION) {
      configuration.quotas.settle(backendUsed());
    }
    appliedIndex = index;
    appliedTerm = term;
    return out.build();
  }

  /**
   * The replicated state's estimated size in bytes, which the backend budget bounds: keys, values,
   * saved answers, key records and lease names, plus a fixed cost per item (sessions, KV keys, key
   * records, leases, saved answers). An estimate of the heap the state holds, not a measurement;
   * every replica computes the same from the same state.
   */
  long backendUsed() {
    return sessions.bytes() + kv.bytes() + keys.bytes() + leases.bytes();
  }

  /** The payer of a command on session {@code clientId}, or null before log format 7. */
  private Payer payer(String principal) {
    if (entryVersion < QUOTAS_SINCE_VERSION) {
      return null;
    }
    QuotaState q = configuration.quotas;
    long used = backendUsed();
    return new Payer(
        principal, auth.quotasOf(principal, q.defaults()), q.full(used), used, q.backendBytes());
  }

  /** Applies one command; its outcome, or null for a session command when not answering. */
  private CommandResult applyCommand(long index, int position, Command c, boolean answering) {
    switch (c.getCmdCase()) {
      case REGISTER:
        {
          String principal = c.getRegister().getPrincipal();
          if (entryVersion >= AUTH_SINCE_VERSION && !auth.mayConnect(principal)) {
            return CommandResult.newBuilder()
                .setRegistration(
                    RegisterReply.newBuilder()
                        .setCode(Code.PERMISSION_DENIED)
                        .setMessage(auth.connectDenial(principal)))
                .build();
          }
          RegisterReply refused = registrationRefusal(c.getRegister());
          if (refused != null) {
            return CommandResult.newBuilder().setRegistration(refused).build();
          }
          RegisterReply registered =
              sessions.register(
                  index * MAX_COMMANDS_PER_ENTRY + position,
                  c.getRegister(),
                  clock,
                  configuration.current().limitsProto(),
                  entryVersion >= AUTH_SINCE_VERSION,
                  configuration.groups.dataGroup());
          if (configuration.groups.multi() && registered.getCode() == Code.OK) {
            registered = registered.toBuilder().setMap(configuration.groups.map()).build();
          }
          return CommandResult.newBuilder().setRegistration(registered).build();
        }
      case SESSION:
        {
          ServerFrame f = session(index, position, c.getSession(), answering);
          return f == null ? null : CommandResult.newBuilder().setFrame(f).build();
        }
      case KEEP_ALIVE:
        return sessions.keepAlive(c.getKeepAlive(), clock);
      case CLOSE:
        return sessions.close(c.getClose(), clock);
      case CONFIGURE:
        if (entryVersion < CONFIGURE_SINCE_VERSION) {
          // Version 2 nodes skipped it as unknown; so does every node replaying such an entry.
          return rejectedCommand(c, "unknown command");
        }
        return CommandResult.newBuilder().setConfigured(configure(index, c.getConfigure())).build();
      case AUTH:
        if (entryVersion < AUTH_SINCE_VERSION) {
          return rejectedCommand(c, "unknown command");
        }
        return CommandResult.newBuilder()
            .setAuth(
                auth.apply(
                    c.getAuth().getPrincipal(),
                    c.getAuth().getRequest(),
                    entryVersion >= QUOTAS_SINCE_VERSION))
            .build();
      default:
        return rejectedCommand(c, "unknown command");
    }
  }

  /**
   * The refusal of a registration that would open a session past its principal's {@code sessions}
   * quota, or while the backend is full; null if it may go on (always before format 7). A resume,
   * and a retry of a named registration whose session lives, add no session and are not refused.
   */
  private RegisterReply registrationRefusal(io.idem.proto.RegisterCmd cmd) {
    String principal = cmd.getPrincipal();
    Payer payer = payer(principal);
    io.idem.proto.RegisterRequest req = cmd.getRequest();
    if (payer == null
        || (configuration.groups.dataGroup()
            ? sessions.exists(req.getClientId())
            : req.getResume()
                || (!req.getName().isEmpty() && sessions.holdsName(req.getName(), principal)))) {
      return null;
    }
    if (payer.full()) {
      return RegisterReply.newBuilder()
          .setCode(Code.NO_SPACE)
          .setMessage(Payer.noSpaceMessage(payer.backendUsed(), payer.backendBytes()))
          .build();
    }
    int live = sessions.usageOf(principal).sessions();
    if (live >= payer.quotas().sessions()) {
      return RegisterReply.newBuilder()
          .setCode(Code.QUOTA_EXCEEDED)
          .setMessage(
              payer.overQuotaMessage(
                  "sessions", live + " live sessions", payer.quotas().sessions()))
          .build();
    }
    return null;
  }

  /**
   * A configuration change: since format 6 only an admin's while auth is on; a bootstrap that takes
   * effect also turns auth on with its admin, if it names one.
   */
  private io.idem.proto.ConfigureReply configure(long index, io.idem.proto.ConfigureCmd cmd) {
    if (entryVersion >= AUTH_SINCE_VERSION && !cmd.getBootstrap()) {
      String denied = auth.adminDenial(cmd.getPrincipal(), "change the configuration");
      if (denied != null) {
        return configuration.refused(Code.PERMISSION_DENIED, denied);
      }
    }
    boolean wasConfigured = configuration.configured();
    io.idem.proto.ConfigureReply reply =
        configuration.configure(index, cmd, entryVersion >= QUOTAS_SINCE_VERSION);
    if (cmd.getBootstrap() && !wasConfigured && configuration.configured()) {
      auth.bootstrap(cmd.getAuthAdmin());
    }
    return reply;
  }

  /** Admits an operation, executes it if new and records its answer, or answers from the table. */
  private ServerFrame session(long index, int position, SessionCmd cmd, boolean answering) {
    Admission a = sessions.admit(cmd, clock);
    if (a == Admission.NEW) {
      String principal =
          entryVersion >= AUTH_SINCE_VERSION ? sessions.principalOf(cmd.getClientId()) : "";
      // In a cluster of several groups, an operation of another group's partition is answered
      // with the map and applied nowhere (a client with a stale map resends it there).
      Result misplaced = configuration.groups.refusal(index, cmd.getOp());
      String denied =
          misplaced == null && entryVersion >= AUTH_SINCE_VERSION
              ? auth.denial(principal, cmd.getOp())
              : null;
      Payer payer = misplaced == null && denied == null ? payer(principal) : null;
      Result result;
      if (misplaced != null) {
        result = misplaced;
      } else if (denied != null) {
        result =
            Result.newBuilder()
                .setCode(Code.PERMISSION_DENIED)
                .setMessage(denied)
                .setRevision(index)
                .build();
      } else if (payer != null) {
        // Weigh the session's saved answers as they stand once this request's acknowledgement is
        // taken (record would drop them anyway).
        sessions.acknowledge(cmd.getClientId(), cmd.getAck());
        long saved = sessions.usageOf(principal).savedBytes();
        result =
            saved >= payer.quotas().savedBytes() && !settles(cmd.getOp())
                ? payer.overQuota(
                    index,
                    "saved_bytes",
                    saved + " bytes of saved answers (acknowledge answers to free them)",
                    payer.quotas().savedBytes())
                : operations.execute(
                    entryVersion, clock, index, position, cmd.getClientId(), cmd.getOp(), payer);
      } else {
        result =
            operations.execute(
                entryVersion, clock, index, position, cmd.getClientId(), cmd.getOp(), null);
      }
      sessions.record(cmd, clock, result);
      return answering
          ? ServerFrame.newBuilder().setSeq(cmd.getSeq()).setResult(result).build()
          : null;
    }
    if (a instanceof Admission.Duplicate d) {
      duplicatesSuppressed++;
      if (!answering) {
        return null;
      }
      return ServerFrame.newBuilder()
          .setSeq(cmd.getSeq())
          .setResult(parseSaved(d.response()))
          .setDuplicate(true)
          .build();
    }
    return sessions.refusal(cmd, ((Admission.Rejected) a).code());
  }

  /**
   * Whether {@code op} settles or shrinks what the principal holds (a delete, a key's complete,
   * release or renewal, a lease's keep-alive or revoke): its answer is small, and refusing it would
   * keep a key owned or a lease held, so the {@code saved_bytes} quota lets it through.
   */
  private static boolean settles(Operation op) {
    return switch (op.getOpCase()) {
      case DELETE, COMPLETE_KEY, RELEASE_KEY, RENEW_KEY, KEEP_ALIVE_LEASE, REVOKE_LEASE -> true;
      default -> false;
    };
  }

  /**
   * Expires sessions, leases and key records due at the current log time; a lease's keys end with
   * it. Expiring key records here, not only when a key operation runs, bounds their memory by their
   * retention.
   */
  private void expire() {
    sessions.expire(clock);
    keys.expire(clock);
    for (String lease : leases.expire(clock)) {
      kv.deleteLeased(lease);
    }
  }

  /** {@link #get(String, String)} by a caller without a principal. */
  GetReply get(String key) {
    return get(key, "");
  }

  /** {@link #getKey(GetKeyRequest, String)} by a caller without a principal. */
  GetKeyReply getKey(GetKeyRequest req) {
    return getKey(req, "");
  }

  /**
   * A linearizable read's answer for {@code principal}, given that the read index has been applied.
   */
  GetReply get(String key, String principal) {
    String denied = auth.denial(principal, io.idem.proto.Permission.Kind.KV_READ, key);
    if (denied != null) {
      return GetReply.newBuilder().setCode(Code.PERMISSION_DENIED).setMessage(denied).build();
    }
    return kv.get(key);
  }

  /**
   * The record of an idempotency key as of the applied log time, if {@code principal} may see it.
   */
  GetKeyReply getKey(GetKeyRequest req, String principal) {
    String denied = auth.denial(principal, io.idem.proto.Permission.Kind.KEY_SCOPE, req.getScope());
    if (denied != null) {
      return GetKeyReply.newBuilder().setCode(Code.PERMISSION_DENIED).setMessage(denied).build();
    }
    GetKeyReply.Builder b = GetKeyReply.newBuilder().setCode(Code.OK).setLogTimeMs(clock);
    if (req.getKey().isEmpty()) {
      return b.setCode(Code.INVALID_ARGUMENT).setMessage("key must not be empty").build();
    }
    keys.view(req.getScope(), req.getKey(), clock)
        .ifPresent(
            v ->
                b.setFound(true)
                    .setCompleted(v.completed())
                    .setToken(v.token())
                    .setDeadlineMs(v.deadline())
                    .setCompletedAtMs(v.completedAt())
                    .setExpiresAtMs(v.expiresAt())
                    .setFingerprint(ByteString.copyFrom(v.fingerprint()))
                    .setResponse(ByteString.copyFrom(v.response())));
    return b.build();
  }

  /**
   * Checks what no single section can: called once every section of a snapshot has been read.
   *
   * @throws SnapshotFormatException if the sections disagree
   */
  void checkRestored() throws SnapshotFormatException {
    configuration.format.restoreImplied();
    if (configuration.revision() > appliedIndex) {
      throw new SnapshotFormatException(
          "configuration revision "
              + configuration.revision()
              + " out of [0, "
              + appliedIndex
              + "]");
    }
  }

  private static Result parseSaved(byte[] saved) {
    try {
      return Result.parseFrom(saved);
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalStateException("a saved response does not parse", e);
    }
  }

  private CommandResult rejectedCommand(Command c, String why) {
    if (c.getCmdCase() == Command.CmdCase.CONFIGURE) {
      return CommandResult.newBuilder()
          .setConfigured(configuration.refused(Code.INVALID_ARGUMENT, why))
          .build();
    }
    if (c.getCmdCase() == Command.CmdCase.AUTH) {
      return CommandResult.newBuilder()
          .setAuth(
              auth.view(
                  io.idem.proto.AuthReply.newBuilder()
                      .setCode(Code.INVALID_ARGUMENT)
                      .setMessage(why)))
          .build();
    }
    if (c.getCmdCase() == Command.CmdCase.REGISTER) {
      return CommandResult.newBuilder()
          .setRegistration(
              RegisterReply.newBuilder().setCode(Code.INVALID_ARGUMENT).setMessage(why))
          .build();
    }
    long seq = c.getCmdCase() == Command.CmdCase.SESSION ? c.getSession().getSeq() : 0;
    return SessionState.frame(seq, Code.INVALID_ARGUMENT, why);
  }

  /**
   * Section 1, the log position: {@code long appliedIndex, long appliedTerm, long clock, long
   * lastTerm, long duplicatesSuppressed}.
   */
  private final class Position implements StateSection {
    @Override
    public void writeSection(DataOutputStream out) throws IOException {
      out.writeLong(appliedIndex);
      out.writeLong(appliedTerm);
      out.writeLong(clock);
      out.writeLong(lastTerm);
      out.writeLong(duplicatesSuppressed);
    }

    @Override
    public void readSection(DataInputStream in, int formatVersion) throws IOException {
      appliedIndex = in.readLong();
      appliedTerm = in.readLong();
      clock = in.readLong();
      lastTerm = in.readLong();
      duplicatesSuppressed = in.readLong();
    }
  }
}
