package io.idem.proto;

import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32C;

/**
 * Where a name lives in a cluster of several Raft groups: the part of the protocol that clients and
 * servers compute alike.
 *
 * <p>The keyspace is cut into {@link #COUNT} partitions. A KV key, a lease name and an idempotency
 * key {@code (scope, key)} each fall in one partition, by a CRC32C of their UTF-8 bytes; if the
 * name holds a hash tag, a non-empty {@code {...}} (the first {@code '{'} and the first {@code '}'}
 * after it), only the tag is hashed, as on Redis Cluster. So {@code {acct-42}:balance} and the
 * idempotency key {@code (payments, {acct-42}:req-7)} share a partition, and one command may touch
 * both. An idempotency key without a tag hashes its scope and key together.
 *
 * <p>A partition belongs to one data group. At map epoch 1, the map a cluster is bootstrapped with,
 * partition {@code p} of a cluster of {@code G} data groups belongs to group {@code 1 + p % G}.
 * Group 0 is the metadata group of a cluster of several groups; a cluster of one group has no
 * metadata group, and its group 1 holds every partition.
 *
 * <p>Stateless and thread-safe.
 */
public final class Partitions {
  /** The number of partitions, fixed for every cluster. */
  public static final int COUNT = 64;

  /** The epoch of the map a cluster is bootstrapped with. */
  public static final long FIRST_EPOCH = 1;

  /** The most data groups a cluster may have: one partition each. */
  public static final int MAX_GROUPS = COUNT;

  private Partitions() {}

  /** The partition of KV key or lease name {@code name}. */
  public static int of(String name) {
    return hash(tagOf(name));
  }

  /** The partition of the idempotency key {@code key} in {@code scope}. */
  public static int ofKey(String scope, String key) {
    String tag = tag(key);
    return hash(tag != null ? tag : scope + '\0' + key);
  }

  /**
   * The data group of {@code partition} at {@link #FIRST_EPOCH} in a cluster of {@code groups} data
   * groups: 1 to {@code groups}.
   *
   * @throws IllegalArgumentException if {@code groups} is out of [1, {@link #MAX_GROUPS}]
   */
  public static int groupOf(int partition, int groups) {
    if (groups < 1 || groups > MAX_GROUPS) {
      throw new IllegalArgumentException(
          "a cluster has 1 to " + MAX_GROUPS + " data groups, got " + groups);
    }
    return 1 + Math.floorMod(partition, COUNT) % groups;
  }

  /** The map at {@link #FIRST_EPOCH} of a cluster of {@code groups} data groups. */
  public static PartitionMap firstMap(int groups) {
    PartitionMap.Builder m = PartitionMap.newBuilder().setEpoch(FIRST_EPOCH).setGroupCount(groups);
    for (int p = 0; p < COUNT; p++) {
      m.addGroups(groupOf(p, groups));
    }
    return m.build();
  }

  /**
   * The partition an operation is routed by: its KV key, lease name, or idempotency key. Every
   * other name it touches must be in the same group ({@link #strayName}).
   *
   * @return the partition, or -1 for an operation without a name (malformed)
   */
  public static int primary(Operation op) {
    return switch (op.getOpCase()) {
      case PUT -> of(op.getPut().getKey());
      case DELETE -> of(op.getDelete().getKey());
      case COMPARE_AND_SET -> of(op.getCompareAndSet().getKey());
      case INCREMENT -> of(op.getIncrement().getKey());
      case APPEND -> of(op.getAppend().getKey());
      case GRANT_LEASE -> of(op.getGrantLease().getName());
      case KEEP_ALIVE_LEASE -> of(op.getKeepAliveLease().getName());
      case REVOKE_LEASE -> of(op.getRevokeLease().getName());
      case ACQUIRE_KEY -> ofKey(op.getAcquireKey().getScope(), op.getAcquireKey().getKey());
      case COMPLETE_KEY -> ofKey(op.getCompleteKey().getScope(), op.getCompleteKey().getKey());
      case RELEASE_KEY -> ofKey(op.getReleaseKey().getScope(), op.getReleaseKey().getKey());
      case RENEW_KEY -> ofKey(op.getRenewKey().getScope(), op.getRenewKey().getKey());
      case CLAIM_CURSOR -> of(op.getClaimCursor().getKey());
      case COMMIT_CURSOR -> of(op.getCommitCursor().getKey());
      case OP_NOT_SET -> -1;
    };
  }

  /**
   * The first name {@code op} touches besides its primary one that falls in another group than the
   * primary under {@code map}, or null if every name is in the primary's group: a fence, a write's
   * lease, a completion's effect, a cursor step's effect and key completion.
   */
  public static String strayName(Operation op, PartitionMap map) {
    int home = groupIn(map, primary(op));
    return stray(op, map, home);
  }

  /** The group of {@code partition} under {@code map}; -1 for a partition out of range. */
  public static int groupIn(PartitionMap map, int partition) {
    return partition < 0 || partition >= map.getGroupsCount() ? -1 : map.getGroups(partition);
  }

  private static String stray(Operation op, PartitionMap map, int group) {
    switch (op.getOpCase()) {
      case PUT:
        {
          Put p = op.getPut();
          if (!p.getLease().isEmpty() && groupIn(map, of(p.getLease())) != group) {
            return "lease " + p.getLease();
          }
          return p.hasFence() ? strayFence(p.getFence(), map, group) : null;
        }
      case DELETE:
        return op.getDelete().hasFence() ? strayFence(op.getDelete().getFence(), map, group) : null;
      case COMPARE_AND_SET:
        return op.getCompareAndSet().hasFence()
            ? strayFence(op.getCompareAndSet().getFence(), map, group)
            : null;
      case INCREMENT:
        return op.getIncrement().hasFence()
            ? strayFence(op.getIncrement().getFence(), map, group)
            : null;
      case APPEND:
        return op.getAppend().hasFence() ? strayFence(op.getAppend().getFence(), map, group) : null;
      case COMPLETE_KEY:
        return op.getCompleteKey().hasEffect()
            ? strayWrite(op.getCompleteKey().getEffect(), map, group)
            : null;
      case COMMIT_CURSOR:
        for (CursorStep s : op.getCommitCursor().getStepsList()) {
          if (s.hasEffect()) {
            String w = strayWrite(s.getEffect(), map, group);
            if (w != null) {
              return w;
            }
          }
          if (s.hasComplete()) {
            CompleteKey c = s.getComplete();
            if (groupIn(map, ofKey(c.getScope(), c.getKey())) != group) {
              return "idempotency key (" + c.getScope() + ", " + c.getKey() + ")";
            }
          }
        }
        return null;
      default:
        return null;
    }
  }

  private static String strayWrite(Operation w, PartitionMap map, int group) {
    if (w.getOpCase() == Operation.OpCase.OP_NOT_SET) {
      return null;
    }
    if (groupIn(map, primary(w)) != group) {
      return "key " + nameOf(w);
    }
    return stray(w, map, group);
  }

  private static String strayFence(Fence f, PartitionMap map, int group) {
    return groupIn(map, ofKey(f.getScope(), f.getKey())) == group
        ? null
        : "fence (" + f.getScope() + ", " + f.getKey() + ")";
  }

  private static String nameOf(Operation w) {
    return switch (w.getOpCase()) {
      case PUT -> w.getPut().getKey();
      case DELETE -> w.getDelete().getKey();
      case COMPARE_AND_SET -> w.getCompareAndSet().getKey();
      case INCREMENT -> w.getIncrement().getKey();
      case APPEND -> w.getAppend().getKey();
      default -> w.getOpCase().name();
    };
  }

  /** The hash tag of {@code name}: the text of its first non-empty {...}, or null. */
  static String tag(String name) {
    int open = name.indexOf('{');
    if (open < 0) {
      return null;
    }
    int close = name.indexOf('}', open + 1);
    return close <= open + 1 ? null : name.substring(open + 1, close);
  }

  private static String tagOf(String name) {
    String t = tag(name);
    return t == null ? name : t;
  }

  private static int hash(String s) {
    CRC32C crc = new CRC32C();
    crc.update(s.getBytes(StandardCharsets.UTF_8));
    return (int) (crc.getValue() % COUNT);
  }
}
