package io.idem.server;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import io.idem.core.Admission;
import io.idem.core.Registration;
import io.idem.core.RejectCode;
import io.idem.core.SessionTable;
import io.idem.proto.Append;
import io.idem.proto.Code;
import io.idem.proto.Command;
import io.idem.proto.CommandResult;
import io.idem.proto.CompareAndSet;
import io.idem.proto.ConfigureCmd;
import io.idem.proto.ConfigureReply;
import io.idem.proto.EntryResult;
import io.idem.proto.GetReply;
import io.idem.proto.Increment;
import io.idem.proto.KeepAliveCmd;
import io.idem.proto.LogEntry;
import io.idem.proto.Operation;
import io.idem.proto.Put;
import io.idem.proto.RegisterCmd;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.Result;
import io.idem.proto.ServerFrame;
import io.idem.proto.SessionCmd;
import java.util.Optional;

/**
 * Everything the log replicates: sessions, the KV map, leases and the log clock, and the
 * deterministic function that applies one log entry to them. Ratis-free, so that it can be tested
 * and simulated alone; {@link IdemStateMachine} adapts it to Ratis.
 *
 * <p>Determinism: time is the entries' leader stamps ({@code clock = max(clock, stamp)}), session
 * ids are log positions, and every collection is ordered. Not thread-safe: the state machine holds
 * a lock around every call.
 */
final class ReplicatedState {
  /**
   * The log-entry format this code writes. It applies versions 1 to 3: in version 1 entries any
   * session may renew or revoke a lease, and a revoke answers no log time; version 2 entries
   * (leases have holders) are refused by nodes that only know version 1, so a rolling upgrade stops
   * old nodes instead of letting them apply new entries differently. Version 3 adds {@code
   * ConfigureCmd} (the replicated configuration), which a version 2 node would skip as an unknown
   * command and so decide by other limits than its peers; it stops instead.
   */
  static final int LOG_FORMAT_VERSION = 3;

  /** The first log-entry format in which {@code ConfigureCmd} is applied. */
  static final int CONFIGURE_SINCE_VERSION = 3;

  /** The oldest log-entry format this code still applies. */
  static final int OLDEST_LOG_FORMAT_VERSION = 1;

  /**
   * Most commands in one entry. A registration's client id is {@code index * this + position}, so
   * ids stay unique although one entry registers many clients.
   */
  static final int MAX_COMMANDS_PER_ENTRY = 4096;

  /**
   * The replicated limits: the defaults until a configuration is applied. Together with the session
   * table's bounds they are the {@link ReplicatedConfig}; no node-local setting decides answers.
   */
  Limits limits = Limits.DEFAULTS;

  /** The log index of the entry that set the configuration in force; 0: none yet (defaults). */
  long configRevision;

  SessionTable sessions = new SessionTable(ReplicatedConfig.DEFAULTS.sessions());
  final KvStore kv = new KvStore();
  final LeaseTable leases = new LeaseTable();
  long clock;
  long lastTerm;
  long appliedIndex;
  long appliedTerm;
  long duplicatesSuppressed;

  /** The format version of the entry being applied (not part of the state). */
  private int entryVersion = LOG_FORMAT_VERSION;

  /** An empty state, deciding by {@link ReplicatedConfig#DEFAULTS} until one is configured. */
  ReplicatedState() {}

  /** The configuration in force. */
  ReplicatedConfig config() {
    return new ReplicatedConfig(limits, sessions.config());
  }

  /** Whether a configuration was applied (else the defaults decide). */
  boolean configured() {
    return configRevision > 0;
  }

  /**
   * Applies entry {@code index} of term {@code term} and returns one outcome per command.
   *
   * <p>With {@code answering} false (a follower, or an entry replayed from the log: nobody waits
   * for its outcomes) the state changes alike, saved responses included, but no outcomes are built
   * and the result is empty.
   *
   * @throws IllegalStateException for an entry of an unknown format version: applying it wrongly
   *     would make replicas diverge, so the node must stop instead
   */
  EntryResult apply(long index, long term, LogEntry entry, boolean answering) {
    if (entry.getFormatVersion() < OLDEST_LOG_FORMAT_VERSION
        || entry.getFormatVersion() > LOG_FORMAT_VERSION) {
      throw new IllegalStateException(
          "log entry "
              + index
              + " has format version "
              + entry.getFormatVersion()
              + "; this node applies versions "
              + OLDEST_LOG_FORMAT_VERSION
              + " to "
              + LOG_FORMAT_VERSION
              + ". Upgrade the node.");
    }
    entryVersion = entry.getFormatVersion();
    clock = Math.max(clock, entry.getLeaderTimeMs());
    if (term > lastTerm) {
      // A new leader: its predecessor's lease keep-alives may have been lost in the failover.
      leases.grace(clock);
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
    appliedIndex = index;
    appliedTerm = term;
    return out.build();
  }

  /** Applies one command; its outcome, or null for a session command when not answering. */
  private CommandResult applyCommand(long index, int position, Command c, boolean answering) {
    switch (c.getCmdCase()) {
      case REGISTER:
        return CommandResult.newBuilder()
            .setRegistration(register(index * MAX_COMMANDS_PER_ENTRY + position, c.getRegister()))
            .build();
      case SESSION:
        {
          ServerFrame f = session(index, c.getSession(), answering);
          return f == null ? null : CommandResult.newBuilder().setFrame(f).build();
        }
      case KEEP_ALIVE:
        {
          KeepAliveCmd k = c.getKeepAlive();
          Optional<RejectCode> refused =
              sessions.keepAlive(k.getClientId(), k.getEpoch(), k.getAck(), clock);
          return frame(0, refused.map(ReplicatedState::code).orElse(Code.OK), "");
        }
      case CLOSE:
        {
          Optional<RejectCode> refused =
              sessions.close(c.getClose().getClientId(), c.getClose().getEpoch(), clock);
          return frame(0, refused.map(ReplicatedState::code).orElse(Code.OK), "");
        }
      case CONFIGURE:
        if (entryVersion < CONFIGURE_SINCE_VERSION) {
          // Version 2 nodes skipped it as unknown; so does every node replaying such an entry.
          return rejectedCommand(c, "unknown command");
        }
        return CommandResult.newBuilder().setConfigured(configure(index, c.getConfigure())).build();
      default:
        return rejectedCommand(c, "unknown command");
    }
  }

  /**
   * Applies a configuration change. A bootstrap command applies only while no configuration was
   * applied (first wins: leaders racing at bootstrap agree, whatever their flags); a change
   * replaces the non-zero fields. An out-of-range value refuses the whole command, which changes
   * nothing. Lowered bounds drop nothing already held (see {@link SessionTable#reconfigure}):
   * existing keys, values and leases stay, and only later commands are judged by the new limits.
   */
  private ConfigureReply configure(long index, ConfigureCmd cmd) {
    ConfigureReply.Builder reply = ConfigureReply.newBuilder().setCode(Code.OK);
    if (!(cmd.getBootstrap() && configured())) {
      try {
        ReplicatedConfig next = config().with(cmd.getLimits(), cmd.getSessions());
        limits = next.limits();
        sessions.reconfigure(next.sessions());
        configRevision = index;
      } catch (IllegalArgumentException bad) {
        reply.setCode(Code.INVALID_ARGUMENT).setMessage(bad.getMessage());
      }
    }
    ReplicatedConfig now = config();
    return reply
        .setLimits(now.limitsProto())
        .setSessions(now.boundsProto())
        .setConfigRevision(configRevision)
        .build();
  }

  private RegisterReply register(long clientId, RegisterCmd cmd) {
    RegisterRequest req = cmd.getRequest();
    String name = req.getName().isEmpty() ? null : req.getName();
    Registration r =
        req.getResume()
            ? sessions.resume(name, req.getSecretHi(), req.getSecretLo(), req.getNonce(), clock)
            : sessions.register(
                clientId,
                cmd.getSecretHi(),
                cmd.getSecretLo(),
                name,
                req.getTtlMs(),
                req.getNonce(),
                clock);
    if (r instanceof Registration.Granted g) {
      return RegisterReply.newBuilder()
          .setCode(Code.OK)
          .setClientId(g.clientId())
          .setEpoch(g.epoch())
          .setNextSeq(g.nextSeq())
          .setSecretHi(g.secretHi())
          .setSecretLo(g.secretLo())
          .setWindow(sessions.config().window())
          .setLimits(config().limitsProto())
          .build();
    }
    RejectCode code = ((Registration.Refused) r).code();
    return RegisterReply.newBuilder().setCode(code(code)).setMessage(explain(code)).build();
  }

  private ServerFrame session(long index, SessionCmd cmd, boolean answering) {
    long id = cmd.getClientId();
    Admission a = sessions.admit(id, cmd.getEpoch(), cmd.getSeq(), cmd.getAck(), clock);
    if (a == Admission.NEW) {
      Result result = execute(index, id, cmd.getOp());
      sessions.record(id, cmd.getSeq(), cmd.getAck(), clock, result.toByteArray());
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
    RejectCode code = ((Admission.Rejected) a).code();
    ServerFrame.Builder f =
        ServerFrame.newBuilder()
            .setSeq(cmd.getSeq())
            .setResult(Result.newBuilder().setCode(code(code)).setMessage(explain(code)));
    if (code == RejectCode.OUT_OF_ORDER) {
      f.setNextSeq(sessions.nextSeq(id));
    }
    return f.build();
  }

  /** Executes one new operation; business failures are answers too, and are saved as such. */
  private Result execute(long revision, long session, Operation op) {
    switch (op.getOpCase()) {
      case PUT:
        return put(revision, op.getPut());
      case DELETE:
        return delete(revision, op.getDelete().getKey());
      case COMPARE_AND_SET:
        return compareAndSet(revision, op.getCompareAndSet());
      case INCREMENT:
        return increment(revision, op.getIncrement());
      case APPEND:
        return append(revision, op.getAppend());
      case GRANT_LEASE:
        return grantLease(
            revision, session, op.getGrantLease().getName(), op.getGrantLease().getTtlMs());
      case KEEP_ALIVE_LEASE:
        return keepAliveLease(revision, session, op.getKeepAliveLease().getName());
      case REVOKE_LEASE:
        return revokeLease(revision, session, op.getRevokeLease().getName());
      default:
        return invalid(revision, "the request carries no operation");
    }
  }

  private Result put(long revision, Put p) {
    String bad = firstProblem(limits.checkKey(p.getKey()), limits.checkValue(p.getValue().size()));
    if (bad != null) {
      return invalid(revision, bad);
    }
    KvStore.Entry existing = kv.get(p.getKey());
    if (existing != null && existing.isList()) {
      return wrongType(revision, p.getKey(), "a list (written by append)");
    }
    LeaseTable.Lease lease = null;
    if (!p.getLease().isEmpty()) {
      lease = leases.get(p.getLease());
      if (lease == null) {
        return result(revision, Code.LEASE_NOT_FOUND, "no lease named \"" + p.getLease() + "\"");
      }
    }
    KvStore.Entry e = kv.put(p.getKey(), p.getValue(), revision);
    attach(p.getKey(), e, lease);
    return ok(revision).setVersion(e.version).setDone(true).build();
  }

  private Result delete(long revision, String key) {
    String bad = limits.checkKey(key);
    if (bad != null) {
      return invalid(revision, bad);
    }
    KvStore.Entry e = kv.remove(key);
    if (e != null) {
      attach(key, e, null);
    }
    return ok(revision).setDone(e != null).build();
  }

  private Result compareAndSet(long revision, CompareAndSet c) {
    String bad = firstProblem(limits.checkKey(c.getKey()), limits.checkValue(c.getValue().size()));
    if (bad != null) {
      return invalid(revision, bad);
    }
    KvStore.Entry e = kv.get(c.getKey());
    if (e != null && e.isList()) {
      return wrongType(revision, c.getKey(), "a list (written by append)");
    }
    long current = e == null ? 0 : e.version;
    if (current != c.getExpectedVersion()) {
      return Result.newBuilder()
          .setCode(Code.CAS_MISMATCH)
          .setMessage("version is " + current + ", expected " + c.getExpectedVersion())
          .setRevision(revision)
          .setVersion(current)
          .build();
    }
    KvStore.Entry written = kv.put(c.getKey(), c.getValue(), revision);
    return ok(revision).setVersion(written.version).setDone(true).build();
  }

  private Result increment(long revision, Increment inc) {
    String bad = limits.checkKey(inc.getKey());
    if (bad != null) {
      return invalid(revision, bad);
    }
    KvStore.Entry e = kv.get(inc.getKey());
    long current = 0;
    if (e != null) {
      if (e.isList()) {
        return wrongType(revision, inc.getKey(), "a list (written by append)");
      }
      try {
        current = Long.parseLong(e.value.toStringUtf8());
      } catch (NumberFormatException notANumber) {
        return wrongType(revision, inc.getKey(), "not a decimal number");
      }
    }
    long next;
    try {
      next = Math.addExact(current, inc.getDelta());
    } catch (ArithmeticException overflow) {
      return invalid(revision, "counter " + inc.getKey() + " would overflow");
    }
    KvStore.Entry written =
        kv.put(inc.getKey(), ByteString.copyFromUtf8(Long.toString(next)), revision);
    return ok(revision).setVersion(written.version).setNumber(next).setDone(true).build();
  }

  private Result append(long revision, Append a) {
    String bad = firstProblem(limits.checkKey(a.getKey()), limits.checkValue(a.getValue().size()));
    if (bad != null) {
      return invalid(revision, bad);
    }
    KvStore.Entry e = kv.get(a.getKey());
    if (e != null && !e.isList()) {
      return wrongType(revision, a.getKey(), "a plain value (written by put)");
    }
    KvStore.Entry written = kv.append(a.getKey(), a.getValue(), revision);
    return ok(revision)
        .setVersion(written.version)
        .setNumber(written.elements.size())
        .setDone(true)
        .build();
  }

  private Result grantLease(long revision, long session, String name, long ttlMs) {
    String bad = limits.checkName(name);
    if (bad == null && (ttlMs < 1 || ttlMs > limits.maxLeaseTtlMs())) {
      bad = "lease TTL must be in [1, " + limits.maxLeaseTtlMs() + "] ms, got " + ttlMs;
    }
    if (bad != null) {
      return invalid(revision, bad);
    }
    if (leases.get(name) != null) {
      return result(revision, Code.DUPLICATE_LEASE, "lease \"" + name + "\" is held");
    }
    LeaseTable.Lease l = leases.grant(name, session, ttlMs, clock);
    return ok(revision).setNumber(l.expiresAtMs).setDone(true).build();
  }

  private Result keepAliveLease(long revision, long session, String name) {
    LeaseTable.Lease l = heldBy(session, name);
    if (l == null) {
      return notHeld(revision, name);
    }
    leases.extend(l, clock + l.ttlMs);
    return ok(revision).setNumber(l.expiresAtMs).setDone(true).build();
  }

  /** Revokes the lease; the answer's number is the log time at which it ended. */
  private Result revokeLease(long revision, long session, String name) {
    LeaseTable.Lease l = heldBy(session, name);
    if (l == null) {
      return notHeld(revision, name);
    }
    deleteKeysOf(leases.revoke(l));
    Result.Builder r = ok(revision).setDone(true);
    return (entryVersion >= 2 ? r.setNumber(clock) : r).build();
  }

  /**
   * The lease {@code name} if {@code session} holds it. Leases restored from a version 1 snapshot
   * have no recorded holder (0: session ids start at 4096) and any session may renew or revoke
   * them, as may any session in a version 1 entry.
   */
  private LeaseTable.Lease heldBy(long session, String name) {
    LeaseTable.Lease l = leases.get(name);
    boolean mine = l != null && (l.holder == session || l.holder == 0 || entryVersion < 2);
    return mine ? l : null;
  }

  private Result notHeld(long revision, String name) {
    return result(
        revision,
        Code.LEASE_NOT_FOUND,
        leases.get(name) == null
            ? "no lease named \"" + name + "\""
            : "lease \"" + name + "\" is held by another session");
  }

  /** Moves {@code key} from its current lease (if any) to {@code lease} (may be null). */
  private void attach(String key, KvStore.Entry e, LeaseTable.Lease lease) {
    if (e.lease != null) {
      LeaseTable.Lease old = leases.get(e.lease);
      if (old != null) {
        old.keys.remove(key);
      }
    }
    e.lease = lease == null ? null : lease.name;
    if (lease != null) {
      lease.keys.add(key);
    }
  }

  private void deleteKeysOf(Iterable<String> keys) {
    for (String key : keys) {
      kv.remove(key);
    }
  }

  /** Expires sessions and leases due at the current log time. */
  private void expire() {
    sessions.expire(clock);
    for (LeaseTable.Lease l : leases.expire(clock)) {
      deleteKeysOf(l.keys);
    }
  }

  /** A linearizable read's answer, given that the read index has been applied. */
  GetReply get(String key) {
    String bad = limits.checkKey(key);
    if (bad != null) {
      return GetReply.newBuilder().setCode(Code.INVALID_ARGUMENT).setMessage(bad).build();
    }
    KvStore.Entry e = kv.get(key);
    if (e == null) {
      return GetReply.newBuilder().setCode(Code.OK).setFound(false).build();
    }
    GetReply.Builder b =
        GetReply.newBuilder()
            .setCode(Code.OK)
            .setFound(true)
            .setVersion(e.version)
            .setModRevision(e.modRevision);
    if (e.isList()) {
      b.addAllElements(e.elements);
    } else {
      b.setValue(e.value);
    }
    if (e.lease != null) {
      b.setLease(e.lease);
    }
    return b.build();
  }

  // ---- helpers ----

  private static Result parseSaved(byte[] saved) {
    try {
      return Result.parseFrom(saved);
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalStateException("a saved response does not parse", e);
    }
  }

  private static String firstProblem(String a, String b) {
    return a != null ? a : b;
  }

  private static Result.Builder ok(long revision) {
    return Result.newBuilder().setCode(Code.OK).setRevision(revision);
  }

  private static Result result(long revision, Code code, String message) {
    return Result.newBuilder().setCode(code).setMessage(message).setRevision(revision).build();
  }

  private static Result invalid(long revision, String message) {
    return result(revision, Code.INVALID_ARGUMENT, message);
  }

  private static Result wrongType(long revision, String key, String what) {
    return result(revision, Code.WRONG_TYPE, "key \"" + key + "\" holds " + what);
  }

  private static CommandResult frame(long seq, Code code, String message) {
    return CommandResult.newBuilder()
        .setFrame(
            ServerFrame.newBuilder()
                .setSeq(seq)
                .setResult(Result.newBuilder().setCode(code).setMessage(message)))
        .build();
  }

  private CommandResult rejectedCommand(Command c, String why) {
    if (c.getCmdCase() == Command.CmdCase.CONFIGURE) {
      ReplicatedConfig now = config();
      return CommandResult.newBuilder()
          .setConfigured(
              ConfigureReply.newBuilder()
                  .setCode(Code.INVALID_ARGUMENT)
                  .setMessage(why)
                  .setLimits(now.limitsProto())
                  .setSessions(now.boundsProto())
                  .setConfigRevision(configRevision))
          .build();
    }
    if (c.getCmdCase() == Command.CmdCase.REGISTER) {
      return CommandResult.newBuilder()
          .setRegistration(
              RegisterReply.newBuilder().setCode(Code.INVALID_ARGUMENT).setMessage(why))
          .build();
    }
    long seq = c.getCmdCase() == Command.CmdCase.SESSION ? c.getSession().getSeq() : 0;
    return frame(seq, Code.INVALID_ARGUMENT, why);
  }

  static Code code(RejectCode c) {
    return switch (c) {
      case SESSION_EXPIRED -> Code.SESSION_EXPIRED;
      case FENCED -> Code.FENCED;
      case RESPONSE_DISCARDED -> Code.RESPONSE_DISCARDED;
      case OUT_OF_ORDER -> Code.OUT_OF_ORDER;
      case WINDOW_EXCEEDED -> Code.WINDOW_EXCEEDED;
      case TOO_MANY_SESSIONS -> Code.TOO_MANY_SESSIONS;
      case NAME_IN_USE -> Code.NAME_IN_USE;
      case UNAUTHENTICATED -> Code.UNAUTHENTICATED;
      case INVALID_ARGUMENT -> Code.INVALID_ARGUMENT;
    };
  }

  static String explain(RejectCode c) {
    return switch (c) {
      case SESSION_EXPIRED -> "no live session: it expired, was closed, or never existed";
      case FENCED -> "a newer instance of this client resumed the session";
      case RESPONSE_DISCARDED -> "the request was answered and acknowledged before";
      case OUT_OF_ORDER -> "gap in the request numbers: resend from next_seq";
      case WINDOW_EXCEEDED -> "too many unacknowledged requests in this session";
      case TOO_MANY_SESSIONS -> "the cluster holds its maximum number of sessions";
      case NAME_IN_USE -> "a live session holds this name";
      case UNAUTHENTICATED -> "wrong secret";
      case INVALID_ARGUMENT -> "malformed request";
    };
  }
}
