package io.idem.keys;

import io.idem.core.KeyTable;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.KeyStore;
import io.idem.keys.spi.Settlement;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * A store in this JVM over idem-core's real {@link KeyTable} (the state machine the Idem store
 * replicates), with its own clock and a token counter standing in for log positions. It can be told
 * to fail, as a store that lost its connection does. For the executor's tests.
 */
final class CoreKeyStore implements KeyStore<Runnable> {
  private final KeyTable table = new KeyTable(KeyTable.Bounds.DEFAULTS);
  private final LongSupplier clockMs;
  private final AtomicLong tokens = new AtomicLong();
  final AtomicBoolean failing = new AtomicBoolean();

  CoreKeyStore(LongSupplier clockMs) {
    this.clockMs = clockMs;
  }

  private static KeyTable.KeyId id(IdempotencyKey k) {
    return new KeyTable.KeyId(k.scope(), k.key());
  }

  private <T> CompletionStage<T> call(IdempotencyKey key, Supplier<T> op) {
    if (failing.get()) {
      return CompletableFuture.failedFuture(
          new KeyStoreException(key, "connection to the store lost", null));
    }
    synchronized (table) {
      try {
        return CompletableFuture.completedFuture(op.get());
      } catch (IllegalArgumentException e) {
        return CompletableFuture.failedFuture(e); // a bound: the stage fails, as a remote store's
      }
    }
  }

  @Override
  public CompletionStage<Acquisition> acquire(
      IdempotencyKey key, Fingerprint fp, Duration inProgressTimeout, Duration retention) {
    return call(
        key,
        () -> {
          KeyTable.Acquisition a =
              table.acquire(
                  id(key),
                  fp.bytes(),
                  inProgressTimeout.toMillis(),
                  retention.toMillis(),
                  tokens.incrementAndGet(),
                  clockMs.getAsLong());
          if (a instanceof KeyTable.Acquisition.Acquired x) {
            return new Acquisition.Acquired(x.token(), x.deadline());
          } else if (a instanceof KeyTable.Acquisition.Completed c) {
            return new Acquisition.Completed(c.response());
          } else if (a instanceof KeyTable.Acquisition.InProgress p) {
            return new Acquisition.InProgress(p.deadline());
          } else if (a instanceof KeyTable.Acquisition.Mismatch) {
            return new Acquisition.Mismatch();
          }
          throw new IllegalArgumentException(((KeyTable.Acquisition.Invalid) a).reason());
        });
  }

  private Settlement settlement(IdempotencyKey key, KeyTable.Settlement s) {
    if (s instanceof KeyTable.Settlement.Done d) {
      return new Settlement.Done(d.deadline());
    } else if (s instanceof KeyTable.Settlement.Fenced f) {
      return table
          .view(id(key), clockMs.getAsLong())
          .filter(KeyTable.View::completed)
          .<Settlement>map(v -> new Settlement.Completed(v.response()))
          .orElse(new Settlement.Fenced(f.current()));
    }
    throw new IllegalArgumentException(((KeyTable.Settlement.Invalid) s).reason());
  }

  @Override
  public CompletionStage<Settlement> complete(IdempotencyKey key, long token, byte[] response) {
    return call(
        key, () -> settlement(key, table.complete(id(key), token, response, clockMs.getAsLong())));
  }

  /**
   * Applies an effect, a {@link Runnable} (it must throw before changing anything if it refuses),
   * and the completion under one lock, only while {@code token} owns the key: both or neither.
   */
  @Override
  public CompletionStage<Settlement> completeWith(
      IdempotencyKey key, long token, byte[] response, Runnable write) {
    if (write == null) {
      return complete(key, token, response);
    }
    if (failing.get()) {
      return CompletableFuture.failedFuture(
          new KeyStoreException(key, "connection to the store lost", null));
    }
    synchronized (table) {
      if (!table.isOwner(id(key), token)) {
        return CompletableFuture.completedFuture(
            settlement(key, new KeyTable.Settlement.Fenced(table.currentToken(id(key)))));
      }
      try {
        write.run();
      } catch (RuntimeException refused) {
        return CompletableFuture.failedFuture(refused);
      }
      return CompletableFuture.completedFuture(
          settlement(key, table.complete(id(key), token, response, clockMs.getAsLong())));
    }
  }

  @Override
  public Class<?> effectType() {
    return Runnable.class;
  }

  @Override
  public CompletionStage<Settlement> release(IdempotencyKey key, long token) {
    return call(key, () -> settlement(key, table.release(id(key), token, clockMs.getAsLong())));
  }

  @Override
  public CompletionStage<Settlement> renew(IdempotencyKey key, long token, Duration extension) {
    return call(
        key,
        () ->
            settlement(
                key, table.renew(id(key), token, extension.toMillis(), clockMs.getAsLong())));
  }

  long currentToken(IdempotencyKey key) {
    synchronized (table) {
      return table.currentToken(id(key));
    }
  }
}
