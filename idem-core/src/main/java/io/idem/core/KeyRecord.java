package io.idem.core;

import java.util.Comparator;

/**
 * One key's record. Completed records have {@code response != null}. A record of an older
 * generation than the table's may be in a frozen copy that a writer thread is reading: it is copied
 * before it changes ({@code KeyTable.writable}).
 */
final class KeyRecord {
  final KeyTable.KeyId id;
  final byte[] fingerprint;
  long generation;
  int slot; // its index in the table's array of records; never read by a frozen copy's writer
  long token;
  long deadline;
  long retentionMs;
  byte[] response;
  long completedAt;
  String owner; // who acquired it, charged for it; null: nobody

  KeyRecord(KeyTable.KeyId id, byte[] fingerprint) {
    this.id = id;
    this.fingerprint = fingerprint;
  }

  /** The bytes it holds that callers chose: key, scope (2 bytes a char), fingerprint, response. */
  long footprint() {
    return 2L * (id.scope().length() + id.key().length())
        + fingerprint.length
        + (response == null ? 0 : response.length);
  }

  /** A copy of its fields now; the byte arrays are never changed in place, so they are shared. */
  KeyRecord copy() {
    KeyRecord c = new KeyRecord(id, fingerprint);
    c.token = token;
    c.deadline = deadline;
    c.retentionMs = retentionMs;
    c.response = response;
    c.completedAt = completedAt;
    c.owner = owner;
    return c;
  }

  /** When the record is dropped: retention after completion, or after the owner's deadline. */
  long expiresAt() {
    return (response != null ? completedAt : deadline) + retentionMs;
  }

  /**
   * The expiry index's order: by the time a record is dropped, then by token, which no two records
   * share (equal times are common: every command of a log entry has its time). Which of the records
   * due together goes first changes nothing, since {@link KeyTable#expire} drops them all; a token
   * compares cheaply, where a key took a string comparison on the apply thread. A record leaves the
   * index before either field changes and comes back after.
   */
  static final Comparator<KeyRecord> BY_EXPIRY =
      Comparator.comparingLong(KeyRecord::expiresAt).thenComparingLong(r -> r.token);
}
