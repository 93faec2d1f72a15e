package io.idem.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks a controller method (or every handler method of a controller) as idempotent under the
 * {@code Idempotency-Key} header: a retried request runs once, and every retry gets the first
 * response again with {@code Idempotent-Replayed: true} (as Powertools' {@code @Idempotent} does
 * for a Lambda handler). Each attribute left at its default follows the {@code idem.keys.*}
 * property of the same name. Only the methods in {@code idem.keys.methods} are covered (POST and
 * PATCH by default).
 *
 * <pre>{@code
 * @Idempotent(keyRequired = Setting.YES, waitForResult = "5s")
 * @PostMapping("/accounts/{account}/withdrawals")
 * Receipt withdraw(@IdempotencyKey String id, @PathVariable String account, @RequestBody Amount a)
 * }</pre>
 */
@Target({ElementType.METHOD, ElementType.TYPE})
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface Idempotent {

  /** Whether a request without a key gets 400. Default: {@code idem.keys.key-required}. */
  Setting keyRequired() default Setting.DEFAULT;

  /**
   * How long a duplicate of a request still in progress waits for its response ("5s", "500ms",
   * "PT5S"); "0" answers 409 at once. Default ({@code ""}): {@code idem.keys.wait-for-result}.
   */
  String waitForResult() default "";

  /**
   * Whether a 5xx response is stored and replayed rather than releasing the key. Default: {@code
   * idem.keys.store-server-errors}.
   */
  Setting storeServerErrors() default Setting.DEFAULT;

  /** A yes or no that can also defer to the configuration. */
  enum Setting {
    /** Follow the {@code idem.keys.*} property. */
    DEFAULT,
    /** Yes, for this endpoint. */
    YES,
    /** No, for this endpoint. */
    NO
  }
}
