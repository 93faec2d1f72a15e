package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.core.SessionTableConfig;
import io.idem.core.SnapshotFormatException;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * The state snapshot's versions: a golden file pins each, the writer produces the current one, and
 * the reader still reads the older ones.
 *
 * <p>{@code state-v2.bin} was written by the version 2 code (before the replicated configuration)
 * from {@code GoldenStates.log(2)} with a session window of 16 in the node's own flags. To
 * regenerate the current version's file after a deliberate format change (which must also bump the
 * version): {@code ./mvnw -pl idem-server test -Dtest=StateSnapshotFormatTest
 * -Didem.golden.write=true}.
 */
class StateSnapshotFormatTest {
  private static final Path V2 = Path.of("src/test/resources/snapshots/state-v2.bin");
  private static final Path V3 = Path.of("src/test/resources/snapshots/state-v3.bin");

  private static byte[] bytesOf(ReplicatedState s) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    StateSnapshot.write(s, out);
    return out.toByteArray();
  }

  private static ReplicatedState read(byte[] bytes) throws IOException {
    return StateSnapshot.read(new ByteArrayInputStream(bytes));
  }

  @Test
  void writerProducesTheGoldenBytesOfVersion3() throws IOException {
    byte[] actual = bytesOf(GoldenStates.state(3));
    if (Boolean.getBoolean("idem.golden.write")) {
      Files.write(V3, actual);
    }
    assertThat(actual).isEqualTo(Files.readAllBytes(V3));
  }

  @Test
  void version3CarriesTheReplicatedConfiguration() throws IOException {
    ReplicatedState s = read(Files.readAllBytes(V3));
    assertThat(s.configRevision).isEqualTo(1);
    assertThat(s.limits).isEqualTo(new Limits(100, 1000, 10, 60_000));
    assertThat(s.sessions.config()).isEqualTo(new SessionTableConfig(16, 100, 3_600_000, 64));
    assertThat(s.appliedIndex).isEqualTo(5);
    assertThat(StateSnapshot.digest(s)).isEqualTo(StateSnapshot.digest(GoldenStates.state(3)));
  }

  /** A version 2 snapshot had no configuration: the defaults and its session table's bounds. */
  @Test
  void version2IsReadAsNotConfigured() throws IOException {
    ReplicatedState s = read(Files.readAllBytes(V2));
    assertThat(s.configured()).isFalse();
    assertThat(s.limits).isEqualTo(Limits.DEFAULTS);
    assertThat(s.sessions.config().window()).as("carried by the session table").isEqualTo(16);
    assertThat(s.appliedIndex).isEqualTo(4);
    assertThat(s.sessions.size()).isEqualTo(2);
    assertThat(s.leases.get("lock").holder).isEqualTo(ReplicatedState.MAX_COMMANDS_PER_ENTRY);
    assertThat(s.get("k").getLease()).isEqualTo("lock");
    assertThat(s.get("n").getValue().toStringUtf8()).isEqualTo("5");
    assertThat(s.get("list").getElementsCount()).isEqualTo(1);
    assertThat(s.duplicatesSuppressed).isEqualTo(1);
    // Written again, it is a version 3 snapshot of the same state.
    assertThat(StateSnapshot.digest(read(bytesOf(s)))).isEqualTo(StateSnapshot.digest(s));
  }

  @Test
  void everyFlippedByteOrTruncationOfVersion3IsRefused() throws IOException {
    byte[] golden = Files.readAllBytes(V3);
    for (int i = 0; i < golden.length; i++) {
      byte[] bad = golden.clone();
      bad[i] ^= 0x10;
      assertThatThrownBy(() -> read(bad))
          .as("byte %d flipped", i)
          .isInstanceOf(SnapshotFormatException.class);
    }
    for (int n = 0; n < golden.length; n++) {
      byte[] cut = Arrays.copyOf(golden, n);
      assertThatThrownBy(() -> read(cut))
          .as("truncated to %d bytes", n)
          .isInstanceOf(SnapshotFormatException.class);
    }
  }

  @Test
  void anUnknownVersionIsRefused() throws IOException {
    byte[] future = Files.readAllBytes(V3);
    future[7] = 4;
    assertThatThrownBy(() -> read(future))
        .isInstanceOf(SnapshotFormatException.class)
        .hasMessageContaining("version 4");
  }
}
