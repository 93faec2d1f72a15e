package io.idem.server;

import io.idem.proto.Quotas;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The {@code --quota NAME=VALUE} options of {@code idem server} (the quotas a new cluster's
 * bootstrap sets), {@code idem config set} and {@code idem auth role put}: names as the server
 * names them ({@link #NAMES}), counts as numbers and byte quotas as sizes ({@code 2000}, {@code
 * 64KiB}, {@code 256MiB}, {@code 4GiB}). The state machine checks the ranges.
 */
public final class QuotaFlags {
  /** The quotas, in the order of the {@code Quotas} message's fields. */
  public static final List<String> NAMES = io.idem.server.Quotas.NAMES;

  private QuotaFlags() {}

  /**
   * The message for {@code given} (name to value).
   *
   * @throws IllegalArgumentException naming an unknown quota, a 0, or a value that is not a number
   */
  public static Quotas parse(Map<String, String> given) {
    long[] v = new long[NAMES.size()];
    for (Map.Entry<String, String> e : given.entrySet()) {
      String name = e.getKey().trim().toLowerCase(Locale.ROOT).replace('-', '_');
      int i = NAMES.indexOf(name);
      if (i < 0) {
        throw new IllegalArgumentException(
            "unknown quota '" + e.getKey() + "'; the quotas are " + String.join(", ", NAMES));
      }
      v[i] = size(e.getValue());
      if (v[i] == 0) {
        throw new IllegalArgumentException(
            "--quota " + name + "=0: 0 is not a quota (one left out keeps its value)");
      }
    }
    return io.idem.server.Quotas.of(v).toProto();
  }

  /** A size or count: digits, optionally followed by KiB, MiB or GiB. */
  public static long size(String value) {
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

  /** The quotas {@code q} sets (non-zero) by name, in {@link #NAMES} order. */
  public static Map<String, Long> byName(Quotas q) {
    Map<String, Long> m = new LinkedHashMap<>();
    long[] v = io.idem.server.Quotas.values(q);
    for (int i = 0; i < v.length; i++) {
      if (v[i] != 0) {
        m.put(NAMES.get(i), v[i]);
      }
    }
    return m;
  }

  /** {@code name=value} for each quota {@code q} sets, space separated. */
  public static String format(Quotas q) {
    List<String> parts = new ArrayList<>();
    byName(q).forEach((name, value) -> parts.add(name + "=" + value));
    return String.join(" ", parts);
  }
}
