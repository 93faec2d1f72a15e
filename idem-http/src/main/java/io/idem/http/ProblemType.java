package io.idem.http;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import org.jspecify.annotations.Nullable;

/**
 * The problems the filter answers: the one list of their names. Each name is the last segment of
 * its type URI ({@link ProblemTypes}) and has a page of documentation, the resource {@code
 * problems/<name>.html} beside this class (an HTML fragment: what happened, what the client should
 * do), which the filter serves unless the types point at the operator's own pages.
 */
enum ProblemType {
  KEY_MISSING("key-missing", 400, "Idempotency-Key missing", false),
  KEY_MALFORMED("key-malformed", 400, "Idempotency-Key malformed", false),
  SCOPE_MISSING("scope-missing", 400, "No caller to scope the key to", false),
  CHARSET_UNSUPPORTED("charset-unsupported", 415, "Request charset not supported", false),
  BODY_TOO_LARGE("body-too-large", 413, "Request body too large", false),
  KEY_REUSED("key-reused", 422, "Idempotency-Key reused", false),
  KEY_IN_PROGRESS("key-in-progress", 409, "Request in progress", true),
  KEY_TAKEN_OVER("key-taken-over", 409, "Request taken over", false),
  EFFECT_REFUSED("effect-refused", 409, "Request not applied", false),
  STORE_UNAVAILABLE("store-unavailable", 503, "Idempotency store unavailable", true),
  KEY_QUOTA_EXCEEDED("key-quota-exceeded", 429, "Idempotency key quota exceeded", false),
  STORE_FULL("store-full", 507, "Idempotency store full", false),
  RESPONSE_NOT_STORED("response-not-stored", 409, "Response not stored", false),
  /**
   * A handler's {@code sendError(status, message)}, written as a problem so that it is stored and
   * replayed like any response: the status is the handler's, the title its reason phrase.
   */
  HANDLER_ERROR("handler-error", 0, "Error from the endpoint", false);

  private final String id;
  private final int status;
  private final String title;
  private final boolean retryLater;

  ProblemType(String id, int status, String title, boolean retryLater) {
    this.id = id;
    this.status = status;
    this.title = title;
    this.retryLater = retryLater;
  }

  /** The name: the type URI's last segment, and the documentation page's. */
  String id() {
    return id;
  }

  /** The HTTP status; 0 for {@link #HANDLER_ERROR}, whose status is the handler's. */
  int status() {
    return status;
  }

  /** A short, fixed summary: the problem's {@code title} (but see {@link #HANDLER_ERROR}). */
  String title() {
    return title;
  }

  /** Whether the answer says {@code Retry-After}: the same request may succeed later. */
  boolean retryLater() {
    return retryLater;
  }

  /** The type whose name is {@code id}, or null. */
  static @Nullable ProblemType named(String id) {
    for (ProblemType t : values()) {
      if (t.id.equals(id)) {
        return t;
      }
    }
    return null;
  }

  /**
   * This problem's documentation, an HTML fragment; null if the resource is missing (a packaging
   * error that {@code ProblemDocumentationTest} catches).
   */
  @Nullable String documentation() {
    try (InputStream in = ProblemType.class.getResourceAsStream("problems/" + id + ".html")) {
      return in == null ? null : new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read the documentation of " + id, e);
    }
  }
}
