package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.idem.core.Utf8;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.CharRange;
import net.jqwik.api.constraints.Chars;
import net.jqwik.api.constraints.Size;

/** The sections' encodings state their lengths without writing, as many bytes as they write. */
class StateSectionProperties {

  /** Any string, lone surrogates included (the encoder writes each as one '?'). */
  @Property(tries = 500)
  void aStringsLengthIsTheBytesWriteStringWrites(
      @ForAll @Chars({'a', 'é', '日', '\uD83D', '\uDE00'}) @CharRange(from = 0, to = 0xFFFF)
          String s)
      throws IOException {
    assertThat(Utf8.encodedLength(s)).isEqualTo(s.getBytes(StandardCharsets.UTF_8).length);
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    DataOutputStream out = new DataOutputStream(bytes);
    StateSection.writeString(out, s);
    out.flush();
    assertThat(bytes.size()).isEqualTo(StateSection.stringLength(s));
  }

  @Property(tries = 100)
  void aValueIsWrittenAsItsLengthThenItsBytes(@ForAll @Size(max = 3000) byte[] value)
      throws IOException {
    ByteString b = ByteString.copyFrom(value);
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    DataOutputStream out = new DataOutputStream(bytes);
    StateSection.writeBytes(out, b);
    StateSection.writeBytes(out, b.substring(value.length / 2));
    out.flush();
    byte[] written = bytes.toByteArray();
    assertThat(written.length)
        .isEqualTo(
            StateSection.bytesLength(b) + StateSection.bytesLength(b.substring(value.length / 2)));
    assertThat(java.util.Arrays.copyOfRange(written, 4, 4 + value.length)).isEqualTo(value);
  }
}
