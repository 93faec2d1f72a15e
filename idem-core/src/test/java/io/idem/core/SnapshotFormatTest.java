package io.idem.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * Snapshot format versions 1 to 3: golden files pin the bytes, and every corruption or truncation
 * of them is refused with {@link SnapshotFormatException}. Version 1 had no principals; version 2
 * adds each session's principal; version 3, which the writer writes, keeps each secret's hash in
 * place of the secret. The version 1 and 2 files were written by earlier code and are only read.
 *
 * <p>To regenerate a golden file after a deliberate format change (which must also bump the
 * version): {@code ./mvnw -pl idem-core test
 * -Dtest=SnapshotFormatTest#writerProducesTheGoldenBytes* -Didem.golden.write=true}.
 */
class SnapshotFormatTest {
  private static final Path GOLDEN = Path.of("src/test/resources/snapshots/sessions-v1.bin");
  private static final Path GOLDEN_V2 = Path.of("src/test/resources/snapshots/sessions-v2.bin");
  private static final Path GOLDEN_V3 = Path.of("src/test/resources/snapshots/sessions-v3.bin");

  /** Version 2's table: bound and unbound sessions, a resumed bound one, a principal in UTF-8. */
  static SessionTable goldenTableV2() {
    SessionTable t = new SessionTable(SessionTableConfig.defaults());
    t.register(4, 11, 12, null, 60_000, 4, "CN=tenant-a,O=Idem", 1_000);
    t.register(6, 13, 14, "orders", 60_000, 6, "CN=mandant-ü", 1_000);
    t.register(8, 15, 16, null, 60_000, 8, null, 1_000);
    t.resume("orders", 13, 14, 61, "CN=mandant-ü", 2_000);
    t.admit(4, 0, 1, 1, 2_500);
    t.record(4, 1, 1, 2_500, "r".getBytes(StandardCharsets.UTF_8));
    return t;
  }

  /** The table the golden file holds: anonymous and named sessions, resumed, trimmed, empty. */
  static SessionTable goldenTable() {
    SessionTable t =
        new SessionTable(
            SessionTableConfig.builder()
                .window(8)
                .maxSessions(100)
                .maxTtlMs(3_600_000)
                .maxNameLength(64)
                .build());
    t.register(3, 0x0123456789abcdefL, 0xfedcba9876543210L, null, 60_000, 3, 1_000);
    t.register(5, 1, 2, "billing", 30_000, 5, 1_000);
    t.register(9, -1, -2, "zähler-✓", 45_000, 9, 2_000);
    for (long seq = 1; seq <= 3; seq++) {
      t.admit(3, 0, seq, 2, 2_500);
      t.record(3, seq, seq == 3 ? 2 : 1, 2_500, ("resp-" + seq).getBytes(StandardCharsets.UTF_8));
    }
    t.resume("billing", 1, 2, 31, 3_000);
    t.resume("billing", 1, 2, 32, 3_100);
    t.admit(5, 2, 1, 1, 3_200);
    t.record(5, 1, 1, 3_200, new byte[0]);
    t.keepAlive(5, 2, 2, 3_300);
    t.admit(9, 0, 1, 1, 4_000);
    t.record(9, 1, 1, 4_000, new byte[] {0, 1, 2, (byte) 0xff});
    return t;
  }

  private static byte[] bytesOf(SessionTable t) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    t.writeSnapshot(out);
    return out.toByteArray();
  }

  private static SessionTable read(byte[] bytes) throws IOException {
    return SessionTable.readSnapshot(new ByteArrayInputStream(bytes));
  }

  @Test
  void writerProducesTheGoldenBytesOfVersion3() throws IOException {
    byte[] actual = bytesOf(goldenTableV2());
    if (Boolean.getBoolean("idem.golden.write")) {
      Files.write(GOLDEN_V3, actual);
    }
    assertThat(actual).isEqualTo(Files.readAllBytes(GOLDEN_V3));
    assertThat(actual[7]).isEqualTo((byte) 3);
    assertThat(bytesOf(goldenTable())[7]).as("with or without principals").isEqualTo((byte) 3);
  }

  /** The secrets' bytes appear nowhere in a snapshot, whichever version was read. */
  @Test
  void noSecretIsInTheSnapshotBytes() throws IOException {
    long[][] secrets = {{11, 12}, {13, 14}, {15, 16}};
    for (byte[] snapshot :
        java.util.List.of(bytesOf(goldenTableV2()), bytesOf(read(Files.readAllBytes(GOLDEN_V2))))) {
      for (long[] secret : secrets) {
        byte[] clear =
            java.nio.ByteBuffer.allocate(16).putLong(secret[0]).putLong(secret[1]).array();
        assertThat(indexOf(snapshot, clear)).as("secret %d:%d", secret[0], secret[1]).isEqualTo(-1);
        assertThat(indexOf(snapshot, SessionSecret.hash(secret[0], secret[1]))).isPositive();
      }
    }
    // The same check finds a secret where there is one: version 2 stored them in clear.
    byte[] v2 = Files.readAllBytes(GOLDEN_V2);
    assertThat(indexOf(v2, java.nio.ByteBuffer.allocate(16).putLong(11).putLong(12).array()))
        .isPositive();
  }

  private static int indexOf(byte[] haystack, byte[] needle) {
    outer:
    for (int i = 0; i + needle.length <= haystack.length; i++) {
      for (int j = 0; j < needle.length; j++) {
        if (haystack[i + j] != needle[j]) {
          continue outer;
        }
      }
      return i;
    }
    return -1;
  }

  @Test
  void version3RestoresTheTableWithItsHashes() throws IOException {
    SessionTable t = read(Files.readAllBytes(GOLDEN_V3));
    assertThat(t.authenticate(4, 11, 12, "CN=tenant-a,O=Idem")).isTrue();
    assertThat(t.authenticate(4, 11, 13, "CN=tenant-a,O=Idem")).isFalse();
    assertThat(t.authenticate(8, 15, 16, "CN=anyone")).isTrue();
    assertThat(t.digest()).isEqualTo(goldenTableV2().digest());
    for (byte[] bad : corruptions(Files.readAllBytes(GOLDEN_V3))) {
      assertThatThrownBy(() -> read(bad)).isInstanceOf(SnapshotFormatException.class);
    }
  }

  @Test
  void version2RestoresEachSessionsPrincipal() throws IOException {
    SessionTable t = read(Files.readAllBytes(GOLDEN_V2));
    assertThat(t.principalOf(4)).contains("CN=tenant-a,O=Idem");
    assertThat(t.principalOf(6)).contains("CN=mandant-ü");
    assertThat(t.principalOf(8)).isEmpty();
    assertThat(t.authenticate(4, 11, 12, "CN=tenant-a,O=Idem")).isTrue();
    assertThat(t.authenticate(4, 11, 12, "CN=tenant-b,O=Idem")).isFalse();
    assertThat(t.authenticate(4, 11, 12, null)).isFalse();
    assertThat(t.authenticate(8, 15, 16, "CN=anyone")).isTrue();
    assertThat(t.session(6).orElseThrow().epoch()).isEqualTo(1);
    assertThat(t.digest()).isEqualTo(goldenTableV2().digest());
    for (byte[] bad : corruptions(Files.readAllBytes(GOLDEN_V2))) {
      assertThatThrownBy(() -> read(bad)).isInstanceOf(SnapshotFormatException.class);
    }
  }

  /** Every single-bit flip and every truncation of {@code golden}. */
  private static java.util.List<byte[]> corruptions(byte[] golden) {
    java.util.List<byte[]> all = new java.util.ArrayList<>();
    for (int i = 0; i < golden.length; i++) {
      for (int bit = 0; bit < 8; bit++) {
        byte[] bad = golden.clone();
        bad[i] ^= (byte) (1 << bit);
        all.add(bad);
      }
      all.add(Arrays.copyOf(golden, i));
    }
    return all;
  }

  @Test
  void readerRestoresTheGoldenStateExactly() throws IOException {
    SessionTable t = read(Files.readAllBytes(GOLDEN));
    assertThat(t.config().window()).isEqualTo(8);
    assertThat(t.config().maxSessions()).isEqualTo(100);
    assertThat(t.size()).isEqualTo(3);
    assertThat(t.session(3).orElseThrow())
        .isEqualTo(new SessionInfo(3, 0, null, 60_000, 2_500, 4, 2, 2));
    assertThat(t.session(5).orElseThrow())
        .isEqualTo(new SessionInfo(5, 2, "billing", 30_000, 3_300, 2, 2, 0));
    assertThat(t.session(9).orElseThrow())
        .isEqualTo(new SessionInfo(9, 0, "zähler-✓", 45_000, 4_000, 2, 1, 1));
    assertThat(((Admission.Duplicate) t.admit(3, 0, 2, 2, 2_500)).response())
        .asString(StandardCharsets.UTF_8)
        .isEqualTo("resp-2");
    assertThat(((Admission.Duplicate) t.admit(9, 0, 1, 1, 4_000)).response())
        .containsExactly(0, 1, 2, 0xff);
    assertThat(t.authenticate(3, 0x0123456789abcdefL, 0xfedcba9876543210L)).isTrue();
    assertThat(t.clientIdOf("zähler-✓")).isEqualTo(9);
    assertThat(t.digest()).isEqualTo(goldenTable().digest());
  }

  @Test
  void everyFlippedByteIsDetected() throws IOException {
    byte[] golden = Files.readAllBytes(GOLDEN);
    for (int i = 0; i < golden.length; i++) {
      for (int bit = 0; bit < 8; bit++) {
        byte[] bad = golden.clone();
        bad[i] ^= (byte) (1 << bit);
        int at = i;
        assertThatThrownBy(() -> read(bad))
            .as("flipped bit %d of byte %d", bit, at)
            .isInstanceOf(SnapshotFormatException.class);
      }
    }
  }

  @Test
  void everyTruncationIsDetected() throws IOException {
    byte[] golden = Files.readAllBytes(GOLDEN);
    for (int len = 0; len < golden.length; len++) {
      byte[] cut = Arrays.copyOf(golden, len);
      assertThatThrownBy(() -> read(cut))
          .as("truncated to %d bytes", len)
          .isInstanceOf(SnapshotFormatException.class);
    }
  }

  @Test
  void unknownVersionAndWrongMagicAreNamed() throws IOException {
    byte[] golden = Files.readAllBytes(GOLDEN);
    byte[] v4 = golden.clone();
    v4[7] = 4;
    assertThatThrownBy(() -> read(v4))
        .isInstanceOf(SnapshotFormatException.class)
        .hasMessageContaining("unsupported session snapshot version 4");
    assertThatThrownBy(() -> read("not a snapshot at all".getBytes(StandardCharsets.UTF_8)))
        .isInstanceOf(SnapshotFormatException.class)
        .hasMessageContaining("magic");
  }

  @Test
  void readerStopsAtTheEndOfTheSnapshot() throws IOException {
    byte[] golden = Files.readAllBytes(GOLDEN);
    byte[] followed = Arrays.copyOf(golden, golden.length + 3);
    followed[golden.length] = 'x';
    InputStream in = new ByteArrayInputStream(followed);
    SessionTable.readSnapshot(in);
    assertThat(in.read()).isEqualTo('x');
  }

  @Test
  void largeResponsesRoundTrip() throws IOException {
    SessionTable t = new SessionTable(SessionTableConfig.defaults());
    t.register(1, 0, 0, null, 1_000, 1, 0);
    byte[] big = new byte[200_000];
    for (int i = 0; i < big.length; i++) {
      big[i] = (byte) (i * 31);
    }
    t.admit(1, 0, 1, 1, 0);
    t.record(1, 1, 1, 0, big);
    t.admit(1, 0, 2, 1, 0);
    t.record(1, 2, 1, 0, new byte[] {7});
    SessionTable back = read(bytesOf(t));
    assertThat(((Admission.Duplicate) back.admit(1, 0, 1, 1, 0)).response()).isEqualTo(big);
    assertThat(back.digest()).isEqualTo(t.digest());
  }

  @Test
  void digestDiffersWhenStateDiffers() {
    SessionTable a = goldenTable();
    SessionTable b = goldenTable();
    assertThat(a.digest()).isEqualTo(b.digest());
    b.keepAlive(3, 0, 2, 2_501);
    assertThat(a.digest()).isNotEqualTo(b.digest());
  }
}
