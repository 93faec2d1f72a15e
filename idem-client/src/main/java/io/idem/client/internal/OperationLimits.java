package io.idem.client.internal;

import io.idem.proto.Limits;
import io.idem.proto.Operation;
import java.nio.charset.StandardCharsets;
import org.jspecify.annotations.Nullable;

/** Checks an operation against the cluster's limits, as the servers do. */
final class OperationLimits {
  private OperationLimits() {}

  /** Why {@code op} breaks {@code limits}, or null if it does not (or limits are unknown). */
  static @Nullable String problem(Operation op, @Nullable Limits limits) {
    if (limits == null) {
      return null;
    }
    return switch (op.getOpCase()) {
      case PUT ->
          first(
              key(op.getPut().getKey(), limits),
              value(op.getPut().getValue().size(), limits),
              op.getPut().getLease().isEmpty() ? null : name(op.getPut().getLease(), limits));
      case DELETE -> key(op.getDelete().getKey(), limits);
      case COMPARE_AND_SET ->
          first(
              key(op.getCompareAndSet().getKey(), limits),
              value(op.getCompareAndSet().getValue().size(), limits),
              null);
      case INCREMENT -> key(op.getIncrement().getKey(), limits);
      case APPEND ->
          first(
              key(op.getAppend().getKey(), limits),
              value(op.getAppend().getValue().size(), limits),
              null);
      case GRANT_LEASE -> {
        long ttl = op.getGrantLease().getTtlMs();
        String bad = name(op.getGrantLease().getName(), limits);
        if (bad == null && limits.getMaxLeaseTtlMs() > 0 && ttl > limits.getMaxLeaseTtlMs()) {
          bad = "lease TTL is " + ttl + " ms, the limit is " + limits.getMaxLeaseTtlMs() + " ms";
        }
        yield bad;
      }
      case KEEP_ALIVE_LEASE -> name(op.getKeepAliveLease().getName(), limits);
      case REVOKE_LEASE -> name(op.getRevokeLease().getName(), limits);
      case ACQUIRE_KEY, COMPLETE_KEY, RELEASE_KEY, RENEW_KEY -> null; // the server checks them
      case CLAIM_CURSOR -> key(op.getClaimCursor().getKey(), limits);
      case COMMIT_CURSOR -> key(op.getCommitCursor().getKey(), limits); // the server checks steps
      case OP_NOT_SET -> "no operation";
    };
  }

  private static @Nullable String first(
      @Nullable String a, @Nullable String b, @Nullable String c) {
    return a != null ? a : b != null ? b : c;
  }

  private static @Nullable String key(String key, Limits limits) {
    int max = limits.getMaxKeyBytes();
    if (max <= 0) {
      return null;
    }
    int n = key.getBytes(StandardCharsets.UTF_8).length;
    return n > max ? "key is " + n + " bytes, the limit is " + max : null;
  }

  private static @Nullable String value(int size, Limits limits) {
    int max = limits.getMaxValueBytes();
    return max > 0 && size > max ? "value is " + size + " bytes, the limit is " + max : null;
  }

  private static @Nullable String name(String name, Limits limits) {
    int max = limits.getMaxNameChars();
    return max > 0 && name.length() > max
        ? "lease name is " + name.length() + " characters, the limit is " + max
        : null;
  }
}
