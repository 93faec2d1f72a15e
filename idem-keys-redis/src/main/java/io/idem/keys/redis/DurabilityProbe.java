package io.idem.keys.redis;

import io.lettuce.core.api.sync.RedisServerCommands;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * Whether a Redis server can keep an acknowledged write through a kill -9 of its process: it has an
 * AOF ({@code CONFIG GET appendonly}, or {@code INFO persistence} where CONFIG is renamed away, as
 * on managed Redis), or at least one connected replica ({@code INFO replication}). Without either,
 * a crash loses every completion since the last RDB snapshot, if any: measured, 1,334 of 2,000
 * acknowledged completions (docs/KEYS.md, "Redis store").
 */
final class DurabilityProbe {

  /**
   * What was found on one node.
   *
   * @param node the node, for messages
   * @param aof whether it has an AOF; null: could not be read
   * @param replicas its connected replicas; null: could not be read
   */
  record Finding(String node, @Nullable Boolean aof, @Nullable Integer replicas) {

    /** Whether a kill -9 of this node can keep an acknowledged write. */
    boolean durable() {
      return Boolean.TRUE.equals(aof) || (replicas != null && replicas > 0);
    }

    /** Whether it certainly cannot: no AOF and no replica, both read. */
    boolean isVolatile() {
      return Boolean.FALSE.equals(aof) && replicas != null && replicas == 0;
    }

    String describe() {
      return node
          + ": appendonly "
          + (aof == null ? "unreadable" : aof ? "yes" : "no")
          + ", connected replicas "
          + (replicas == null ? "unreadable" : replicas);
    }
  }

  private DurabilityProbe() {}

  /** Reads {@code node}'s AOF setting and replica count; what cannot be read stays null. */
  static Finding probe(String node, RedisServerCommands<byte[], byte[]> redis) {
    Boolean aof = null;
    try {
      Map<String, String> config = redis.configGet("appendonly");
      String v = config.get("appendonly");
      if (v != null) {
        aof = v.equalsIgnoreCase("yes");
      }
    } catch (RuntimeException e) {
      // CONFIG disabled or renamed (managed Redis): INFO below.
    }
    if (aof == null) {
      try {
        String enabled = field(redis.info("persistence"), "aof_enabled");
        aof = enabled == null ? null : enabled.equals("1");
      } catch (RuntimeException e) {
        // INFO unavailable too: the finding says "unreadable".
      }
    }
    Integer replicas = null;
    try {
      String slaves = field(redis.info("replication"), "connected_slaves");
      replicas = slaves == null ? null : Integer.valueOf(slaves);
    } catch (RuntimeException e) {
      // INFO unavailable too: the finding says "unreadable".
    }
    return new Finding(node, aof, replicas);
  }

  private static @Nullable String field(String info, String name) {
    for (String line : info.split("\r?\n")) {
      if (line.startsWith(name + ":")) {
        return line.substring(name.length() + 1).trim();
      }
    }
    return null;
  }
}
