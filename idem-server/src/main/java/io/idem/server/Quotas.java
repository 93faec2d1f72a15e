package io.idem.server;

import java.util.List;

/**
 * What one principal may hold in the replicated state (log format 7 and later): live sessions,
 * saved-answer bytes, idempotency-key records and their bytes, KV keys and their bytes, leases, and
 * the longest list it may append to. Part of the replicated configuration ({@link QuotaState}):
 * every replica refuses the same command. Immutable.
 *
 * <p>A principal's quotas are the configured defaults, except where a role it holds sets one (the
 * largest such value); the role {@code admin} has none ({@link #UNLIMITED}). Without auth, every
 * client without a certificate is the one anonymous principal "", which has the defaults as its
 * share.
 */
record Quotas(
    long sessions,
    long savedBytes,
    long keyRecords,
    long keyBytes,
    long kvKeys,
    long kvBytes,
    long leases,
    long listLength) {

  /** The names of the fields, as {@code idem config}, roles and refusals name them. */
  static final List<String> NAMES =
      List.of(
          "sessions",
          "saved_bytes",
          "key_records",
          "key_bytes",
          "kv_keys",
          "kv_bytes",
          "leases",
          "list_length");

  /**
   * The defaults: generous for one application, small next to the backend budget ({@link
   * QuotaState#DEFAULT_BACKEND_BYTES}), so that no principal fills it alone.
   */
  static final Quotas DEFAULTS =
      new Quotas(10_000, 256L << 20, 100_000, 128L << 20, 1_000_000, 256L << 20, 10_000, 100_000);

  /**
   * The hard limits: a configured or role value above one is refused. The counts stay well inside
   * an {@code int}, the bytes inside what any heap holds.
   */
  static final Quotas HARD =
      new Quotas(
          1_000_000,
          64L << 30,
          10_000_000,
          64L << 30,
          100_000_000,
          64L << 30,
          1_000_000,
          10_000_000);

  /** No quota at all: the role admin. */
  static final Quotas UNLIMITED =
      new Quotas(
          Long.MAX_VALUE,
          Long.MAX_VALUE,
          Long.MAX_VALUE,
          Long.MAX_VALUE,
          Long.MAX_VALUE,
          Long.MAX_VALUE,
          Long.MAX_VALUE,
          Long.MAX_VALUE);

  static Quotas of(long[] v) {
    return new Quotas(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
  }

  long[] values() {
    return new long[] {
      sessions, savedBytes, keyRecords, keyBytes, kvKeys, kvBytes, leases, listLength
    };
  }

  static long[] values(io.idem.proto.Quotas q) {
    return new long[] {
      q.getSessions(),
      q.getSavedBytes(),
      q.getKeyRecords(),
      q.getKeyBytes(),
      q.getKvKeys(),
      q.getKvBytes(),
      q.getLeases(),
      q.getListLength()
    };
  }

  io.idem.proto.Quotas toProto() {
    return io.idem.proto.Quotas.newBuilder()
        .setSessions(sessions)
        .setSavedBytes(savedBytes)
        .setKeyRecords(keyRecords)
        .setKeyBytes(keyBytes)
        .setKvKeys(kvKeys)
        .setKvBytes(kvBytes)
        .setLeases(leases)
        .setListLength(listLength)
        .build();
  }

  /**
   * Why {@code q} is not acceptable as a change or a role's quotas (naming the first bad field), or
   * null: every field is 0 (unset) or in {@code [1, HARD]}.
   */
  static String problem(io.idem.proto.Quotas q) {
    long[] v = values(q);
    long[] hard = HARD.values();
    for (int i = 0; i < v.length; i++) {
      if (v[i] != 0) {
        String bad = Limits.outside("quotas." + NAMES.get(i), v[i], hard[i]);
        if (bad != null) {
          return bad;
        }
      }
    }
    return null;
  }

  /**
   * These quotas with the non-zero fields of {@code change} in their place.
   *
   * @throws IllegalArgumentException naming the first field out of range
   */
  Quotas with(io.idem.proto.Quotas change) {
    String bad = problem(change);
    if (bad != null) {
      throw new IllegalArgumentException(bad);
    }
    long[] v = values();
    long[] c = values(change);
    for (int i = 0; i < v.length; i++) {
      if (c[i] != 0) {
        v[i] = c[i];
      }
    }
    return of(v);
  }

  /**
   * These quotas (the defaults) where {@code roles} leaves a field 0, and the roles' value where it
   * sets one.
   */
  Quotas under(long[] roles) {
    long[] v = values();
    for (int i = 0; i < v.length; i++) {
      if (roles[i] != 0) {
        v[i] = roles[i];
      }
    }
    return of(v);
  }
}
