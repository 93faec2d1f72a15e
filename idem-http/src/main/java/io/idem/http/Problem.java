package io.idem.http;

import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

/**
 * An RFC 9457 problem: {@code application/problem+json} with {@code type}, {@code title}, {@code
 * status}, {@code detail} and {@code instance} (the request's path). The types are tag URIs (RFC
 * 4151, as RFC 9457 section 3.1.1 suggests for types not meant to be dereferenced), one per case,
 * so that a client can tell a key in progress from any other 409; docs/HTTP.md lists them.
 *
 * @param status the HTTP status
 * @param name the type's last part: {@code tag:idem.io,2025:} + name
 * @param title a short, fixed summary of the type
 * @param detail what happened to this request
 */
record Problem(int status, String name, String title, String detail) {

  /** The media type of every error this filter answers. */
  static final String MEDIA_TYPE = "application/problem+json";

  /** What every type starts with. */
  static final String TYPE_PREFIX = "tag:idem.io,2025:";

  String type() {
    return TYPE_PREFIX + name;
  }

  /** The JSON body. */
  byte[] json(String instance) {
    StringBuilder b = new StringBuilder(160);
    b.append("{\"type\":");
    quote(b, type());
    b.append(",\"title\":");
    quote(b, title);
    b.append(",\"status\":").append(status);
    b.append(",\"detail\":");
    quote(b, detail);
    if (instance != null) {
      b.append(",\"instance\":");
      quote(b, instance);
    }
    return b.append('}').toString().getBytes(StandardCharsets.UTF_8);
  }

  /**
   * Writes this problem as the whole response (which must not be committed), replacing whatever a
   * handler had set on it, with {@code Retry-After: retryAfterSeconds} unless it is 0.
   */
  void send(HttpServletResponse response, String instance, long retryAfterSeconds)
      throws IOException {
    byte[] body = json(instance);
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
