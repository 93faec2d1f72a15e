package io.idem.http;

import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import org.jspecify.annotations.Nullable;

/**
 * An RFC 9457 problem: {@code application/problem+json} with {@code type}, {@code title}, {@code
 * status}, {@code detail} and {@code instance} (the request's path). The type is the URI of the
 * problem's documentation ({@link ProblemTypes}), one per case of {@link ProblemType}, so that a
 * client can tell a key in progress from any other 409.
 *
 * @param kind which problem
 * @param status the HTTP status
 * @param title a short, fixed summary of the type
 * @param detail what happened to this request
 */
record Problem(ProblemType kind, int status, String title, String detail) {

  /** The media type of every error this filter answers. */
  static final String MEDIA_TYPE = "application/problem+json";

  /** A problem of the filter's own, with its type's status and title. */
  Problem(ProblemType kind, String detail) {
    this(kind, kind.status(), kind.title(), detail);
  }

  /** A handler's {@code sendError(status, message)}: its status and reason phrase. */
  static Problem fromHandler(int status, @Nullable String message) {
    String reason = Statuses.reason(status);
    return new Problem(
        ProblemType.HANDLER_ERROR, status, reason, message == null ? reason : message);
  }

  /** The JSON body, with {@code type} and {@code instance} as given. */
  byte[] json(String type, String instance) {
    StringBuilder b = new StringBuilder(200);
    b.append("{\"type\":");
    quote(b, type);
    b.append(",\"title\":");
    quote(b, title);
    b.append(",\"status\":").append(status);
    b.append(",\"detail\":");
    quote(b, detail);
    b.append(",\"instance\":");
    quote(b, instance);
    return b.append('}').toString().getBytes(StandardCharsets.UTF_8);
  }

  /**
   * Writes this problem as the whole response (which must not be committed), replacing whatever a
   * handler had set on it, with {@code Retry-After: retryAfterSeconds} unless it is 0.
   */
  void send(HttpServletResponse response, String type, String instance, long retryAfterSeconds)
      throws IOException {
    byte[] body = json(type, instance);
    response.reset();
    response.setStatus(status);
    if (retryAfterSeconds > 0) {
      response.setHeader("Retry-After", Long.toString(retryAfterSeconds));
    }
    response.setContentType(MEDIA_TYPE);
    response.setContentLength(body.length);
    response.getOutputStream().write(body);
  }

  private static void quote(StringBuilder b, String s) {
    b.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> b.append("\\\"");
        case '\\' -> b.append("\\\\");
        case '\n' -> b.append("\\n");
        case '\r' -> b.append("\\r");
        case '\t' -> b.append("\\t");
        default -> {
          if (c < 0x20) {
            b.append(String.format("\\u%04x", (int) c));
          } else {
            b.append(c);
          }
        }
      }
    }
    b.append('"');
  }
}
