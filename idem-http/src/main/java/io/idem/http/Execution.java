package io.idem.http;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.IdempotentExecutor;
import io.idem.keys.spi.KeyStore;
import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * How {@link IdempotencyFilter} runs a keyed request once and keeps its response: over any {@link
 * KeyStore} through an {@link IdempotentExecutor} ({@link OverStore}), or inside a transaction of
 * {@link TransactionalKeys} ({@link InTransaction}). The filter chooses one when it is built; what
 * it does before (key, scope, body, fingerprint) and after (replay, problems) is the same for both.
 *
 * <p>Thread-safe, as the filter is.
 */
sealed interface Execution extends AutoCloseable {

  /** The filter's part of a keyed request, which the execution runs at most once per key. */
  @FunctionalInterface
  interface Handler {
    /**
     * Runs the handler with {@code context} as the request's {@link IdempotentRequest}.
     *
     * @return the response to store and replay
     * @throws Exception what the handler threw, or the filter's signal that the response is not to
     *     be stored (the key is then released, or the transaction rolled back)
     */
    StoredResponse handle(IdempotentRequest context) throws Exception;
  }

  /**
   * Runs {@code handler} if this request owns {@code key}, and stores what it returns; or returns
   * the response stored for the key before, with {@link StoredResponse#replayed()} true.
   *
   * @param waitForResult how long a duplicate waits for a key still in progress (over a store; in a
   *     transaction a duplicate waits for the key's lock, the store's bound)
   * @throws Exception the key exceptions of {@code io.idem.keys} ({@link
   *     io.idem.keys.KeyMismatchException}, {@link io.idem.keys.KeyInProgressException}...), or
   *     what the handler threw
   */
  StoredResponse run(
      IdempotencyKey key, Fingerprint fingerprint, Duration waitForResult, Handler handler)
      throws Exception;

  /** Stops what the execution runs in the background (the executor's renewals); idempotent. */
  @Override
  void close();

  /**
   * Over a {@link KeyStore}: the executor acquires the key, renews it while the handler runs, and
   * completes it with the response and the handler's effect ({@link
   * IdempotentRequest#completeWith}).
   */
  final class OverStore implements Execution {
    private final IdempotentExecutor<Object> executor;
    private final Class<?> effectType;

    OverStore(
        KeyStore<?> store,
        Duration inProgressTimeout,
        Duration retention,
        @Nullable Duration storeTimeout) {
      // Effects reach the filter untyped (a request attribute); IdempotentRequest.completeWith
      // checks each against the store's effect type, which makes this view of the store sound.
      @SuppressWarnings("unchecked")
      KeyStore<Object> untyped = (KeyStore<Object>) store;
      IdempotentExecutor.Builder<Object> eb =
          IdempotentExecutor.builder(untyped)
              .inProgressTimeout(inProgressTimeout)
              .retention(retention);
      if (storeTimeout != null) {
        eb.storeTimeout(storeTimeout);
      }
      this.executor = eb.build();
      this.effectType = store.effectType();
    }

    @Override
    public StoredResponse run(
        IdempotencyKey key, Fingerprint fingerprint, Duration waitForResult, Handler handler)
        throws Exception {
      return executor.execute(
          key,
          fingerprint,
          waitForResult,
          StoredResponse.CODEC,
          token -> {
            IdempotentRequest context = new IdempotentRequest(key, token, effectType);
            StoredResponse stored = handler.handle(context);
            return new IdempotentExecutor.Outcome<>(stored, context.effect());
          });
    }

    @Override
    public void close() {
      executor.close();
    }
  }

  /**
   * Over {@link TransactionalKeys}: the handler runs inside the store's transaction, and its
   * response is stored in it; a response not to be stored rolls everything back.
   */
  final class InTransaction implements Execution {
    private final TransactionalKeys keys;

    InTransaction(TransactionalKeys keys) {
      this.keys = keys;
    }

    @Override
    public StoredResponse run(
        IdempotencyKey key, Fingerprint fingerprint, Duration waitForResult, Handler handler)
        throws Exception {
      StoredResponse[] toSend = new StoredResponse[1];
      byte[] stored =
          keys.run(
              key,
              fingerprint,
              (transaction, token) -> {
                toSend[0] = handler.handle(new IdempotentRequest(key, token, transaction));
                return toSend[0].encode();
              });
      // The step ran here and committed (the captured response goes out), or the bytes are the
      // outcome another request stored (a replay).
      return toSend[0] != null ? toSend[0] : StoredResponse.decode(stored);
    }

    @Override
    public void close() {}
  }
}
