package io.idem.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Binds a {@code String} parameter of an {@link Idempotent} handler method to the request's
 * idempotency key (the {@code Idempotency-Key} string, unquoted; null if the request has none), as
 * seed 001's {@code withdraw(id, account, amount)} takes its id. The name is Powertools'; here the
 * key comes from the header, so the annotation marks where it goes, not where it is read from. A
 * parameter of type {@link io.idem.http.IdempotentRequest} gets the key with its scope and fencing
 * token, and can hand the store a write to apply with the response.
 */
@Target(ElementType.PARAMETER)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface IdempotencyKey {}
