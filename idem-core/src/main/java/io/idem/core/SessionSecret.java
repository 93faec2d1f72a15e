package io.idem.core;

import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * What the table keeps of a session's secret: its SHA-256, never the secret. A secret is 128 random
 * bits chosen by the client (or, for a client that sends none, by the leader), so an unsalted hash
 * cannot be reversed by search; the table, the log from format 6 on, and the snapshots hold only
 * the hash, and a presented secret is compared with it in constant time.
 */
public final class SessionSecret {
  /** The length of a hash, in bytes. */
  public static final int HASH_BYTES = 32;

  private SessionSecret() {}

  /** The hash of the secret {@code hi:lo} (big-endian, 16 bytes). */
  public static byte[] hash(long hi, long lo) {
    try {
      return MessageDigest.getInstance("SHA-256")
          .digest(ByteBuffer.allocate(16).putLong(hi).putLong(lo).array());
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JVM has SHA-256", e);
    }
  }

  /**
   * Whether {@code presented} equals {@code stored}, in time that does not depend on where they
   * differ.
   */
  public static boolean matches(byte[] stored, byte[] presented) {
    return MessageDigest.isEqual(stored, presented);
  }

  /**
   * Checks that {@code hash} is one.
   *
   * @throws IllegalArgumentException if it is not {@link #HASH_BYTES} long
   */
  public static byte[] check(byte[] hash) {
    if (hash == null || hash.length != HASH_BYTES) {
      throw new IllegalArgumentException(
          "a secret hash has "
              + HASH_BYTES
              + " bytes, got "
              + (hash == null ? "none" : hash.length));
    }
    return hash;
  }
}
