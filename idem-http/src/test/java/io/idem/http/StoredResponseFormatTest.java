package io.idem.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;

/**
 * The stored response's format, version 1: the golden bytes (written by an independent encoder, see
 * the hex file), every flipped byte and every truncation refused, another version refused, and
 * round trips of random responses.
 */
class StoredResponseFormatTest {
  static final StoredResponse GOLDEN =
      new StoredResponse(
          201,
          List.of(
              new StoredResponse.Header("Content-Type", "application/json"),
              new StoredResponse.Header("Location", "/payments/7")),
          "{\"id\":7,\"amount\":100}".getBytes(StandardCharsets.UTF_8),
          false);

  static byte[] golden() throws IOException {
    try (InputStream in =
        StoredResponseFormatTest.class.getResourceAsStream("/stored-response-v1.hex")) {
      return HexFormat.of()
          .parseHex(new String(in.readAllBytes(), StandardCharsets.US_ASCII).strip());
    }
  }

  @Test
  void version1EncodesToTheGoldenBytesAndReadsBackAsAReplay() throws IOException {
    assertThat(GOLDEN.encode()).isEqualTo(golden());
    StoredResponse read = StoredResponse.decode(golden());
    assertThat(read.replayed()).isTrue();
    assertThat(read.status()).isEqualTo(201);
    assertThat(read.headers()).isEqualTo(GOLDEN.headers());
    assertThat(read.body()).isEqualTo(GOLDEN.body());
  }

  @Test
  void everyFlippedByteAndEveryTruncationIsRefused() throws IOException {
    byte[] good = golden();
    for (int i = 0; i < good.length; i++) {
      byte[] bad = good.clone();
      bad[i] ^= 0x01;
      assertThatThrownBy(() -> StoredResponse.decode(bad))
          .as("byte %d flipped", i)
          .isInstanceOf(IllegalStateException.class);
    }
    for (int n = 0; n < good.length; n++) {
      byte[] cut = java.util.Arrays.copyOf(good, n);
      assertThatThrownBy(() -> StoredResponse.decode(cut))
          .as("truncated to %d", n)
          .isInstanceOf(IllegalStateException.class);
    }
  }

  @Test
  void anotherVersionOrMagicIsRefusedEvenWithAGoodChecksum() throws IOException {
    byte[] v2 = golden();
    v2[2] = 2;
    assertThatThrownBy(() -> StoredResponse.decode(rechecksummed(v2)))
        .hasMessageContaining("version 2 unknown");
    byte[] other = golden();
    other[0] = 'X';
    assertThatThrownBy(() -> StoredResponse.decode(rechecksummed(other)))
        .hasMessageContaining("magic");
  }

  static byte[] rechecksummed(byte[] b) {
    CRC32C crc = new CRC32C();
    crc.update(b, 0, b.length - 4);
    ByteBuffer.wrap(b).putInt(b.length - 4, (int) crc.getValue());
    return b;
  }

  @Test
  void randomResponsesRoundTrip() {
    long seed = new Random().nextLong();
    Random r = new Random(seed);
    for (int i = 0; i < 500; i++) {
      List<StoredResponse.Header> headers = new ArrayList<>();
      for (int h = r.nextInt(6); h > 0; h--) {
        headers.add(new StoredResponse.Header("X-H" + r.nextInt(3), text(r)));
      }
      byte[] body = new byte[r.nextInt(2000)];
      r.nextBytes(body);
      StoredResponse s = new StoredResponse(100 + r.nextInt(500), headers, body, false);
      StoredResponse back = StoredResponse.decode(s.encode());
      assertThat(back.status()).as("seed %d", seed).isEqualTo(s.status());
      assertThat(back.headers()).as("seed %d", seed).isEqualTo(headers);
      assertThat(back.body()).as("seed %d", seed).isEqualTo(body);
    }
  }

  static String text(Random r) {
    StringBuilder b = new StringBuilder();
    for (int n = r.nextInt(40); n > 0; n--) {
      b.append((char) (r.nextBoolean() ? 0x20 + r.nextInt(95) : 0xA0 + r.nextInt(0x2000)));
    }
    return b.toString();
  }
}
