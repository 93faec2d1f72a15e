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
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.statistics.Statistics;

/**
 * The snapshot reader on hostile input: whatever the bytes, it either returns a table or throws
 * {@link SnapshotFormatException}, never another exception, and never allocates what the input only
 * claims to hold.
 */
class SnapshotFuzzProperties {
  private static final Path GOLDEN = Path.of("src/test/resources/snapshots/sessions-v1.bin");

  /** What {@link #garbageAfterAValidHeaderIsRefusedCleanly} hands the reader. */
  enum Shape {
    /** A golden file, then garbage: read as the golden table (the reader stops at the CRC). */
    VALID_THEN_GARBAGE,
    /** Magic and a known version, then garbage: refused. */
    HEADER_THEN_GARBAGE,
    /** A golden file with one byte changed, then garbage: refused (CRC32C sees every such flip). */
    VALID_WITH_A_FLIPPED_BYTE
  }

  @Property(tries = 600)
  void garbageAfterAValidHeaderIsRefusedCleanly(
      @ForAll Shape shape,
      @ForAll @IntRange(min = 1, max = SnapshotCodec.VERSION) int version,
      @ForAll @Size(max = 400) byte[] garbage,
      @ForAll @IntRange(min = 0, max = Integer.MAX_VALUE) int at,
      @ForAll @IntRange(min = 1, max = 255) int flip)
      throws IOException {
    byte[] golden = Files.readAllBytes(golden(version));
    ByteBuffer b = ByteBuffer.allocate(golden.length + garbage.length);
    switch (shape) {
      case VALID_THEN_GARBAGE -> b.put(golden);
      case HEADER_THEN_GARBAGE -> b.putInt(SnapshotCodec.MAGIC).putInt(version);
      case VALID_WITH_A_FLIPPED_BYTE -> {
        byte[] flipped = golden.clone();
        flipped[at % flipped.length] ^= (byte) flip;
        b.put(flipped);
      }
    }
    b.put(garbage);
    byte[] input = java.util.Arrays.copyOf(b.array(), b.position());

    SessionTable read = readOrRefuse(input);
    // Both branches run a known share of the tries (about a third to a half are accepted).
    Statistics.label("outcome")
        .collect(read != null ? "accepted" : "refused")
        .coverage(
            c -> {
              c.check("accepted").percentage(p -> p > 15);
              c.check("refused").percentage(p -> p > 30);
            });
    if (shape == Shape.VALID_THEN_GARBAGE) {
      assertThat(read).as("a golden file followed by garbage").isNotNull();
      SessionTable expected = SessionTable.readSnapshot(new ByteArrayInputStream(golden));
      assertThat(read.digest()).isEqualTo(expected.digest());
    } else {
      // A header and garbage could pass only by matching a CRC32C by chance (2^-32 a try).
      assertThat(read).as(shape + " was accepted").isNull();
    }
  }

  private static Path golden(int version) {
    return GOLDEN.resolveSibling("sessions-v" + version + ".bin");
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

  /**
   * The table {@code input} holds, or null if the reader refused it with {@link
   * SnapshotFormatException}; any other failure fails the property.
   */
  private static SessionTable readOrRefuse(byte[] input) {
    try {
      SessionTable t = SessionTable.readSnapshot(new ByteArrayInputStream(input));
      // Accepted input must be a real table: written again, it reads back as the same table.
      ByteArrayOutputStream again = new ByteArrayOutputStream();
      t.writeSnapshot(again);
      SessionTable reread =
          SessionTable.readSnapshot(new ByteArrayInputStream(again.toByteArray()));
      assertThat(reread.digest()).isEqualTo(t.digest());
      assertThat(reread.size()).isEqualTo(t.size());
      return t;
    } catch (SnapshotFormatException refused) {
      assertThat(refused).hasMessageNotContaining("null");
      return null;
    } catch (IOException | RuntimeException | OutOfMemoryError e) {
      throw new AssertionError("reader failed with " + e + " instead of a format error", e);
    }
  }
}
