package io.idem.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.Size;

/**
 * The snapshot reader on hostile input: whatever the bytes, it either returns a table or throws
 * {@link SnapshotFormatException}, never another exception, and never allocates what the input only
 * claims to hold.
 */
class SnapshotFuzzProperties {
  private static final Path GOLDEN = Path.of("src/test/resources/snapshots/sessions-v1.bin");

  @Property(tries = 500)
  void garbageAfterAValidHeaderIsRefusedCleanly(@ForAll @Size(max = 400) byte[] body) {
    ByteBuffer b = ByteBuffer.allocate(8 + body.length);
    b.putInt(SnapshotCodec.MAGIC).putInt(SnapshotCodec.VERSION).put(body);
    assertReadsOrRefuses(b.array());
  }

  @Property(tries = 500)
  void mutatedGoldenFilesAreRefused(@ForAll("mutations") List<int[]> mutations) throws IOException {
    byte[] bytes = Files.readAllBytes(GOLDEN);
    for (int[] m : mutations) {
      bytes[m[0] % bytes.length] ^= (byte) (1 + m[1] % 255);
    }
    try {
      SessionTable.readSnapshot(new ByteArrayInputStream(bytes));
    } catch (SnapshotFormatException expected) {
      return;
    }
    // Only possible if the mutations cancelled out.
    assertThat(bytes).isEqualTo(Files.readAllBytes(GOLDEN));
  }

  @Provide
  Arbitrary<List<int[]>> mutations() {
    return Arbitraries.integers()
        .between(0, Integer.MAX_VALUE)
        .array(int[].class)
        .ofSize(2)
        .list()
        .ofMinSize(1)
        .ofMaxSize(6);
  }

  private static void assertReadsOrRefuses(byte[] input) {
    try {
      SessionTable t = SessionTable.readSnapshot(new ByteArrayInputStream(input));
      // Accepted input must be a real table: written again, it reads back as the same table.
      ByteArrayOutputStream again = new ByteArrayOutputStream();
      t.writeSnapshot(again);
      SessionTable reread =
          SessionTable.readSnapshot(new ByteArrayInputStream(again.toByteArray()));
      assertThat(reread.digest()).isEqualTo(t.digest());
      assertThat(reread.size()).isEqualTo(t.size());
    } catch (SnapshotFormatException refused) {
      assertThat(refused).hasMessageNotContaining("null");
    } catch (IOException | RuntimeException | OutOfMemoryError e) {
      throw new AssertionError("reader failed with " + e + " instead of a format error", e);
    }
  }
}
