package io.idem.server;

import io.idem.core.KeyTable;
import io.idem.proto.Code;
import io.idem.proto.CompleteKey;
import io.idem.proto.Fence;
import io.idem.proto.KeyOutcome;
import io.idem.proto.Operation;
import io.idem.proto.Result;

/**
 * Executes a session's new operations (admitted, permitted and within quota) on the KV, lease and
 * key domains, by the rules of the entry's log format version ({@link ReplicatedState}'s {@code
 * *_SINCE_VERSION} constants): which operations exist, how fences are judged, and whether a lease
 * has a holder. {@link ReplicatedState} decides whether an operation runs at all (admission,
 * permissions, quotas) and records its answer; this class only runs it.
 *
 * <p>Determinism: a function of its arguments (the entry's version and log time, the command's
 * position) and the domains' state; it reads no clock. Not thread-safe, like the state it belongs
 * to.
 */
final class Operations {
  private final KvState kv;
  private final LeaseState leases;
  private final KeyState keys;
  private final Cursors cursors;

  Operations(KvState kv, LeaseState leases, KeyState keys) {
    this.kv = kv;
    this.leases = leases;
    this.keys = keys;
    this.cursors = new Cursors(kv, keys);
  }

  /**
   * Executes one new operation, command {@code position} of entry {@code revision}, in an entry of
   * format {@code version} at log time {@code clock}; business failures are answers too, and are
   * saved as such. {@code payer} is null before format 7 (nothing is charged).
   */
  Result execute(
      int version,
      long clock,
      long revision,
      int position,
      long session,
      Operation op,
      Payer payer) {
    boolean keyed = version >= ReplicatedState.KEYS_SINCE_VERSION;
    if (keyed) {
      Result refused = fenceRefusal(version, clock, revision, op);
      if (refused != null) {
        return refused;
      }
    }
    switch (op.getOpCase()) {
      case PUT:
        return kv.put(revision, op.getPut(), payer);
      case DELETE:
        return kv.delete(revision, op.getDelete().getKey());
      case COMPARE_AND_SET:
        return kv.compareAndSet(revision, op.getCompareAndSet(), payer);
      case INCREMENT:
        return kv.increment(revision, op.getIncrement(), payer);
      case APPEND:
        return kv.append(revision, op.getAppend(), payer);
      case GRANT_LEASE:
        return leases.grant(revision, session, op.getGrantLease(), clock, payer);
      case KEEP_ALIVE_LEASE:
        return leases.keepAlive(
            revision, session, op.getKeepAliveLease().getName(), clock, leaseRules(version));
      case REVOKE_LEASE:
        {
          String name = op.getRevokeLease().getName();
          Result r = leases.revoke(revision, session, name, clock, leaseRules(version));
          if (r.getDone()) {
            kv.deleteLeased(name);
          }
          return r;
        }
      case ACQUIRE_KEY:
        if (!keyed) {
          break;
        }
        // The fencing token is the command's log position: greater than every one before it.
        return keys.acquire(
            revision,
            op.getAcquireKey(),
            revision * ReplicatedState.MAX_COMMANDS_PER_ENTRY + position,
            clock,
            version >= ReplicatedState.EXACT_FENCES_SINCE_VERSION
                ? KeyState.CAPACITY
                : KeyTable.Capacity.UNLIMITED,
            payer);
      case COMPLETE_KEY:
        if (!keyed) {
          break;
        }
        return complete(version, clock, revision, op.getCompleteKey(), payer);
      case RELEASE_KEY:
        if (!keyed) {
          break;
        }
        return keys.release(revision, op.getReleaseKey(), clock);
      case RENEW_KEY:
        if (!keyed) {
          break;
        }
        return keys.renew(revision, op.getRenewKey(), clock);
      case CLAIM_CURSOR:
        if (version < ReplicatedState.CURSORS_SINCE_VERSION) {
          break;
        }
        return cursors.claim(revision, op.getClaimCursor(), payer);
      case COMMIT_CURSOR:
        if (version < ReplicatedState.CURSORS_SINCE_VERSION) {
          break;
        }
        // A step's effect is charged like any write: it adds what the consumer's handler decided.
        return cursors.commit(revision, clock, op.getCommitCursor(), payer, this::effect);
      default:
        break;
    }
    // Also a key operation in an entry older than version 4: a version 3 node saw no operation.
    return Results.invalid(revision, "the request carries no operation");
  }

  /** The refusal of a write whose fence names a key with a newer owner, or null. */
  private Result fenceRefusal(int version, long clock, long revision, Operation op) {
    Fence f =
        switch (op.getOpCase()) {
          case PUT -> op.getPut().hasFence() ? op.getPut().getFence() : null;
          case COMPARE_AND_SET ->
              op.getCompareAndSet().hasFence() ? op.getCompareAndSet().getFence() : null;
          case INCREMENT -> op.getIncrement().hasFence() ? op.getIncrement().getFence() : null;
          case APPEND -> op.getAppend().hasFence() ? op.getAppend().getFence() : null;
          case DELETE ->
              op.getDelete().hasFence() && version >= ReplicatedState.EXACT_FENCES_SINCE_VERSION
                  ? op.getDelete().getFence()
                  : null;
          default -> null;
        };
    return f == null ? null : keys.fenceRefusal(revision, f, clock, fenceRules(version));
  }

  private static KeyState.FenceRules fenceRules(int version) {
    if (version >= ReplicatedState.FENCE_DEADLINES_SINCE_VERSION) {
      return KeyState.FenceRules.UNTIL_DEADLINE;
    }
    return version >= ReplicatedState.EXACT_FENCES_SINCE_VERSION
        ? KeyState.FenceRules.EXACT_TOKEN
        : KeyState.FenceRules.NO_NEWER_TOKEN;
  }

  /**
   * A complete, with its effect (since format 5) applied in the same step: nothing if the token
   * does not own the key or the response is too large; the effect's refusal, with the key still
   * owned, if the write fails; else both, answered {@code SETTLED} with the write's fields.
   */
  private Result complete(int version, long clock, long revision, CompleteKey c, Payer payer) {
    if (!c.hasEffect() || version < ReplicatedState.EXACT_FENCES_SINCE_VERSION) {
      return keys.complete(revision, c, clock);
    }
    if (c.getResponse().size() > keys.table().bounds().maxResponseBytes() || !keys.owns(c, clock)) {
      return keys.complete(revision, c, clock); // answers INVALID_ARGUMENT or KEY_FENCED
    }
    Operation e = c.getEffect();
    // A completion settles what was acquired, so neither quotas nor the budget refuse its effect;
    // what the effect writes is still charged to the principal.
    Result effect = effect(revision, e, payer == null ? null : payer.settling());
    if (effect.getCode() != Code.OK) {
      return effect;
    }
    Result done = keys.complete(revision, c, clock);
    if (done.getKeyOutcome() != KeyOutcome.SETTLED) {
      throw new IllegalStateException("a complete checked as owned was refused: " + done);
    }
    return effect.toBuilder().setKeyOutcome(KeyOutcome.SETTLED).build();
  }

  /**
   * Runs a write carried by another operation (a complete's effect, a cursor step's): a put,
   * delete, compare-and-set, increment or append, its fence ignored.
   */
  private Result effect(long revision, Operation e, Payer charged) {
    return switch (e.getOpCase()) {
      case PUT -> kv.put(revision, e.getPut(), charged);
      case DELETE -> kv.delete(revision, e.getDelete().getKey());
      case COMPARE_AND_SET -> kv.compareAndSet(revision, e.getCompareAndSet(), charged);
      case INCREMENT -> kv.increment(revision, e.getIncrement(), charged);
      case APPEND -> kv.append(revision, e.getAppend(), charged);
      default ->
          Results.invalid(
              revision,
              "an effect must be a put, delete, compare_and_set, increment or append, got "
                  + e.getOpCase());
    };
  }

  private static LeaseState.Rules leaseRules(int version) {
    return version >= ReplicatedState.LEASE_HOLDERS_SINCE_VERSION
        ? LeaseState.Rules.HELD
        : LeaseState.Rules.OWNERLESS;
  }
}
