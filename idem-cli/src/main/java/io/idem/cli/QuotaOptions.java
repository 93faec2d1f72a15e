package io.idem.cli;

import io.idem.proto.Quotas;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The {@code --quota NAME=VALUE} options of {@code idem config set} and {@code idem auth role put}:
 * names as the server names them ({@link #NAMES}), counts as numbers and byte quotas as sizes
 * ({@code 2000}, {@code 64KiB}, {@code 256MiB}, {@code 4GiB}). The server checks the ranges.
 */
final class QuotaOptions {
  /** The quotas, in the order of the {@code Quotas} message's fields. */
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

  private QuotaOptions() {}

  /**
   * The message for {@code given}.
   *
   * @throws IllegalArgumentException naming an unknown quota or a value that is not a number
   */
  static Quotas parse(Map<String, String> given) {
    Quotas.Builder q = Quotas.newBuilder();
    for (Map.Entry<String, String> e : given.entrySet()) {
      String name = e.getKey().trim().toLowerCase(Locale.ROOT).replace('-', '_');
      long v = size(e.getValue());
      if (v == 0) {
        throw new IllegalArgumentException(
            "--quota " + name + "=0: 0 is not a quota (one left out keeps its value)");
      }
      switch (name) {
        case "sessions" -> q.setSessions(v);
        case "saved_bytes" -> q.setSavedBytes(v);
        case "key_records" -> q.setKeyRecords(v);
        case "key_bytes" -> q.setKeyBytes(v);
        case "kv_keys" -> q.setKvKeys(v);
        case "kv_bytes" -> q.setKvBytes(v);
        case "leases" -> q.setLeases(v);
        case "list_length" -> q.setListLength(v);
        default ->
            throw new IllegalArgumentException(
                "unknown quota '" + e.getKey() + "'; the quotas are " + String.join(", ", NAMES));
      }
    }
    return q.build();
  }

  /** A size or count: digits, optionally followed by KiB, MiB or GiB. */
  static long size(String value) {
    String v = value.trim().toLowerCase(Locale.ROOT);
    long unit = 1;
    if (v.endsWith("kib")) {
      unit = 1L << 10;
    } else if (v.endsWith("mib")) {
      unit = 1L << 20;
    } else if (v.endsWith("gib")) {
      unit = 1L << 30;
    }
    String digits = unit == 1 ? v : v.substring(0, v.length() - 3);
    try {
      return Math.multiplyExact(Long.parseLong(digits), unit);
    } catch (NumberFormatException | ArithmeticException e) {
      throw new IllegalArgumentException(
          "'" + value + "' is not a number or a size like 2000, 64KiB, 256MiB or 4GiB");
    }
  }

  /** The values of {@code q} in {@link #NAMES} order. */
  static long[] values(Quotas q) {
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

  /** The quotas of {@code q} by name, in {@link #NAMES} order; empty if it sets none. */
  static Map<String, Long> byName(Quotas q) {
    Map<String, Long> m = new java.util.LinkedHashMap<>();
    long[] v = values(q);
    for (int i = 0; i < v.length; i++) {
      if (v[i] != 0) {
        m.put(NAMES.get(i), v[i]);
      }
    }
    return m;
  }

  /** {@code name=value} for each quota {@code q} sets (non-zero), space separated. */
  static String format(Quotas q) {
    long[] v = values(q);
    List<String> parts = new ArrayList<>();
    for (int i = 0; i < v.length; i++) {
      if (v[i] != 0) {
        parts.add(NAMES.get(i) + "=" + v[i]);
      }
    }
    return String.join(" ", parts);
  }
}
