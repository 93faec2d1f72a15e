package io.idem.keys;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.HexFormat;

/**
 * What a request carried, reduced to a SHA-256: a key reused with another payload is a {@code
 * Mismatch}, not a replay of someone else's answer. Immutable.
 */
public final class Fingerprint {
  private static final Fingerprint NONE = new Fingerprint(new byte[0]);

  private final byte[] bytes;

  private Fingerprint(byte[] bytes) {
    this.bytes = bytes;
  }

  /** The SHA-256 of {@code payload}. */
  public static Fingerprint of(byte[] payload) {
    try {
      return new Fingerprint(MessageDigest.getInstance("SHA-256").digest(payload));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JDK has SHA-256", e);
    }
  }

  /** No fingerprint: any payload matches. */
  public static Fingerprint none() {
    return NONE;
  }

  /** The fingerprint's bytes (a copy): 32, or none. */
  public byte[] bytes() {
    return bytes.clone();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Fingerprint f && Arrays.equals(bytes, f.bytes);
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(bytes);
  }

  @Override
  public String toString() {
    return bytes.length == 0 ? "none" : HexFormat.of().formatHex(bytes, 0, 8);
  }
}
