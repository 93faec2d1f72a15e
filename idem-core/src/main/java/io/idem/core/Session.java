package io.idem.core;

/**
 * One client session. Mutable, owned by a {@link SessionTable}, never exposed.
 *
 * <p>Saved responses live in a ring indexed by {@code seq & (ring.length - 1)}: it holds exactly
 * the numbers {@code lowWater <= seq < nextSeq}, and its power-of-two capacity grows on demand up
 * to the window, so an idle session keeps at most a tiny array (measured in {@code
 * docs/PERFORMANCE.md}).
 */
final class Session {
  private static final byte[][] NO_RESPONSES = new byte[0][];

  final long clientId;
  final String name;

  /** The SHA-256 of the session's secret ({@link SessionSecret}); the secret itself is not kept. */
  final byte[] secretHash;

  /**
   * The authenticated principal that registered the session (the subject of its client
   * certificate), or null when it registered without one. Only that principal may resume it or open
   * its streams.
   */
  final String principal;

  final long ttlMs;
  long epoch;

  /** The client-chosen nonce of the registration or resume that produced the current epoch. */
  long grantNonce;

  long lastActiveMs;
  long nextSeq;
  long lowWater;

  /**
   * The key this session is filed under in the {@link ExpiryHeap}. It may lag behind {@link
   * #expiresAfterMs()} (activity does not touch the heap); the heap catches up when it reaches it.
   */
  long heapDeadlineMs;

  int heapIndex = -1;
  private byte[][] ring = NO_RESPONSES;

  /** The bytes of the saved responses in the ring. */
  private long savedBytes;

  /**
   * What its principal holds, shared by the principal's sessions; set by the table that adds it.
   */
  SessionTable.Usage usage;

  Session(
      long clientId,
      String name,
      byte[] secretHash,
      String principal,
      long ttlMs,
      long epoch,
      long grantNonce,
      long now) {
    this.clientId = clientId;
    this.grantNonce = grantNonce;
    this.name = name;
    this.secretHash = secretHash;
    this.principal = principal;
    this.ttlMs = ttlMs;
    this.epoch = epoch;
    this.lastActiveMs = now;
    this.nextSeq = 1;
    this.lowWater = 1;
    this.heapDeadlineMs = now + ttlMs;
  }

  long expiresAfterMs() {
    return lastActiveMs + ttlMs;
  }

  boolean expiredAt(long now) {
    return expiresAfterMs() < now;
  }

  void touch(long now) {
    if (now > lastActiveMs) {
      lastActiveMs = now;
    }
  }

  int savedResponses() {
    return (int) (nextSeq - lowWater);
  }

  /** The bytes of its saved responses. */
  long savedBytes() {
    return savedBytes;
  }

  /** The saved response of {@code seq}; requires {@code lowWater <= seq < nextSeq}. */
  byte[] response(long seq) {
    return ring[(int) seq & (ring.length - 1)];
  }

  /**
   * Drops saved responses below {@code ack} (clamped to {@code nextSeq}: a client cannot
   * acknowledge what was never applied). Returns how many were dropped.
   */
  int trim(long ack) {
    long newLow = Math.min(ack, nextSeq);
    if (newLow <= lowWater) {
      return 0;
    }
    int mask = ring.length - 1;
    long freed = 0;
    for (long s = lowWater; s < newLow; s++) {
      freed += ring[(int) s & mask].length;
      ring[(int) s & mask] = null;
    }
    savedBytes -= freed;
    if (usage != null) {
      usage.savedBytes -= freed;
    }
    int dropped = (int) (newLow - lowWater);
    lowWater = newLow;
    return dropped;
  }

  /** Saves the response of {@code nextSeq} and advances it. */
  void append(byte[] response) {
    int needed = savedResponses() + 1;
    if (needed > ring.length) {
      grow(needed);
    }
    ring[(int) nextSeq & (ring.length - 1)] = response;
    nextSeq++;
    savedBytes += response.length;
    if (usage != null) {
      usage.savedBytes += response.length;
    }
  }

  private void grow(int needed) {
    int capacity = Math.max(2, Integer.highestOneBit(needed - 1) << 1);
    byte[][] bigger = new byte[capacity][];
    for (long s = lowWater; s < nextSeq; s++) {
      bigger[(int) s & (capacity - 1)] = response(s);
    }
    ring = bigger;
  }
}
