package io.idem.http;

import io.idem.keys.IdempotencyKey;
import jakarta.servlet.http.HttpServletRequest;
import java.util.Enumeration;
import org.jspecify.annotations.Nullable;

/**
 * The {@code Idempotency-Key} field value: an RFC 8941 Item whose bare item is a String
 * (draft-ietf-httpapi-idempotency-key-header-07, section 2.1), such as {@code
 * "8e03978e-40d5-43e8-bc93-6894a57f9324"}. Parameters are allowed by RFC 8941 and ignored (the
 * draft defines none). Anything else (a token without quotes, two field lines that combine into a
 * list, a bad escape, a character outside printable ASCII) is malformed. Stateless.
 */
final class KeyHeader {
  /** The field's name. */
  static final String NAME = "Idempotency-Key";

  private final String input;
  private int pos;

  private KeyHeader(String input) {
    this.input = input;
  }

  /** Why a field value is not a key; the message goes into the 400 problem's detail. */
  static final class MalformedKeyException extends Exception {
    private static final long serialVersionUID = 1L;

    private final String detail; // the message, never null

    MalformedKeyException(String message) {
      super(message);
      this.detail = message;
    }

    String detail() {
      return detail;
    }
  }

  /**
   * The key in {@code fieldValue} (field lines already combined with ", ").
   *
   * @throws MalformedKeyException naming what is wrong
   */
  static String parse(String fieldValue) throws MalformedKeyException {
    KeyHeader p = new KeyHeader(fieldValue);
    p.skipSpaces();
    if (p.atEnd()) {
      throw new MalformedKeyException("the Idempotency-Key field is empty");
    }
    if (p.peek() != '"') {
      throw new MalformedKeyException(
          "the key must be a Structured Field string, in double quotes (RFC 8941 section 3.3.3)");
    }
    String key = p.string();
    p.parameters();
    p.skipSpaces();
    if (!p.atEnd()) {
      throw new MalformedKeyException(
          "unexpected '"
              + p.peek()
              + "' after the key at position "
              + p.pos
              + " (one key per request: two Idempotency-Key fields form a list)");
    }
    if (key.isEmpty()) {
      throw new MalformedKeyException("the key is empty");
    }
    if (key.length() > IdempotencyKey.MAX_CHARS) {
      throw new MalformedKeyException(
          "the key has "
              + key.length()
              + " characters; at most "
              + IdempotencyKey.MAX_CHARS
              + " are allowed");
    }
    return key;
  }

  private boolean atEnd() {
    return pos >= input.length();
  }

  private char peek() {
    return input.charAt(pos);
  }

  private void skipSpaces() {
    while (!atEnd() && (peek() == ' ' || peek() == '\t')) {
      pos++;
    }
  }

  /** RFC 8941 section 4.2.5; the opening quote is next. */
  private String string() throws MalformedKeyException {
    StringBuilder out = new StringBuilder();
    pos++;
    while (!atEnd()) {
      char c = input.charAt(pos++);
      if (c == '\\') {
        if (atEnd()) {
          break;
        }
        char e = input.charAt(pos++);
        if (e != '"' && e != '\\') {
          throw new MalformedKeyException(
              "bad escape '\\" + e + "' in the key: only \\\" and \\\\ are allowed");
        }
        out.append(e);
      } else if (c == '"') {
        return out.toString();
      } else if (c < 0x20 || c > 0x7e) {
        throw new MalformedKeyException(
            "the key may hold printable ASCII only; found U+"
                + String.format("%04X", (int) c)
                + " at position "
                + (pos - 1));
      } else {
        out.append(c);
      }
    }
    throw new MalformedKeyException("the key's closing double quote is missing");
  }

  /** RFC 8941 section 4.2.3.2: {@code *( ";" *SP key [ "=" bare-item ] )}, values ignored. */
  private void parameters() throws MalformedKeyException {
    while (!atEnd() && peek() == ';') {
      pos++;
      skipSpaces();
      if (atEnd() || !(isLcAlpha(peek()) || peek() == '*')) {
        throw new MalformedKeyException("a parameter's name must start with a-z or '*'");
      }
      while (!atEnd() && isKeyChar(peek())) {
        pos++;
      }
      if (!atEnd() && peek() == '=') {
        pos++;
        bareItem();
      }
    }
  }

  /** RFC 8941 section 4.2.3.1, for parameter values, which are read and dropped. */
  private void bareItem() throws MalformedKeyException {
    if (atEnd()) {
      throw new MalformedKeyException("a parameter has '=' but no value");
    }
    char c = peek();
    if (c == '"') {
      string();
    } else if (c == '-' || isDigit(c)) {
      number();
    } else if (c == '?') {
      pos++;
      if (atEnd() || (peek() != '0' && peek() != '1')) {
        throw new MalformedKeyException("a boolean parameter must be ?0 or ?1");
      }
      pos++;
    } else if (c == ':') {
      pos++;
      while (!atEnd() && peek() != ':') {
        char b = peek();
        if (!(isAlpha(b) || isDigit(b) || b == '+' || b == '/' || b == '=')) {
          throw new MalformedKeyException("a byte-sequence parameter may hold base64 only");
        }
        pos++;
      }
      if (atEnd()) {
        throw new MalformedKeyException("a byte-sequence parameter is not closed with ':'");
      }
      pos++;
    } else if (isAlpha(c) || c == '*') {
      pos++;
      while (!atEnd() && (isTchar(peek()) || peek() == ':' || peek() == '/')) {
        pos++;
      }
    } else {
      throw new MalformedKeyException("a parameter's value is not a Structured Field item");
    }
  }

  private void number() throws MalformedKeyException {
    if (peek() == '-') {
      pos++;
    }
    int digits = 0;
    int fraction = -1;
    while (!atEnd() && (isDigit(peek()) || (peek() == '.' && fraction < 0))) {
      if (peek() == '.') {
        if (digits == 0 || digits > 12) {
          throw new MalformedKeyException("a decimal parameter is malformed");
        }
        fraction = 0;
      } else if (fraction >= 0) {
        fraction++;
      } else {
        digits++;
      }
      pos++;
    }
    if (digits == 0 || digits > 15 || fraction == 0 || fraction > 3) {
      throw new MalformedKeyException("a numeric parameter is malformed");
    }
  }

  private static boolean isDigit(char c) {
    return c >= '0' && c <= '9';
  }

  private static boolean isLcAlpha(char c) {
    return c >= 'a' && c <= 'z';
  }

  private static boolean isAlpha(char c) {
    return isLcAlpha(c) || (c >= 'A' && c <= 'Z');
  }

  private static boolean isKeyChar(char c) {
    return isLcAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*';
  }

  private static boolean isTchar(char c) {
    return isAlpha(c) || isDigit(c) || "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
  }

  /**
   * The request's {@code Idempotency-Key} field value, its field lines combined into one list with
   * ", " (RFC 9110) so that two keys are malformed; null without the field.
   */
  static @Nullable String fieldValue(HttpServletRequest request) {
    Enumeration<String> lines = request.getHeaders(NAME);
    if (lines == null || !lines.hasMoreElements()) {
      return null;
    }
    String first = lines.nextElement();
    if (!lines.hasMoreElements()) {
      return first;
    }
    StringBuilder b = new StringBuilder(first);
    while (lines.hasMoreElements()) {
      b.append(", ").append(lines.nextElement());
    }
    return b.toString();
  }
}
