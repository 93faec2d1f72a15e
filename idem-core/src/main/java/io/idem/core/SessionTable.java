package io.idem.core;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.function.LongConsumer;

/**
 * The session table of the Idempotent Receiver: for every command it decides whether the command is
 * new, a duplicate (answered with the saved response, never applied twice), or refused.
 *
 * <p>A session is identified by its client id (the log index of its registration), holds the
 * numbers its client assigned, and saves the response of every applied request until the client
 * acknowledges it. Sessions expire after their TTL without activity, measured in log time. A
 * session may carry a durable name; {@link #resume} hands a named session to a restarted client,
 * bumping its epoch so that the older instance is {@link RejectCode#FENCED}.
 *
 * <p><b>Determinism.</b> Every method is a function of its arguments and the table's state. Time
 * ({@code now}, milliseconds of log time, never negative) and ids come from the caller. Two tables
 * fed the same calls have equal {@link #digest()}s, also when one of them was restored from a
 * snapshot in between.
 *
 * <p><b>Thread safety.</b> None, but for {@link #authenticate} and {@link #exists}: the replicated
 * state machine calls it from one thread at a time.
 *
 * <p><b>Protocol.</b> Validate, then commit: {@link #admit} only decides and mutates nothing; the
 * caller applies a {@link Admission#NEW} command and then calls {@link #record} with its response,
 * before any other call.
 */
public final class SessionTable {

  /** The largest response {@link #record} accepts: 16 MiB. */
  public static final int MAX_RESPONSE_BYTES = 16 << 20;

  /** The longest principal a session may be bound to, in UTF-8 bytes. */
  public static final int MAX_PRINCIPAL_BYTES = 4096;

  /** Largest accepted {@code now}: far from overflowing {@code now + ttl}. */
  static final long MAX_TIME_MS = 1L << 62;

  private SessionTableConfig config;
  private final LiveSessions sessions = new LiveSessions();

  /**
   * What one principal's live sessions hold: how many there are and the bytes of their saved
   * responses. Derived from the sessions (a restored table recomputes it), so it is never in a
   * snapshot. Read-only outside the package.
   */
  public static final class Usage {
    int sessions;
    long savedBytes;

    Usage() {} // made by the table only: read-only outside the package

    /** Its live sessions. */
    public int sessions() {
      return sessions;
    }

    /** The bytes of their saved responses. */
    public long savedBytes() {
      return savedBytes;
    }
  }

  /** An empty table with the given bounds. */
  public SessionTable(SessionTableConfig config) {
    if (config == null) {
      throw new IllegalArgumentException("config must not be null");
    }
    this.config = config;
  }

  /** The bounds of this table. */
  public SessionTableConfig config() {
    return config;
  }

  /**
   * Replaces the bounds. The replicated state machine calls this when a configuration change is
   * applied from the log, so every replica changes them at the same log position.
   *
   * <p>Nothing already in the table is dropped when a bound is lowered: a session holding more
   * saved responses than the new window keeps them (its duplicates are still answered), and its new
   * commands are {@link RejectCode#WINDOW_EXCEEDED} until its acknowledgements bring it below the
   * window; sessions beyond a lower {@code maxSessions} live on, and registrations are {@link
   * RejectCode#TOO_MANY_SESSIONS} until enough have ended; sessions keep their TTL and names, and a
   * named session stays resumable. Only what comes next is judged by the new bounds.
   */
  public void reconfigure(SessionTableConfig config) {
    if (config == null) {
      throw new IllegalArgumentException("config must not be null");
    }
    this.config = config;
  }

  /**
   * Opens a session. Sessions due to expire at {@code now} are expired first, so that their names
   * and places count as free.
   *
   * <p>Registration is itself retried over lossy networks, so a named registration is idempotent:
   * if the live session holding {@code name} was granted under the same {@code nonce}, this is a
   * retry of that registration and its grant is returned again, with the original id and secret.
   * (An anonymous retry opens a second session; the unused one expires after its TTL.)
   *
   * @param clientId the session's id: the log index of the registration entry, unique forever
   * @param secretHi high 64 bits of the session's secret (the table keeps only its hash)
   * @param secretLo low 64 bits of the secret
   * @param name a durable name that a restarted client can {@link #resume}, or {@code null}
   * @param ttlMs how long the session lives without activity, in {@code [1, config.maxTtlMs()]}
   * @param nonce chosen by the client per registration attempt and kept across its retries
   * @param now log time
   * @return {@link Registration.Granted} with epoch 0 and {@code nextSeq} 1; or refused with {@link
   *     RejectCode#INVALID_ARGUMENT} (TTL or name out of range), {@link RejectCode#NAME_IN_USE}, or
   *     {@link RejectCode#TOO_MANY_SESSIONS}
   * @throws IllegalArgumentException if {@code clientId} is already in use or {@code now} is out of
   *     range: both are bugs of the caller, not of a client
   */
  public Registration register(
      long clientId, long secretHi, long secretLo, String name, long ttlMs, long nonce, long now) {
    return register(clientId, secretHi, secretLo, name, ttlMs, nonce, null, now);
  }

  /**
   * {@link #register(long, long, long, String, long, long, long)} by an authenticated {@code
   * principal} (the subject of the client's certificate; null or empty: none). The session is bound
   * to it: only the same principal may {@link #resume} it or {@link #authenticate} its streams. A
   * retried named registration counts as a retry only from the same principal.
   */
  public Registration register(
      long clientId,
      long secretHi,
      long secretLo,
      String name,
      long ttlMs,
      long nonce,
      String principal,
      long now) {
    return register(
        clientId,
        SessionSecret.hash(secretHi, secretLo),
        name,
        ttlMs,
        nonce,
        principal,
        now,
        NameScope.GLOBAL);
  }

  /** Whether session names are one namespace or one per principal. */
  public enum NameScope {
    /** One namespace: a name held by any principal is in use for every other. */
    GLOBAL,
    /** Each principal has its own names: two principals may each hold a session "orders". */
    PER_PRINCIPAL
  }

  /**
   * {@link #register(long, long, long, String, long, long, String, long)} with names in {@code
   * scope}, given the secret's hash ({@link SessionSecret#hash}) rather than the secret.
   */
  public Registration register(
      long clientId,
      byte[] secretHash,
      String name,
      long ttlMs,
      long nonce,
      String principal,
      long now,
      NameScope scope) {
    checkTime(now);
    SessionSecret.check(secretHash);
    String owner = principal == null || principal.isEmpty() ? null : principal;
    if (ttlMs < 1
        || ttlMs > config.maxTtlMs()
        || !validName(name)
        || (owner != null && owner.getBytes(StandardCharsets.UTF_8).length > MAX_PRINCIPAL_BYTES)) {
      return new Registration.Refused(RejectCode.INVALID_ARGUMENT);
    }
    expire(now);
    if (sessions.get(clientId) != null) {
      throw new IllegalArgumentException("client id " + clientId + " is already in use");
    }
    Session holder = name == null ? null : sessions.named(name, owner, scope);
    if (holder != null) {
      if (holder.grantNonce == nonce && Objects.equals(holder.principal, owner)) {
        holder.touch(now);
        return granted(holder);
      }
      return new Registration.Refused(RejectCode.NAME_IN_USE);
    }
    if (sessions.size() >= config.maxSessions()) {
      return new Registration.Refused(RejectCode.TOO_MANY_SESSIONS);
    }
    Session s = new Session(clientId, name, secretHash.clone(), owner, ttlMs, 0, nonce, now);
    sessions.add(s);
    return granted(s);
  }

  /**
   * Opens, takes over or re-grants session {@code clientId} at {@code epoch}: a data group's
   * registration in a cluster of several Raft groups, where a client holds one id, its session's in
   * the metadata group, and a session under that id in each data group it writes to (Kafka's
   * producer id with a sequence per partition). The id and the secret were checked against the
   * metadata group before the command was logged; this table only keeps them consistent.
   *
   * <ul>
   *   <li>No live session {@code clientId}: one is opened at {@code epoch}, numbering from {@code
   *       max(1, firstSeq)}, so that a request of an earlier session under the same id (expired
   *       since) can never be taken as new.
   *   <li>A live one with another secret or principal: {@link RejectCode#UNAUTHENTICATED}.
   *   <li>A live one at a higher epoch: {@link RejectCode#FENCED} (a newer instance holds it).
   *   <li>Otherwise it is granted at {@code epoch} (a lower epoch is raised: the older instance's
   *       streams are fenced from now on), keeping its numbers and saved answers, and counts as
   *       activity.
   * </ul>
   *
   * @param now log time
   * @return {@link Registration.Granted}, or refused as above, or with {@link
   *     RejectCode#INVALID_ARGUMENT} (an id, epoch, number or TTL out of range) or {@link
   *     RejectCode#TOO_MANY_SESSIONS}
   */
  public Registration registerAt(
      long clientId,
      byte[] secretHash,
      long ttlMs,
      String principal,
      long now,
      long epoch,
      long firstSeq) {
    checkTime(now);
    SessionSecret.check(secretHash);
    String owner = principal == null || principal.isEmpty() ? null : principal;
    if (clientId < 1
        || epoch < 0
        || firstSeq < 0
        || firstSeq > Long.MAX_VALUE / 2
        || ttlMs < 1
        || ttlMs > config.maxTtlMs()
        || (owner != null && owner.getBytes(StandardCharsets.UTF_8).length > MAX_PRINCIPAL_BYTES)) {
      return new Registration.Refused(RejectCode.INVALID_ARGUMENT);
    }
    expire(now);
    Session s = sessions.get(clientId);
    if (s != null) {
      if (!SessionSecret.matches(s.secretHash, secretHash) || !mayUse(s, owner)) {
        return new Registration.Refused(RejectCode.UNAUTHENTICATED);
      }
      if (epoch < s.epoch) {
        return new Registration.Refused(RejectCode.FENCED);
      }
      s.epoch = epoch;
      s.touch(now);
      return granted(s);
    }
    if (sessions.size() >= config.maxSessions()) {
      return new Registration.Refused(RejectCode.TOO_MANY_SESSIONS);
    }
    Session fresh = new Session(clientId, null, secretHash.clone(), owner, ttlMs, epoch, 0, now);
    fresh.nextSeq = Math.max(1, firstSeq);
    fresh.lowWater = fresh.nextSeq;
    sessions.add(fresh);
    return granted(fresh);
  }

  /**
   * Hands the live session named {@code name} to a new instance of its client: bumps the epoch (the
   * older instance is {@link RejectCode#FENCED} from now on) and counts as activity. Saved
   * responses are kept, so the new instance can resend what the old one had outstanding, with the
   * same numbers, and get each answered once.
   *
   * @return {@link Registration.Granted} with the new epoch and the session's {@code nextSeq}; or
   *     refused with {@link RejectCode#SESSION_EXPIRED} (no live session of that name), {@link
   *     RejectCode#UNAUTHENTICATED} (wrong secret) or {@link RejectCode#INVALID_ARGUMENT} (bad
   *     name)
   */
  public Registration resume(String name, long secretHi, long secretLo, long nonce, long now) {
    return resume(name, secretHi, secretLo, nonce, null, now);
  }

  /**
   * {@link #resume(String, long, long, long, long)} by {@code principal} (null or empty: none). A
   * session bound to a principal is refused to any other with {@link RejectCode#UNAUTHENTICATED},
   * so that one tenant can neither resume nor fence another's session, even with its secret.
   */
  public Registration resume(
      String name, long secretHi, long secretLo, long nonce, String principal, long now) {
    return resume(
        name, SessionSecret.hash(secretHi, secretLo), nonce, principal, now, NameScope.GLOBAL);
  }

  /**
   * {@link #resume(String, long, long, long, String, long)} with names in {@code scope}: with
   * {@link NameScope#PER_PRINCIPAL} only the caller's own session of that name is found. The
   * presented secret comes as its hash ({@link SessionSecret#hash}).
   */
  public Registration resume(
      String name, byte[] secretHash, long nonce, String principal, long now, NameScope scope) {
    checkTime(now);
    // A name held by a session stays resumable after the name limit was lowered (reconfigure).
    if (name == null || (!validName(name) && !sessions.holdsName(name))) {
      return new Registration.Refused(RejectCode.INVALID_ARGUMENT);
    }
    expire(now);
    Session s =
        sessions.named(name, principal == null || principal.isEmpty() ? null : principal, scope);
    if (s == null) {
      return new Registration.Refused(RejectCode.SESSION_EXPIRED);
    }
    if (!SessionSecret.matches(s.secretHash, secretHash) || !mayUse(s, principal)) {
      return new Registration.Refused(RejectCode.UNAUTHENTICATED);
    }
    if (s.grantNonce != nonce) {
      s.epoch++;
      s.grantNonce = nonce;
    }
    s.touch(now);
    return granted(s);
  }

  /**
   * Decides what to do with command {@code seq} of session {@code clientId}. Mutates nothing.
   *
   * <p>The rules, in order (ARCHITECTURE, "The session state machine"):
   *
   * <ol>
   *   <li>{@code seq < 1}, {@code ack < 0} or {@code ack > seq}: {@link
   *       RejectCode#INVALID_ARGUMENT} (a client's ack is its lowest outstanding number, and this
   *       command is outstanding).
   *   <li>No session, or its TTL has passed at {@code now}: {@link RejectCode#SESSION_EXPIRED}.
   *   <li>{@code epoch} below the session's: {@link RejectCode#FENCED}; above it: {@link
   *       RejectCode#INVALID_ARGUMENT}.
   *   <li>The effective low-water mark is {@code max(lowWater, min(ack, nextSeq))}: an ack beyond
   *       {@code nextSeq} cannot acknowledge responses that were never produced.
   *   <li>{@code seq} below it: {@link RejectCode#RESPONSE_DISCARDED}.
   *   <li>{@code seq < nextSeq}: {@link Admission.Duplicate} with the saved response.
   *   <li>{@code seq > nextSeq}: {@link RejectCode#OUT_OF_ORDER}; resend from {@link
   *       #nextSeq(long)}.
   *   <li>{@code nextSeq - low >= window}: {@link RejectCode#WINDOW_EXCEEDED}.
   *   <li>Otherwise {@link Admission#NEW}.
   * </ol>
   */
  public Admission admit(long clientId, long epoch, long seq, long ack, long now) {
    if (seq < 1 || ack < 0 || ack > seq) {
      return Admission.rejected(RejectCode.INVALID_ARGUMENT);
    }
    Session s = sessions.get(clientId);
    if (s == null || s.expiredAt(now)) {
      return Admission.rejected(RejectCode.SESSION_EXPIRED);
    }
    if (epoch != s.epoch) {
      return Admission.rejected(epoch < s.epoch ? RejectCode.FENCED : RejectCode.INVALID_ARGUMENT);
    }
    long low = Math.max(s.lowWater, Math.min(ack, s.nextSeq));
    if (seq < low) {
      return Admission.rejected(RejectCode.RESPONSE_DISCARDED);
    }
    if (seq < s.nextSeq) {
      return new Admission.Duplicate(s.response(seq));
    }
    if (seq > s.nextSeq) {
      return Admission.rejected(RejectCode.OUT_OF_ORDER);
    }
    if (s.nextSeq - low >= config.window()) {
      return Admission.rejected(RejectCode.WINDOW_EXCEEDED);
    }
    return Admission.NEW;
  }

  /**
   * Commits a command that {@link #admit} found {@link Admission#NEW}: drops responses below {@code
   * ack}, saves {@code response} as the answer to {@code seq}, advances {@code nextSeq}, and counts
   * as activity at {@code now}.
   *
   * @param response the response to return to every retry of {@code seq}; the table keeps the
   *     array, so the caller must not change it afterwards
   * @throws IllegalStateException if the command was not just admitted as new (a caller bug)
   * @throws IllegalArgumentException if {@code response} is null or above {@link
   *     #MAX_RESPONSE_BYTES}
   */
  public void record(long clientId, long seq, long ack, long now, byte[] response) {
    if (response == null || response.length > MAX_RESPONSE_BYTES) {
      throw new IllegalArgumentException(
          "response must be non-null and at most "
              + MAX_RESPONSE_BYTES
              + " bytes, got "
              + (response == null ? "null" : response.length));
    }
    Session s = sessions.get(clientId);
    if (s == null || seq != s.nextSeq || ack > seq || ack < 0) {
      throw new IllegalStateException(
          "record(" + clientId + ", " + seq + ") without a NEW admission of that command");
    }
    long bytesBefore = s.savedBytes();
    sessions.count(-s.trim(ack), 0);
    // admit refused a command at or above the window (also a lowered one), so this cannot happen.
    if (s.savedResponses() >= config.window()) {
      throw new IllegalStateException(
          "record(" + clientId + ", " + seq + ") would exceed the window of " + config.window());
    }
    s.append(response);
    sessions.count(1, s.savedBytes() - bytesBefore);
    s.touch(now);
  }

  /**
   * Drops the saved responses of session {@code clientId} below {@code ack} (clamped to its next
   * number), as {@link #record} would: for a caller that weighs a command {@link #admit} found
   * {@link Admission#NEW} against what the session holds once its acknowledgement is taken. Does
   * nothing for an unknown session or a negative {@code ack}.
   */
  public void acknowledge(long clientId, long ack) {
    Session s = sessions.get(clientId);
    if (s == null || ack < 0) {
      return;
    }
    trim(s, ack);
  }

  /**
   * Keeps a session alive and drops its responses below {@code ack}.
   *
   * @return empty on success; else {@link RejectCode#SESSION_EXPIRED}, {@link RejectCode#FENCED} or
   *     {@link RejectCode#INVALID_ARGUMENT} (negative ack, or an epoch from the future)
   */
  public Optional<RejectCode> keepAlive(long clientId, long epoch, long ack, long now) {
    checkTime(now);
    if (ack < 0) {
      return Optional.of(RejectCode.INVALID_ARGUMENT);
    }
    Session s = sessions.get(clientId);
    Optional<RejectCode> refused = checkOwner(s, epoch, now);
    if (refused.isPresent()) {
      return refused;
    }
    trim(s, ack);
    s.touch(now);
    return Optional.empty();
  }

  /**
   * Ends a session and frees its saved responses and name.
   *
   * @return empty on success; else {@link RejectCode#SESSION_EXPIRED}, {@link RejectCode#FENCED} or
   *     {@link RejectCode#INVALID_ARGUMENT}
   */
  public Optional<RejectCode> close(long clientId, long epoch, long now) {
    checkTime(now);
    Session s = sessions.get(clientId);
    Optional<RejectCode> refused = checkOwner(s, epoch, now);
    if (refused.isEmpty()) {
      sessions.remove(s);
    }
    return refused;
  }

  /** Removes every session whose TTL has passed at {@code now}; returns how many. */
  public int expire(long now) {
    return expire(now, id -> {});
  }

  /**
   * Removes every session whose TTL has passed at {@code now}, that is {@code lastActive + ttl <
   * now}, and reports their ids to {@code expired} in ascending order. Costs O(log n) per expired
   * session (see {@link ExpiryHeap}), never a scan of all sessions.
   *
   * @return how many sessions expired
   */
  public int expire(long now, LongConsumer expired) {
    checkTime(now);
    return sessions.expire(now, expired);
  }

  /**
   * Whether {@code clientId} names a session with this secret. The front door checks this before
   * anything reaches the log; it does not look at expiry.
   */
  public boolean authenticate(long clientId, long secretHi, long secretLo) {
    return authenticate(clientId, secretHi, secretLo, null);
  }

  /**
   * Whether {@code clientId} names a session with this secret that {@code principal} may use: any
   * caller for a session registered without a principal, only the same principal otherwise.
   *
   * <p>Unlike the rest of the table, safe to call from any thread while another one applies: it
   * reads a concurrent index, so the front door authenticates streams without the state's lock.
   */
  public boolean authenticate(long clientId, long secretHi, long secretLo, String principal) {
    Session s = sessions.credential(clientId);
    return s != null
        && SessionSecret.matches(s.secretHash, SessionSecret.hash(secretHi, secretLo))
        && mayUse(s, principal);
  }

  /** Whether a session of that id exists; safe from any thread, like {@link #authenticate}. */
  public boolean exists(long clientId) {
    return sessions.credential(clientId) != null;
  }

  /** The principal session {@code clientId} is bound to, if any. */
  public Optional<String> principalOf(long clientId) {
    Session s = sessions.get(clientId);
    return s == null ? Optional.empty() : Optional.ofNullable(s.principal);
  }

  private static boolean mayUse(Session s, String principal) {
    return s.principal == null || s.principal.equals(principal);
  }

  /** The lowest number session {@code clientId} has not applied, or -1 if there is no session. */
  public long nextSeq(long clientId) {
    Session s = sessions.get(clientId);
    return s == null ? -1 : s.nextSeq;
  }

  /**
   * A copy of one session's state, if the table holds it (expired sessions linger until expire).
   */
  public Optional<SessionInfo> session(long clientId) {
    Session s = sessions.get(clientId);
    return s == null ? Optional.empty() : Optional.of(LiveSessions.info(s));
  }

  /**
   * The {@code n} sessions that save the most responses, most first (ties by ascending id), for an
   * operator's view. Walks every session: not for the apply path.
   */
  public List<SessionInfo> largestSessions(int n) {
    if (n < 0) {
      throw new IllegalArgumentException("n must not be negative, got " + n);
    }
    return sessions.largest(n);
  }

  /** The id of the session holding {@code name} (the first by principal, if several), or -1. */
  public long clientIdOf(String name) {
    Session s = sessions.named(name, null, NameScope.GLOBAL);
    return s == null ? -1 : s.clientId;
  }

  /** The id of the session {@code principal} (null: none) holds under {@code name}, or -1. */
  public long clientIdOf(String name, String principal) {
    Session s = sessions.named(name, principal, NameScope.PER_PRINCIPAL);
    return s == null ? -1 : s.clientId;
  }

  /** How many sessions the table holds. */
  public int size() {
    return sessions.size();
  }

  /** How many responses the table saves across all sessions. */
  public long savedResponses() {
    return sessions.savedResponses();
  }

  /**
   * Writes the whole table, bounds included, in snapshot format version 1 (see {@link
   * SnapshotCodec}). Leaves {@code out} open and does not flush it.
   */
  public void writeSnapshot(OutputStream out) throws IOException {
    SnapshotCodec.write(this, out::write);
  }

  /**
   * The table as it is now, to be written later by another thread while the table goes on changing
   * (a replica's snapshot is written off its apply thread). Costs one pass over the sessions and
   * their saved responses' references, not their bytes.
   */
  public Frozen freeze() {
    return SnapshotCodec.freeze(this);
  }

  /** A table as it was when frozen. */
  public interface Frozen {
    /**
     * Writes exactly what {@link #writeSnapshot} wrote at the freeze. Leaves {@code out} open and
     * does not flush it.
     */
    void writeSnapshot(OutputStream out) throws IOException;

    /** How many bytes {@link #writeSnapshot} writes, counted from the sessions, not written. */
    long snapshotBytes();
  }

  /**
   * Reads a table written by {@link #writeSnapshot}. Reads exactly the snapshot's bytes.
   *
   * @throws SnapshotFormatException if the input is corrupt, truncated, of an unknown version, or
   *     fails its checksum; no table is returned then
   * @throws IOException if reading fails
   */
  public static SessionTable readSnapshot(InputStream in) throws IOException {
    return SnapshotCodec.read(in);
  }

  /**
   * A SHA-256 digest of the table's replicated state, in hex: equal for equal states, whatever
   * history led to them. It covers exactly what a snapshot holds.
   */
  public String digest() {
    return SnapshotCodec.digest(this);
  }

  @Override
  public String toString() {
    return "SessionTable{sessions=" + size() + ", savedResponses=" + savedResponses() + "}";
  }

  // ---- package-private access for the snapshot codec ----

  LiveSessions sessions() {
    return sessions;
  }

  /**
   * What the live sessions of {@code principal} (null or empty: sessions without one) hold. The
   * answer is a live view; callers must not keep it across calls that change the table.
   */
  public Usage usageOf(String principal) {
    return sessions.usageOf(principal);
  }

  /** The bytes of every saved response in the table. */
  public long savedBytes() {
    return sessions.savedBytes();
  }

  // ---- internals ----

  private static Registration.Granted granted(Session s) {
    return new Registration.Granted(s.clientId, s.epoch, s.nextSeq);
  }

  /** Drops {@code s}'s responses below {@code ack} (clamped to its next number). */
  private void trim(Session s, long ack) {
    long bytesBefore = s.savedBytes();
    long dropped = s.trim(ack);
    sessions.count(-dropped, s.savedBytes() - bytesBefore);
  }

  private static Optional<RejectCode> checkOwner(Session s, long epoch, long now) {
    if (s == null || s.expiredAt(now)) {
      return Optional.of(RejectCode.SESSION_EXPIRED);
    }
    if (epoch != s.epoch) {
      return Optional.of(epoch < s.epoch ? RejectCode.FENCED : RejectCode.INVALID_ARGUMENT);
    }
    return Optional.empty();
  }

  private boolean validName(String name) {
    return name == null
        || (!name.isEmpty()
            && name.length() <= config.maxNameLength()
            && StandardCharsets.UTF_8.newEncoder().canEncode(name));
  }

  private static void checkTime(long now) {
    if (now < 0 || now > MAX_TIME_MS) {
      throw new IllegalArgumentException("log time must be in [0, 2^62], got " + now);
    }
  }
}
