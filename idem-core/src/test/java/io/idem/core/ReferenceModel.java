package io.idem.core;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.TreeMap;

/**
 * The session rules written the plainest way: sorted maps, a full scan for expiry, every response
 * kept in a map. Slow and obviously right, so that properties can compare {@link SessionTable}
 * against it.
 */
final class ReferenceModel {
  private static final class S {
    final long id;
    final String name;
    final long hi;
    final long lo;
    final long ttl;
    long epoch;
    long nonce;
    long lastActive;
    long nextSeq = 1;
    long lowWater = 1;
    final TreeMap<Long, byte[]> responses = new TreeMap<>();

    S(long id, String name, long hi, long lo, long ttl, long now) {
      this.id = id;
      this.name = name;
      this.hi = hi;
      this.lo = lo;
      this.ttl = ttl;
      this.lastActive = now;
    }

    boolean expired(long now) {
      return lastActive + ttl < now;
    }

    void trim(long ack) {
      lowWater = Math.max(lowWater, Math.min(ack, nextSeq));
      responses.headMap(lowWater).clear();
    }
  }

  private final SessionTableConfig config;
  private final TreeMap<Long, S> sessions = new TreeMap<>();

  ReferenceModel(SessionTableConfig config) {
    this.config = config;
  }

  Registration register(long id, long hi, long lo, String name, long ttl, long nonce, long now) {
    boolean badName = name != null && (name.isEmpty() || name.length() > config.maxNameLength());
    if (ttl < 1 || ttl > config.maxTtlMs() || badName) {
      return new Registration.Refused(RejectCode.INVALID_ARGUMENT);
    }
    expire(now);
    for (S s : sessions.values()) {
      if (name != null && name.equals(s.name)) {
        if (s.nonce != nonce) {
          return new Registration.Refused(RejectCode.NAME_IN_USE);
        }
        s.lastActive = Math.max(s.lastActive, now);
        return new Registration.Granted(s.id, s.epoch, s.nextSeq);
      }
    }
    if (sessions.size() >= config.maxSessions()) {
      return new Registration.Refused(RejectCode.TOO_MANY_SESSIONS);
    }
    S s = new S(id, name, hi, lo, ttl, now);
    s.nonce = nonce;
    sessions.put(id, s);
    return new Registration.Granted(id, 0, 1);
  }

  Registration resume(String name, long hi, long lo, long nonce, long now) {
    if (name == null || name.isEmpty() || name.length() > config.maxNameLength()) {
      return new Registration.Refused(RejectCode.INVALID_ARGUMENT);
    }
    expire(now);
    for (S s : sessions.values()) {
      if (name.equals(s.name)) {
        if (s.hi != hi || s.lo != lo) {
          return new Registration.Refused(RejectCode.UNAUTHENTICATED);
        }
        if (s.nonce != nonce) {
          s.epoch++;
          s.nonce = nonce;
        }
        s.lastActive = Math.max(s.lastActive, now);
        return new Registration.Granted(s.id, s.epoch, s.nextSeq);
      }
    }
    return new Registration.Refused(RejectCode.SESSION_EXPIRED);
  }

  /** Returns the decision; for a new command it also applies and records {@code response}. */
  Admission submit(long id, long epoch, long seq, long ack, long now, byte[] response) {
    if (seq < 1 || ack < 0 || ack > seq) {
      return Admission.rejected(RejectCode.INVALID_ARGUMENT);
    }
    S s = sessions.get(id);
    if (s == null || s.expired(now)) {
      return Admission.rejected(RejectCode.SESSION_EXPIRED);
    }
    if (epoch < s.epoch) {
      return Admission.rejected(RejectCode.FENCED);
    }
    if (epoch > s.epoch) {
      return Admission.rejected(RejectCode.INVALID_ARGUMENT);
    }
    long low = Math.max(s.lowWater, Math.min(ack, s.nextSeq));
    if (seq < low) {
      return Admission.rejected(RejectCode.RESPONSE_DISCARDED);
    }
    if (seq < s.nextSeq) {
      return new Admission.Duplicate(s.responses.get(seq));
    }
    if (seq > s.nextSeq) {
      return Admission.rejected(RejectCode.OUT_OF_ORDER);
    }
    if (s.nextSeq - low >= config.window()) {
      return Admission.rejected(RejectCode.WINDOW_EXCEEDED);
    }
    s.trim(ack);
    s.responses.put(seq, response);
    s.nextSeq++;
    s.lastActive = Math.max(s.lastActive, now);
    return Admission.NEW;
  }

  Optional<RejectCode> keepAlive(long id, long epoch, long ack, long now) {
    if (ack < 0) {
      return Optional.of(RejectCode.INVALID_ARGUMENT);
    }
    Optional<RejectCode> refused = owner(id, epoch, now);
    if (refused.isEmpty()) {
      S s = sessions.get(id);
      s.trim(ack);
      s.lastActive = Math.max(s.lastActive, now);
    }
    return refused;
  }

  Optional<RejectCode> close(long id, long epoch, long now) {
    Optional<RejectCode> refused = owner(id, epoch, now);
    if (refused.isEmpty()) {
      sessions.remove(id);
    }
    return refused;
  }

  List<Long> expire(long now) {
    List<Long> gone = new ArrayList<>();
    for (S s : List.copyOf(sessions.values())) {
      if (s.expired(now)) {
        gone.add(s.id);
        sessions.remove(s.id);
      }
    }
    return gone;
  }

  List<SessionInfo> infos() {
    List<SessionInfo> out = new ArrayList<>();
    for (S s : sessions.values()) {
      out.add(
          new SessionInfo(
              s.id,
              s.epoch,
              s.name,
              s.ttl,
              s.lastActive,
              s.nextSeq,
              s.lowWater,
              s.responses.size()));
    }
    return out;
  }

  long savedResponses() {
    return sessions.values().stream().mapToLong(s -> s.responses.size()).sum();
  }

  /** Ids of the sessions the model holds, ascending. */
  List<Long> ids() {
    return List.copyOf(sessions.keySet());
  }

  /** The current epoch of {@code id}, or 0. */
  long epoch(long id) {
    S s = sessions.get(id);
    return s == null ? 0 : s.epoch;
  }

  /** The next sequence number of {@code id}, or 1. */
  long nextSeq(long id) {
    S s = sessions.get(id);
    return s == null ? 1 : s.nextSeq;
  }

  private Optional<RejectCode> owner(long id, long epoch, long now) {
    S s = sessions.get(id);
    if (s == null || s.expired(now)) {
      return Optional.of(RejectCode.SESSION_EXPIRED);
    }
    if (epoch != s.epoch) {
      return Optional.of(epoch < s.epoch ? RejectCode.FENCED : RejectCode.INVALID_ARGUMENT);
    }
    return Optional.empty();
  }
}
