package io.idem.http;

import io.idem.keys.IdempotencyKey;
import jakarta.servlet.ServletRequest;
import java.util.Optional;
import org.jspecify.annotations.Nullable;

/**
 * What the filter tells the handler of a request that carries a key it now owns: the key (in its
 * caller's scope) and the fencing token. A handler whose store can apply a write together with the
 * key's completion ({@link io.idem.keys.spi.KeyStore#completeWith}) hands that write over with
 * {@link #completeWith}: then the write lands if and only if the response is stored, so that a
 * server that dies between the two can never make the step happen twice. Not thread-safe: it
 * belongs to one request.
 */
public final class IdempotentRequest {
  /** The request attribute that holds it. */
  public static final String ATTRIBUTE = IdempotentRequest.class.getName();

  private final IdempotencyKey key;
  private final long fencingToken;
  private final @Nullable Object transaction; // null unless the filter runs over TransactionalKeys
  private final @Nullable Class<?> effectType; // the store's; null in a transaction
  private @Nullable Object effect;

  IdempotentRequest(IdempotencyKey key, long fencingToken, Class<?> effectType) {
    this.key = key;
    this.fencingToken = fencingToken;
    this.transaction = null;
    this.effectType = effectType;
  }

  IdempotentRequest(IdempotencyKey key, long fencingToken, Object transaction) {
    this.key = key;
    this.fencingToken = fencingToken;
    this.transaction = transaction;
    this.effectType = null;
  }

  /** The request's, if the filter covers it and it carries a key. */
  public static Optional<IdempotentRequest> of(ServletRequest request) {
    return Optional.ofNullable((IdempotentRequest) request.getAttribute(ATTRIBUTE));
  }

  /** The key, with the caller's scope. */
  public IdempotencyKey key() {
    return key;
  }

  /**
   * The token of this request's ownership of the key: strictly greater than any earlier owner's.
   * Pass it to writes the store can fence (on Idem, {@code IdemClient.fenced}).
   */
  public long fencingToken() {
    return fencingToken;
  }

  /**
   * The transaction this request runs in, when the filter runs over {@link TransactionalKeys} (on
   * PostgreSQL, the {@code java.sql.Connection}): writes through it commit with the stored response
   * or not at all. Empty on the other stores.
   *
   * @throws ClassCastException if the transaction is not a {@code type}
   */
  public <T> Optional<T> transaction(Class<T> type) {
    return Optional.ofNullable(transaction).map(type::cast);
  }

  /**
   * The business write for the store to apply in the same atomic step as storing this response (on
   * Idem, an {@code io.idem.client.Write}). Applied only if the response is stored (not for a 5xx
   * that releases the key). If the store refuses it, nothing is applied, the key is released and
   * the client gets a 409 problem ({@code effect-refused}) instead of the handler's response.
   *
   * @throws IllegalStateException if an effect was already given, or the request runs in a
   *     transaction (write through {@link #transaction} instead)
   * @throws IllegalArgumentException if {@code effect} is null or not of the store's {@link
   *     #effectType()}: thrown here, at the handler's call, before the handler goes on
   */
  public void completeWith(Object effect) {
    if (effect == null) {
      throw new IllegalArgumentException("effect must not be null");
    }
    if (transaction != null || effectType == null) { // effectType is null only in a transaction
      throw new IllegalStateException(
          "this request runs in the store's transaction: write through transaction(...)");
    }
    if (!effectType.isInstance(effect)) {
      throw new IllegalArgumentException(
          "the key store applies effects of type "
              + effectType.getName()
              + " with a completion, not "
              + effect.getClass().getName());
    }
    if (this.effect != null) {
      throw new IllegalStateException("this request already has an effect: " + this.effect);
    }
    this.effect = effect;
  }

  /**
   * The type of effect the filter's store applies with a completion ({@code io.idem.client.Write}
   * on Idem, {@code io.idem.keys.redis.RedisEffect} on Redis, {@code NoEffect} for none); empty in
   * a transaction.
   */
  public Optional<Class<?>> effectType() {
    return Optional.ofNullable(effectType);
  }

  @Nullable Object effect() {
    return effect;
  }
}
