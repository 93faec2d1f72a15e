package io.idem.client;

import com.google.protobuf.ByteString;
import io.idem.proto.AcquireKey;
import io.idem.proto.Append;
import io.idem.proto.CompareAndSet;
import io.idem.proto.CompleteKey;
import io.idem.proto.Delete;
import io.idem.proto.GrantLease;
import io.idem.proto.Increment;
import io.idem.proto.KeepAliveLease;
import io.idem.proto.Operation;
import io.idem.proto.Put;
import io.idem.proto.ReleaseKey;
import io.idem.proto.RenewKey;
import io.idem.proto.RevokeLease;
import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * The protocol operation each write of {@link IdemClient} sends, built from the call's arguments
 * after the cheap checks that need no cluster limits ({@link InvalidArgumentException} naming the
 * bad argument); the cluster's limits are checked when a call is numbered. A fence, where given,
 * goes into the data writes.
 */
final class Operations {

  private Operations() {}

  // ---- data ----

  static Operation put(
      String key, byte[] value, @Nullable String lease, io.idem.proto.@Nullable Fence fence) {
    checkKey(key);
    checkValue(value);
    Put.Builder p = Put.newBuilder().setKey(key).setValue(ByteString.copyFrom(value));
    if (fence != null) {
      p.setFence(fence);
    }
    if (lease != null) {
      checkName(lease);
      p.setLease(lease);
    }
    return Operation.newBuilder().setPut(p).build();
  }

  static Operation delete(String key, io.idem.proto.@Nullable Fence fence) {
    checkKey(key);
    Delete.Builder d = Delete.newBuilder().setKey(key);
    if (fence != null) {
      d.setFence(fence);
    }
    return Operation.newBuilder().setDelete(d).build();
  }

  static Operation compareAndSet(
      String key, long expectedVersion, byte[] value, io.idem.proto.@Nullable Fence fence) {
    checkKey(key);
    checkValue(value);
    if (expectedVersion < 0) {
      throw new InvalidArgumentException(
          "expected version must be 0 (absent) or positive, got " + expectedVersion, 0, 0);
    }
    CompareAndSet.Builder c =
        CompareAndSet.newBuilder()
            .setKey(key)
            .setExpectedVersion(expectedVersion)
            .setValue(ByteString.copyFrom(value));
    if (fence != null) {
      c.setFence(fence);
    }
    return Operation.newBuilder().setCompareAndSet(c).build();
  }

  static Operation increment(String key, long delta, io.idem.proto.@Nullable Fence fence) {
    checkKey(key);
    Increment.Builder i = Increment.newBuilder().setKey(key).setDelta(delta);
    if (fence != null) {
      i.setFence(fence);
    }
    return Operation.newBuilder().setIncrement(i).build();
  }

  static Operation append(String key, byte[] value, io.idem.proto.@Nullable Fence fence) {
    checkKey(key);
    checkValue(value);
    Append.Builder a = Append.newBuilder().setKey(key).setValue(ByteString.copyFrom(value));
    if (fence != null) {
      a.setFence(fence);
    }
    return Operation.newBuilder().setAppend(a).build();
  }

  // ---- leases ----

  static Operation grantLease(String name, Duration ttl) {
    checkName(name);
    if (ttl == null || ttl.toMillis() < 1) {
      throw new InvalidArgumentException("lease TTL must be at least 1 ms, got " + ttl, 0, 0);
    }
    return Operation.newBuilder()
        .setGrantLease(GrantLease.newBuilder().setName(name).setTtlMs(ttl.toMillis()))
        .build();
  }

  static Operation keepAliveLease(String name) {
    checkName(name);
    return Operation.newBuilder()
        .setKeepAliveLease(KeepAliveLease.newBuilder().setName(name))
        .build();
  }

  static Operation revokeLease(String name) {
    checkName(name);
    return Operation.newBuilder().setRevokeLease(RevokeLease.newBuilder().setName(name)).build();
  }

  // ---- application idempotency keys ----

  static Operation acquireKey(
      String scope, String key, byte[] fingerprint, Duration inProgress, Duration retention) {
    checkKeyId(scope, key);
    if (fingerprint == null) {
      throw new InvalidArgumentException("fingerprint must not be null (empty: none)", 0, 0);
    }
    positiveMillis("in-progress timeout", inProgress);
    positiveMillis("retention", retention);
    return Operation.newBuilder()
        .setAcquireKey(
            AcquireKey.newBuilder()
                .setScope(scope)
                .setKey(key)
                .setFingerprint(ByteString.copyFrom(fingerprint))
                .setInProgressMs(inProgress.toMillis())
                .setRetentionMs(retention.toMillis()))
        .build();
  }

  /** A completion of the key {@code token} owns; {@code effect} (null: none) lands with it. */
  static Operation completeKey(
      String scope, String key, long token, byte[] response, @Nullable Write effect) {
    checkKeyId(scope, key);
    if (response == null) {
      throw new InvalidArgumentException("response must not be null", 0, 0);
    }
    CompleteKey.Builder c =
        CompleteKey.newBuilder()
            .setScope(scope)
            .setKey(key)
            .setToken(token)
            .setResponse(ByteString.copyFrom(response));
    if (effect != null) {
      c.setEffect(effect(effect));
    }
    return Operation.newBuilder().setCompleteKey(c).build();
  }

  static Operation releaseKey(String scope, String key, long token) {
    checkKeyId(scope, key);
    return Operation.newBuilder()
        .setReleaseKey(ReleaseKey.newBuilder().setScope(scope).setKey(key).setToken(token))
        .build();
  }

  static Operation renewKey(String scope, String key, long token, Duration extension) {
    checkKeyId(scope, key);
    positiveMillis("extension", extension);
    return Operation.newBuilder()
        .setRenewKey(
            RenewKey.newBuilder()
                .setScope(scope)
                .setKey(key)
                .setToken(token)
                .setExtensionMs(extension.toMillis()))
        .build();
  }

  static Operation claimCursor(String key) {
    checkKey(key);
    return Operation.newBuilder()
        .setClaimCursor(io.idem.proto.ClaimCursor.newBuilder().setKey(key))
        .build();
  }

  /** A commit of {@code steps} to the cursor at {@code key} under the claim {@code epoch}. */
  static Operation commitCursor(String key, long epoch, java.util.List<CursorStep> steps) {
    checkKey(key);
    if (steps == null || steps.isEmpty()) {
      throw new InvalidArgumentException("a cursor commit needs at least one step", 0, 0);
    }
    io.idem.proto.CommitCursor.Builder c =
        io.idem.proto.CommitCursor.newBuilder().setKey(key).setEpoch(epoch);
    long last = 0;
    for (CursorStep s : steps) {
      if (s.position() <= last) {
        throw new InvalidArgumentException(
            "cursor steps' positions must increase: " + s.position() + " after " + last, 0, 0);
      }
      last = s.position();
      io.idem.proto.CursorStep.Builder b =
          io.idem.proto.CursorStep.newBuilder().setPosition(s.position());
      if (s.effect() != null) {
        b.setEffect(effect(s.effect()));
      }
      CursorStep.Completion k = s.completion();
      if (k != null) {
        checkKeyId(k.scope(), k.key());
        b.setComplete(
            CompleteKey.newBuilder()
                .setScope(k.scope())
                .setKey(k.key())
                .setToken(k.token())
                .setResponse(ByteString.copyFrom(k.response())));
      }
      c.addSteps(b);
    }
    return Operation.newBuilder().setCommitCursor(c).build();
  }

  /** A completion's effect: the write {@code w}, unfenced (the completion is its fence). */
  private static Operation effect(Write w) {
    Operation.Builder o = Operation.newBuilder();
    if (w instanceof Write.Put p) {
      checkKey(p.key());
      o.setPut(Put.newBuilder().setKey(p.key()).setValue(ByteString.copyFrom(p.value())));
    } else if (w instanceof Write.Delete d) {
      checkKey(d.key());
      o.setDelete(Delete.newBuilder().setKey(d.key()));
    } else if (w instanceof Write.CompareAndSet c) {
      checkKey(c.key());
      o.setCompareAndSet(
          CompareAndSet.newBuilder()
              .setKey(c.key())
              .setExpectedVersion(c.expectedVersion())
              .setValue(ByteString.copyFrom(c.value())));
    } else if (w instanceof Write.Increment i) {
      checkKey(i.key());
      o.setIncrement(Increment.newBuilder().setKey(i.key()).setDelta(i.delta()));
    } else if (w instanceof Write.Append a) {
      checkKey(a.key());
      o.setAppend(Append.newBuilder().setKey(a.key()).setValue(ByteString.copyFrom(a.value())));
    }
    return o.build();
  }

  // ---- what an operation names, for a recovered call ----

  /** The key (or lease name) {@code op} names. */
  static String keyOf(Operation op) {
    return switch (op.getOpCase()) {
      case PUT -> op.getPut().getKey();
      case DELETE -> op.getDelete().getKey();
      case COMPARE_AND_SET -> op.getCompareAndSet().getKey();
      case INCREMENT -> op.getIncrement().getKey();
      case APPEND -> op.getAppend().getKey();
      case GRANT_LEASE -> op.getGrantLease().getName();
      case KEEP_ALIVE_LEASE -> op.getKeepAliveLease().getName();
      case REVOKE_LEASE -> op.getRevokeLease().getName();
      case ACQUIRE_KEY -> op.getAcquireKey().getKey();
      case COMPLETE_KEY -> op.getCompleteKey().getKey();
      case RELEASE_KEY -> op.getReleaseKey().getKey();
      case RENEW_KEY -> op.getRenewKey().getKey();
      case CLAIM_CURSOR -> op.getClaimCursor().getKey();
      case COMMIT_CURSOR -> op.getCommitCursor().getKey();
      case OP_NOT_SET -> "";
    };
  }

  /** The bytes {@code op} writes or appends; empty for other operations. */
  static byte[] valueOf(Operation op) {
    return switch (op.getOpCase()) {
      case PUT -> op.getPut().getValue().toByteArray();
      case COMPARE_AND_SET -> op.getCompareAndSet().getValue().toByteArray();
      case APPEND -> op.getAppend().getValue().toByteArray();
      default -> new byte[0];
    };
  }

  // ---- checks ----

  static void checkKey(String key) {
    if (key == null || key.isEmpty()) {
      throw new InvalidArgumentException("key must not be empty", 0, 0);
    }
  }

  /** Checks a key id's parts as {@link Fence} and the key operations need them. */
  static void checkKeyId(String scope, String key) {
    if (scope == null || scope.length() > IdemClient.MAX_KEY_CHARS) {
      throw new InvalidArgumentException(
          "scope must have at most " + IdemClient.MAX_KEY_CHARS + " characters", 0, 0);
    }
    if (key == null || key.isEmpty() || key.length() > IdemClient.MAX_KEY_CHARS) {
      throw new InvalidArgumentException(
          "key must have 1 to " + IdemClient.MAX_KEY_CHARS + " characters", 0, 0);
    }
  }

  static void checkName(String name) {
    if (name == null || name.isEmpty()) {
      throw new InvalidArgumentException("lease name must not be empty", 0, 0);
    }
  }

  private static void checkValue(byte[] value) {
    if (value == null) {
      throw new InvalidArgumentException("value must not be null", 0, 0);
    }
  }

  private static void positiveMillis(String what, Duration d) {
    if (d == null || d.toMillis() < 1) {
      throw new InvalidArgumentException(what + " must be at least 1 ms, got " + d, 0, 0);
    }
  }
}
