package io.idem.keys.idem;

import io.idem.client.CasMismatchException;
import io.idem.client.IdemClient;
import io.idem.client.IdemException;
import io.idem.client.InvalidArgumentException;
import io.idem.client.KeyAcquisition;
import io.idem.client.KeyRecord;
import io.idem.client.KeySettlement;
import io.idem.client.LeaseNotFoundException;
import io.idem.client.NoSpaceException;
import io.idem.client.QuotaExceededException;
import io.idem.client.Write;
import io.idem.client.WrongTypeException;
import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.KeyStoreException;
import io.idem.keys.KeyStoreFullException;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.KeyStore;
import io.idem.keys.spi.Settlement;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * The key store on an Idem cluster. Each operation is a command in the replicated log, sent through
 * the client's session, so it is applied exactly once: an acquire whose answer was lost and is
 * resent gets the same token, and no phantom owner is left behind. Deadlines and retention run on
 * log time, the fencing token is the acquire's log position (it only grows, across failovers and
 * restarts), and records live in the state machine's snapshots.
 *
 * <p>Beyond the {@link KeyStore} contract, {@link #complete(IdempotencyKey, long, byte[], Write)}
 * applies the business step's write in the same step as the completion, and {@link
 * IdemClient#fenced} guards other writes with the token.
 *
 * <p>Errors: an {@link InvalidArgumentException} (a part out of the cluster's bounds) fails the
 * stage with {@link IllegalArgumentException}; a refusal for the principal's quota or the cluster's
 * backend budget ({@link QuotaExceededException}, {@link NoSpaceException}) with {@link
 * KeyStoreFullException}; every other client failure (not sent, outcome unknown, session lost) with
 * {@link KeyStoreException}, never with a yes. Thread-safe; it does not block: stages complete on
 * the client's worker pool.
 */
public final class IdemKeyStore implements KeyStore<Write> {
  private final IdemClient client;

  private IdemKeyStore(IdemClient client) {
    this.client = client;
  }

  /** A store over {@code client}'s session (the caller keeps and closes the client). */
  public static IdemKeyStore over(IdemClient client) {
    if (client == null) {
      throw new IllegalArgumentException("client must not be null");
    }
    return new IdemKeyStore(client);
  }

  @Override
  public CompletionStage<Acquisition> acquire(
      IdempotencyKey key, Fingerprint fingerprint, Duration inProgressTimeout, Duration retention) {
    return call(
            key,
            () ->
                client.acquireKeyAsync(
                    key.scope(), key.key(), fingerprint.bytes(), inProgressTimeout, retention))
        .thenApply(IdemKeyStore::acquisition);
  }

  @Override
  public CompletionStage<Settlement> complete(IdempotencyKey key, long token, byte[] response) {
    return complete(key, token, response, null);
  }

  /**
   * Completes the key and applies {@code effect} (may be null) in the same log command: both or
   * neither. A failing effect fails the stage with the client's {@link CasMismatchException},
   * {@link WrongTypeException} or {@link LeaseNotFoundException} and leaves the key owned.
   */
  public CompletionStage<Settlement> complete(
      IdempotencyKey key, long token, byte[] response, @Nullable Write effect) {
    return call(key, () -> client.completeKeyAsync(key.scope(), key.key(), token, response, effect))
        .thenCompose(s -> settlement(key, s));
  }

  /**
   * The {@link KeyStore#completeWith} of this store: as {@link #complete(IdempotencyKey, long,
   * byte[], Write)}.
   */
  @Override
  public CompletionStage<Settlement> completeWith(
      IdempotencyKey key, long token, byte[] response, Write effect) {
    return complete(key, token, response, effect);
  }

  @Override
  public Class<?> effectType() {
    return Write.class;
  }

  @Override
  public CompletionStage<Settlement> release(IdempotencyKey key, long token) {
    return call(key, () -> client.releaseKeyAsync(key.scope(), key.key(), token))
        .thenCompose(s -> settlement(key, s));
  }

  @Override
  public CompletionStage<Settlement> renew(IdempotencyKey key, long token, Duration extension) {
    return call(key, () -> client.renewKeyAsync(key.scope(), key.key(), token, extension))
        .thenCompose(s -> settlement(key, s));
  }

  /**
   * Runs the client call, translating its failures (thrown at once, or completing the future) into
   * the store contract's.
   */
  private static <T> CompletableFuture<T> call(
      IdempotencyKey key, Supplier<CompletableFuture<T>> op) {
    CompletableFuture<T> f;
    try {
      f = op.get();
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(translate(key, e));
    }
    // Of the client's kind: a wait on it sends what the client holds back, as a wait on f would.
    CompletableFuture<T> out = f.newIncompleteFuture();
    f.whenComplete(
        (v, e) -> {
          if (e == null) {
            out.complete(v);
          } else {
            out.completeExceptionally(translate(key, e));
          }
        });
    return out;
  }

  private static Throwable translate(IdempotencyKey key, Throwable e) {
    Throwable t = e;
    while (t instanceof CompletionException && t.getCause() != null) {
      t = t.getCause();
    }
    if (t instanceof InvalidArgumentException) {
      return new IllegalArgumentException(t.getMessage(), t);
    }
    if (t instanceof QuotaExceededException || t instanceof NoSpaceException) {
      return new KeyStoreFullException(
          key,
          "the Idem cluster refused the key: " + t.getMessage(),
          t instanceof QuotaExceededException,
          t);
    }
    if (t instanceof CasMismatchException
        || t instanceof WrongTypeException
        || t instanceof LeaseNotFoundException) {
      return t; // a definite refusal of a completion's effect: the key is still the caller's
    }
    if (t instanceof IdemException) {
      return new KeyStoreException(key, "the Idem cluster did not settle it: " + t.getMessage(), t);
    }
    return new KeyStoreException(key, "unexpected failure: " + t, t);
  }

  private static Acquisition acquisition(KeyAcquisition a) {
    if (a instanceof KeyAcquisition.Acquired x) {
      return new Acquisition.Acquired(x.token(), x.deadlineMs());
    }
    if (a instanceof KeyAcquisition.Completed c) {
      return new Acquisition.Completed(c.response());
    }
    if (a instanceof KeyAcquisition.InProgress p) {
      return new Acquisition.InProgress(p.deadlineMs());
    }
    return new Acquisition.Mismatch();
  }

  /**
   * The store's answer. The cluster answers a token that no longer owns the key with the current
   * owner's token, 0 if none; for 0, a linearizable read (after the refusal in the log) tells a
   * completed key, whose outcome it answers, from a key that is gone. A completed record only goes
   * away at the end of its retention, so the read sees the state that refused.
   */
  private CompletionStage<Settlement> settlement(IdempotencyKey key, KeySettlement s) {
    if (s instanceof KeySettlement.Settled d) {
      return CompletableFuture.completedFuture(new Settlement.Done(d.deadlineMs()));
    }
    long current = ((KeySettlement.Fenced) s).currentToken();
    if (current != 0) {
      return CompletableFuture.completedFuture(new Settlement.Fenced(current));
    }
    return call(key, () -> client.getKeyAsync(key.scope(), key.key()))
        .thenApply(
            r ->
                r.filter(KeyRecord::completed)
                    .<Settlement>map(c -> new Settlement.Completed(c.response()))
                    .orElse(new Settlement.Fenced(0)));
  }
}
