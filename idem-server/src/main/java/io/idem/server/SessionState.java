package io.idem.server;

import io.idem.core.Admission;
import io.idem.core.Registration;
import io.idem.core.RejectCode;
import io.idem.core.SessionSecret;
import io.idem.core.SessionTable;
import io.idem.core.SessionTableConfig;
import io.idem.proto.CloseCmd;
import io.idem.proto.Code;
import io.idem.proto.CommandResult;
import io.idem.proto.KeepAliveCmd;
import io.idem.proto.RegisterCmd;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.Result;
import io.idem.proto.ServerFrame;
import io.idem.proto.SessionCmd;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.Optional;

/**
 * The sessions domain: idem-core's {@link SessionTable} (which holds the session bounds of the
 * replicated configuration), the session commands that are not operations (register, resume,
 * keep-alive, close), and the answers to them. Its snapshot section is the table's own snapshot
 * (idem-core's format version 1, with its own CRC32C), in every state snapshot version.
 *
 * <p>Deterministic: time is the log time passed in. Not thread-safe.
 */
final class SessionState implements StateSection {
  // Volatile: the front door authenticates through it without the state's lock (SessionTable's
  // credential index is safe for that), and a loaded snapshot replaces it.
  private volatile SessionTable table = new SessionTable(ReplicatedConfig.DEFAULTS.sessions());

  /** The session bounds in force (part of the replicated configuration). */
  SessionTableConfig bounds() {
    return table.config();
  }

  /** Applies new bounds; drops nothing already held (see {@link SessionTable#reconfigure}). */
  void reconfigure(SessionTableConfig bounds) {
    table.reconfigure(bounds);
  }

  int size() {
    return table.size();
  }

  /** The bytes a session costs beyond its saved answers, in the state's size estimate. */
  static final long SESSION_OVERHEAD = 512;

  /** The bytes a saved answer costs beyond its own, in the state's size estimate. */
  static final long SAVED_ANSWER_OVERHEAD = 16;

  /** The sessions' share of the state's size estimate. */
  long bytes() {
    return table.size() * SESSION_OVERHEAD
        + table.savedResponses() * SAVED_ANSWER_OVERHEAD
        + table.savedBytes();
  }

  /** What the live sessions of {@code principal} ("" for none) hold. */
  SessionTable.Usage usageOf(String principal) {
    return table.usageOf(principal);
  }

  /** Whether {@code principal} ("" for none) holds a live session named {@code name}. */
  boolean holdsName(String name, String principal) {
    return table.clientIdOf(name, principal) != -1;
  }

  /**
   * Drops session {@code clientId}'s saved answers below {@code ack} (see {@link
   * SessionTable#acknowledge}).
   */
  void acknowledge(long clientId, long ack) {
    table.acknowledge(clientId, ack);
  }

  /** The {@code n} sessions saving the most responses ({@link SessionTable#largestSessions}). */
  java.util.List<io.idem.core.SessionInfo> largest(int n) {
    return table.largestSessions(n);
  }

  /** Whether a session {@code clientId} exists (the front door's check). Safe without the lock. */
  boolean exists(long clientId) {
    return table.exists(clientId);
  }

  /**
   * Whether the secret is that of session {@code clientId} and {@code principal} may use it (the
   * front door's check). Safe without the lock.
   */
  boolean authenticate(long clientId, long secretHi, long secretLo, String principal) {
    return table.authenticate(clientId, secretHi, secretLo, principal);
  }

  /** The epoch of session {@code clientId}, or -1 if there is none. */
  long epochOf(long clientId) {
    return table.session(clientId).map(io.idem.core.SessionInfo::epoch).orElse(-1L);
  }

  /** The principal session {@code clientId} is bound to; empty if none (or no such session). */
  String principalOf(long clientId) {
    return table.principalOf(clientId).orElse("");
  }

  /**
   * Registers a client, or resumes a named session, as {@code cmd} asks.
   *
   * @param clientId the id a new session gets (from its log position)
   * @param limits the replicated limits, which a granted registration reports
   * @param namesPerPrincipal whether each principal has names of its own (log format 6), or all
   *     share one namespace
   * @param dataGroup whether this is a data group of a cluster of several groups: the session is
   *     then registered under the request's client id and epoch ({@link SessionTable#registerAt})
   */
  RegisterReply register(
      long clientId,
      RegisterCmd cmd,
      long now,
      io.idem.proto.Limits limits,
      boolean namesPerPrincipal,
      boolean dataGroup) {
    RegisterRequest req = cmd.getRequest();
    SessionTable.NameScope scope =
        namesPerPrincipal ? SessionTable.NameScope.PER_PRINCIPAL : SessionTable.NameScope.GLOBAL;
    String name = req.getName().isEmpty() ? null : req.getName();
    byte[] secretHash;
    if (!cmd.getSecretHash().isEmpty()) {
      secretHash = cmd.getSecretHash().toByteArray();
      if (secretHash.length != SessionSecret.HASH_BYTES) {
        return RegisterReply.newBuilder()
            .setCode(Code.INVALID_ARGUMENT)
            .setMessage("a secret hash has " + SessionSecret.HASH_BYTES + " bytes")
            .build();
      }
    } else if (req.getResume()) {
      secretHash = SessionSecret.hash(req.getSecretHi(), req.getSecretLo());
    } else {
      secretHash = SessionSecret.hash(cmd.getSecretHi(), cmd.getSecretLo());
    }
    if (dataGroup && req.getClientId() == 0) {
      return RegisterReply.newBuilder()
          .setCode(Code.INVALID_ARGUMENT)
          .setMessage(
              "a data group of a cluster of several groups registers sessions under an id of the"
                  + " metadata group (group 0): register there first")
          .build();
    }
    Registration r =
        dataGroup
            ? table.registerAt(
                req.getClientId(),
                secretHash,
                req.getTtlMs(),
                cmd.getPrincipal(),
                now,
                req.getEpoch(),
                req.getFirstSeq())
            : req.getResume()
                ? table.resume(name, secretHash, req.getNonce(), cmd.getPrincipal(), now, scope)
                : table.register(
                    clientId,
                    secretHash,
                    name,
                    req.getTtlMs(),
                    req.getNonce(),
                    cmd.getPrincipal(),
                    now,
                    scope);
    if (r instanceof Registration.Granted g) {
      return RegisterReply.newBuilder()
          .setCode(Code.OK)
          .setClientId(g.clientId())
          .setEpoch(g.epoch())
          .setNextSeq(g.nextSeq())
          .setWindow(table.config().window())
          .setLimits(limits)
          .build();
    }
    RejectCode code = ((Registration.Refused) r).code();
    return RegisterReply.newBuilder().setCode(code(code)).setMessage(explain(code)).build();
  }

  CommandResult keepAlive(KeepAliveCmd k, long now) {
    return answer(table.keepAlive(k.getClientId(), k.getEpoch(), k.getAck(), now));
  }

  CommandResult close(CloseCmd c, long now) {
    return answer(table.close(c.getClientId(), c.getEpoch(), now));
  }

  private static CommandResult answer(Optional<RejectCode> refused) {
    return frame(0, refused.map(SessionState::code).orElse(Code.OK), "");
  }

  /** The admission decision for an operation; mutates nothing (see {@link SessionTable#admit}). */
  Admission admit(SessionCmd cmd, long now) {
    return table.admit(cmd.getClientId(), cmd.getEpoch(), cmd.getSeq(), cmd.getAck(), now);
  }

  /** Records the answer to an admitted ({@link Admission#NEW}) operation. */
  void record(SessionCmd cmd, long now, Result result) {
    table.record(cmd.getClientId(), cmd.getSeq(), cmd.getAck(), now, result.toByteArray());
  }

  /** The answer to a refused operation. */
  ServerFrame refusal(SessionCmd cmd, RejectCode code) {
    ServerFrame.Builder f =
        ServerFrame.newBuilder()
            .setSeq(cmd.getSeq())
            .setResult(Result.newBuilder().setCode(code(code)).setMessage(explain(code)));
    if (code == RejectCode.OUT_OF_ORDER) {
      f.setNextSeq(table.nextSeq(cmd.getClientId()));
    }
    return f.build();
  }

  /** Removes the sessions due at log time {@code now}. */
  void expire(long now) {
    table.expire(now);
  }

  @Override
  public void writeSection(DataOutputStream out) throws IOException {
    table.writeSnapshot(out);
  }

  /**
   * The table's copy at this moment ({@link SessionTable#freeze}): the saved responses are shared,
   * not written, under the state lock, however many bytes they hold.
   */
  @Override
  public Frozen freeze() {
    SessionTable.Frozen frozen = table.freeze();
    return Frozen.of(frozen::writeSnapshot, frozen::snapshotBytes);
  }

  @Override
  public void readSection(DataInputStream in, int formatVersion) throws IOException {
    table = SessionTable.readSnapshot(in);
  }

  /** A command's answer as a bare frame: {@code seq} 0 for commands that are not operations. */
  static CommandResult frame(long seq, Code code, String message) {
    return CommandResult.newBuilder()
        .setFrame(
            ServerFrame.newBuilder()
                .setSeq(seq)
                .setResult(Result.newBuilder().setCode(code).setMessage(message)))
        .build();
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
      case UNAUTHENTICATED -> "wrong secret, or the session belongs to another client certificate";
      case INVALID_ARGUMENT -> "malformed request";
    };
  }
}
