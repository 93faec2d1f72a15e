package io.idem.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** The Idempotency-Key field as an RFC 8941 string item: what is a key, and why others are not. */
class KeyHeaderTest {

  static String parse(String field) throws KeyHeader.MalformedKeyException {
    return KeyHeader.parse(field);
  }

  @Test
  void aQuotedStringIsTheKeyWithItsEscapesUndone() throws Exception {
    assertThat(parse("\"8e03978e-40d5-43e8-bc93-6894a57f9324\""))
        .isEqualTo("8e03978e-40d5-43e8-bc93-6894a57f9324");
    assertThat(parse("  \"a b\"  ")).isEqualTo("a b");
    assertThat(parse("\"say \\\"hi\\\" \\\\o/\"")).isEqualTo("say \"hi\" \\o/");
    assertThat(parse("\"" + "k".repeat(255) + "\"")).hasSize(255);
  }

  @Test
  void parametersAreAllowedAndIgnored() throws Exception {
    assertThat(parse("\"k\";a;b=1;c=-2.5;d=\"x\";e=tok/en:1;f=?0;g=:AQID:;*h=?1")).isEqualTo("k");
  }

  @Test
  void everythingElseIsMalformedWithAReason() {
    assertMalformed("", "empty");
    assertMalformed("   ", "empty");
    assertMalformed("token-not-string", "double quotes");
    assertMalformed("123", "double quotes");
    assertMalformed("\"open", "closing double quote");
    assertMalformed("\"bad\\x\"", "bad escape");
    assertMalformed("\"tab\there\"", "printable ASCII");
    assertMalformed("\"caf\u00e9\"", "U+00E9");
    assertMalformed("\"a\", \"b\"", "form a list");
    assertMalformed("\"a\" x", "unexpected 'x'");
    assertMalformed("\"\"", "the key is empty");
    assertMalformed("\"" + "k".repeat(256) + "\"", "256 characters");
    assertMalformed("\"k\";Upper=1", "parameter's name");
    assertMalformed("\"k\";a=", "no value");
    assertMalformed("\"k\";a=?2", "?0 or ?1");
    assertMalformed("\"k\";a=1234567890123456", "numeric");
    assertMalformed("\"k\";a=1.2345", "numeric");
    assertMalformed("\"k\";a=:abc", "not closed");
    assertMalformed("\"k\";a=(1)", "not a Structured Field item");
  }

  static void assertMalformed(String field, String reason) {
    assertThatThrownBy(() -> KeyHeader.parse(field))
        .as(field)
        .isInstanceOf(KeyHeader.MalformedKeyException.class)
        .hasMessageContaining(reason);
  }
}
