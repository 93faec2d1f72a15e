package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.core.SessionTableConfig;
import io.idem.core.SnapshotFormatException;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The state snapshot's versions: a golden file pins each, the writer produces the current one, and
 * the reader still reads the older ones.
 *
 * <p>{@code state-v2.bin} was written by the version 2 code (before the replicated configuration)
 * from {@code GoldenStates.log(2)} with a session window of 16 in the node's own flags, and {@code
 * state-v3.bin} by the version 3 code (before sections) from {@code GoldenStates.log(3)}. To
 * regenerate the current version's file after a deliberate format change (which must also bump the
 * version and keep the previous file): {@code ./mvnw -pl idem-server test
 * -Dtest=StateSnapshotFormatTest -Didem.golden.write=true}. {@code state-v4.bin} was written by the
 * version 4 code (before keys) from {@code GoldenStates.log(3)}, {@code state-v5.bin} by the
 * version 5 code from {@code GoldenStates.log(4)}, which adds application idempotency keys and a
 * fenced write, and {@code state-v6.bin} from the same log (the key records in the table's order).
 * {@code state-v7.bin} is written by the version 7 code from {@code GoldenStates.log(6)}, which
 * bootstraps at log format 6 and adds access control, and {@code state-v8.bin} by the version 8
 * code from {@code GoldenStates.log(7)} (log format 7, quotas). Log format 8 left the snapshot at
 * version 8.
 */
class StateSnapshotFormatTest {
  private static final Path V2 = Path.of("src/test/resources/snapshots/state-v2.bin");
  private static final Path V3 = Path.of("src/test/resources/snapshots/state-v3.bin");
  private static final Path V4 = Path.of("src/test/resources/snapshots/state-v4.bin");
  private static final Path V5 = Path.of("src/test/resources/snapshots/state-v5.bin");
  private static final Path V6 = Path.of("src/test/resources/snapshots/state-v6.bin");
  private static final Path V7 = Path.of("src/test/resources/snapshots/state-v7.bin");
  private static final Path V8 = Path.of("src/test/resources/snapshots/state-v8.bin");

  /**
   * {@code GoldenStates.state(3)}'s digest since state snapshot version 7, whose session section
   * holds each secret's hash in place of the secret (the version 3 to 6 code computed
   * e48813f0...dd00 from the secrets in clear). Pinned, so that a change of the digest is seen.
   */
  private static final String DIGEST_OF_STATE_3 =
      "8cff0421d04e86dddefface9eb63fc2fb441a77db4d9f2d8cdbf1898e759d6a7";

  private static byte[] bytesOf(ReplicatedState s) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    StateSnapshot.write(s, out);
    return out.toByteArray();
  }

  private static ReplicatedState read(byte[] bytes) throws IOException {
    return StateSnapshot.read(new ByteArrayInputStream(bytes));
  }

  @Test
  void writerProducesTheGoldenBytesOfVersion8() throws IOException {
    byte[] actual = bytesOf(GoldenStates.state(7));
    if (Boolean.getBoolean("idem.golden.write")) {
      Files.write(V8, actual);
    }
    assertThat(actual).isEqualTo(Files.readAllBytes(V8));
  }

  /**
   * Version 8 adds the quotas (section 9) and the owners of keys, leases and key records; a state
   * read from it is the state the log gives, with its digest and its owners' usage, and it decides
   * by the quotas the log set.
   */
  @Test
  void version8CarriesQuotasAndOwners() throws IOException {
    byte[] bytes = Files.readAllBytes(V8);
    assertThat(sectionsOf(bytes))
        .extracting(Section::id)
        .containsExactly(1, 2, 3, 4, 5, 6, 7, 8, 9);
    ReplicatedState s = read(bytes);
    ReplicatedState replayed = GoldenStates.state(7);
    assertThat(StateSnapshot.digest(s)).isEqualTo(StateSnapshot.digest(replayed));
    assertThat(s.configuration.logFormat()).isEqualTo(7);
    assertThat(s.configuration.quotas.defaults().keyRecords()).isEqualTo(1_000);
    assertThat(s.configuration.quotas.backendBytes()).isEqualTo(8L << 20);
    assertThat(s.auth.quotasOf("CN=b", s.configuration.quotas.defaults()).keyRecords())
        .isEqualTo(1_000);
    assertThat(s.kv.keysOf("")).isEqualTo(replayed.kv.keysOf("")).isEqualTo(4);
    assertThat(s.kv.bytesOf("")).isEqualTo(replayed.kv.bytesOf(""));
    assertThat(s.leases.countOf("")).isEqualTo(1);
    assertThat(s.keys.table().usageOf("").records()).isEqualTo(2);
    assertThat(s.backendUsed()).isEqualTo(replayed.backendUsed());
    assertThat(bytesOf(s)).isEqualTo(bytes);
  }

  /**
   * Log format 8 changes what a fenced write decides, not the snapshot: a format 8 log's state is
   * written as snapshot version 8, with the same sections, and reads back to the same state.
   */
  @Test
  void aFormat8LogIsWrittenAsSnapshotVersion8() throws IOException {
    ReplicatedState replayed = GoldenStates.state(8);
    assertThat(replayed.get("late").getFound()).as("refused after the deadline").isFalse();
    byte[] bytes = bytesOf(replayed);
    assertThat(StateSnapshot.SINGLE_GROUP_VERSION).isEqualTo(8);
    assertThat(sectionsOf(bytes))
        .extracting(Section::id)
        .containsExactly(1, 2, 3, 4, 5, 6, 7, 8, 9);
    ReplicatedState s = read(bytes);
    assertThat(s.configuration.logFormat()).isEqualTo(8);
    assertThat(StateSnapshot.digest(s)).isEqualTo(StateSnapshot.digest(replayed));
    assertThat(bytesOf(s)).isEqualTo(bytes);
  }

  /**
   * Version 7 adds the log format in force (section 7) and access control (section 8); a state read
   * from it is the state the log gives, with its digest, and it decides by its grants.
   */
  @Test
  void version7CarriesTheLogFormatAndAccessControl() throws IOException {
    byte[] bytes = Files.readAllBytes(V7);
    assertThat(sectionsOf(bytes)).extracting(Section::id).containsExactly(1, 2, 3, 4, 5, 6, 7, 8);
    ReplicatedState s = read(bytes);
    ReplicatedState replayed = GoldenStates.state(6);
    assertThat(StateSnapshot.digest(s)).isEqualTo(StateSnapshot.digest(replayed));
    assertThat(s.configuration.logFormat()).isEqualTo(6);
    assertThat(s.auth.enabled()).isTrue();
    assertThat(s.auth.isAdmin("CN=admin")).isTrue();
    assertThat(s.auth.isAdmin("CN=a")).isFalse();
    assertThat(s.get("tenant-a/x", "CN=a").getCode()).isEqualTo(io.idem.proto.Code.OK);
    assertThat(s.get("tenant-b/x", "CN=a").getCode())
        .isEqualTo(io.idem.proto.Code.PERMISSION_DENIED);
    // Written again, it is a version 8 snapshot of the same state: nothing owned, default quotas.
    assertThat(s.configuration.quotas.pristine()).isTrue();
    assertThat(s.kv.keysOf("")).isZero();
    byte[] again = bytesOf(s);
    assertThat(again).isEqualTo(bytesOf(replayed));
    assertThat(StateSnapshot.digest(read(again))).isEqualTo(StateSnapshot.digest(replayed));
  }

  /** An older snapshot implies the log format written before the format in force, 5. */
  @Test
  void version6IsReadAtLogFormat5WithAuthOff() throws IOException {
    ReplicatedState s = read(Files.readAllBytes(V6));
    assertThat(s.configuration.logFormat()).isEqualTo(FormatState.BEFORE_THE_GATE);
    assertThat(s.auth.enabled()).isFalse();
    assertThat(s.configuration.format.pristine()).isTrue();
    assertThat(s.auth.pristine()).isTrue();
  }

  @Test
  void everyFlippedByteOrTruncationOfVersion7IsRefused() throws IOException {
    refusesEveryFlipAndCut(Files.readAllBytes(V7));
  }

  @Test
  void everyFlippedByteOrTruncationOfVersion8IsRefused() throws IOException {
    refusesEveryFlipAndCut(Files.readAllBytes(V8));
  }

  /**
   * Version 6 differs from version 5 only in the order of the key records in section 6: both read
   * as the state the log gives, with its digest, and the other sections' bytes are equal.
   */
  @ParameterizedTest
  @ValueSource(ints = {5, 6})
  void versions5And6CarryTheKeyTableAsSectionSix(int version) throws IOException {
    byte[] bytes = Files.readAllBytes(version == 5 ? V5 : V6);
    List<Section> sections = sectionsOf(bytes);
    assertThat(sections).extracting(Section::id).containsExactly(1, 2, 3, 4, 5, 6);
    List<Section> other = sectionsOf(Files.readAllBytes(version == 5 ? V6 : V5));
    for (int i = 0; i < 5; i++) {
      assertThat(sections.get(i).body()).isEqualTo(other.get(i).body());
    }
    ReplicatedState s = read(bytes);
    ReplicatedState replayed = GoldenStates.state(4);
    assertThat(StateSnapshot.digest(s)).isEqualTo(StateSnapshot.digest(replayed));
    assertThat(s.keys.size()).isEqualTo(2);
    assertThat(s.keys.digest()).isEqualTo(replayed.keys.digest());
    assertThat(s.get("paid").getFound()).as("the fenced put with the current token").isTrue();
    assertThat(s.get("stale").getFound()).as("the fenced put with a stale token").isFalse();
  }

  /** Before version 5 there were no keys: version 4 is read with an empty key table. */
  @Test
  void version4IsReadWithAnEmptyKeyTable() throws IOException {
    ReplicatedState s = read(Files.readAllBytes(V4));
    assertThat(s.keys.pristine()).isTrue();
    assertThat(StateSnapshot.digest(s)).isEqualTo(DIGEST_OF_STATE_3);
    // Written again, it is a version 8 snapshot with an empty section 6 and sections 7 to 9 as the
    // older version implies.
    byte[] again = bytesOf(s);
    assertThat(sectionsOf(again))
        .extracting(Section::id)
        .containsExactly(1, 2, 3, 4, 5, 6, 7, 8, 9);
    assertThat(again).isEqualTo(bytesOf(GoldenStates.state(3)));
    assertThat(StateSnapshot.digest(read(again))).isEqualTo(DIGEST_OF_STATE_3);
  }

  @Test
  void version4IsOneFramedSectionPerDomainInIdOrder() throws IOException {
    List<Section> sections = sectionsOf(Files.readAllBytes(V4));
    assertThat(sections).extracting(Section::id).containsExactly(1, 2, 3, 4, 5);
    ReplicatedState s = read(Files.readAllBytes(V4));
    assertThat(s.appliedIndex()).isEqualTo(5);
    assertThat(s.configuration.revision()).isEqualTo(1);
    assertThat(s.leases.holder("lock")).hasValue(2L * ReplicatedState.MAX_COMMANDS_PER_ENTRY);
    assertThat(s.get("k").getLease()).isEqualTo("lock");
    assertThat(s.sessions.size()).isEqualTo(2);
    assertThat(StateSnapshot.digest(s)).isEqualTo(StateSnapshot.digest(GoldenStates.state(3)));
  }

  /**
   * The digest hashes the sections unframed, so it does not depend on the snapshot version a state
   * was read from.
   */
  /**
   * A snapshot's write hashes the sections as it writes them: the digest it leaves is the state's
   * digest taken without writing, with the key table hashed (state 7) or pristine (state 3).
   */
  @ParameterizedTest
  @ValueSource(ints = {3, 4, 7})
  void theDigestAWriteTakesIsTheStatesDigest(int version) throws IOException {
    ReplicatedState s = GoldenStates.state(version);
    String expected = StateSnapshot.digest(s);
    StateSnapshot.Frozen frozen = StateSnapshot.freeze(s);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    frozen.write(out);
    assertThat(frozen.digest()).isEqualTo(expected);
    assertThat(StateSnapshot.digest(read(out.toByteArray()))).isEqualTo(expected);
    if (version == 3) {
      assertThat(frozen.digest()).isEqualTo(DIGEST_OF_STATE_3);
    }
  }

  @Test
  void theDigestOfAStateDoesNotDependOnTheSnapshotVersionItWasReadFrom() throws IOException {
    assertThat(StateSnapshot.digest(GoldenStates.state(3))).isEqualTo(DIGEST_OF_STATE_3);
    assertThat(StateSnapshot.digest(read(Files.readAllBytes(V3)))).isEqualTo(DIGEST_OF_STATE_3);
  }

  @Test
  void version3CarriesTheReplicatedConfiguration() throws IOException {
    ReplicatedState s = read(Files.readAllBytes(V3));
    assertThat(s.configuration.revision()).isEqualTo(1);
    assertThat(s.configuration.limits()).isEqualTo(new Limits(100, 1000, 10, 60_000));
    assertThat(s.sessions.bounds()).isEqualTo(new SessionTableConfig(16, 100, 3_600_000, 64));
    assertThat(s.appliedIndex()).isEqualTo(5);
    assertThat(StateSnapshot.digest(s)).isEqualTo(StateSnapshot.digest(GoldenStates.state(3)));
    // Written again, it is the version 5 snapshot of the same state.
    assertThat(bytesOf(s)).isEqualTo(bytesOf(GoldenStates.state(3)));
  }

  /** A version 2 snapshot had no configuration: the defaults and its session table's bounds. */
  @Test
  void version2IsReadAsNotConfigured() throws IOException {
    ReplicatedState s = read(Files.readAllBytes(V2));
    assertThat(s.configuration.configured()).isFalse();
    assertThat(s.configuration.limits()).isEqualTo(Limits.DEFAULTS);
    assertThat(s.sessions.bounds().window()).as("carried by the session table").isEqualTo(16);
    assertThat(s.appliedIndex()).isEqualTo(4);
    assertThat(s.sessions.size()).isEqualTo(2);
    assertThat(s.leases.holder("lock")).hasValue(ReplicatedState.MAX_COMMANDS_PER_ENTRY);
    assertThat(s.get("k").getLease()).isEqualTo("lock");
    assertThat(s.get("n").getValue().toStringUtf8()).isEqualTo("5");
    assertThat(s.get("list").getElementsCount()).isEqualTo(1);
    assertThat(s.duplicatesSuppressed()).isEqualTo(1);
    // Written again, it is a version 5 snapshot of the same state.
    byte[] again = bytesOf(s);
    assertThat(sectionsOf(again)).hasSize(9);
    assertThat(StateSnapshot.digest(read(again))).isEqualTo(StateSnapshot.digest(s));
  }

  /**
   * Version 1 had no lease holders: the version 2 golden file without them reads as the same state
   * with leases any session may renew (holder 0).
   */
  @Test
  void version1IsReadWithOwnerlessLeases() throws IOException {
    byte[] v2 = Files.readAllBytes(V2);
    ReplicatedState s = read(version1Of(v2));
    assertThat(s.leases.holder("lock")).hasValue(0);
    assertThat(s.get("k").getLease()).isEqualTo("lock");
    assertThat(s.appliedIndex()).isEqualTo(4);
    assertThat(s.sessions.size()).isEqualTo(2);
  }

  @Test
  void everyFlippedByteOrTruncationOfVersion6IsRefused() throws IOException {
    refusesEveryFlipAndCut(Files.readAllBytes(V6));
  }

  @Test
  void everyFlippedByteOrTruncationOfVersion5IsRefused() throws IOException {
    refusesEveryFlipAndCut(Files.readAllBytes(V5));
  }

  @Test
  void everyFlippedByteOrTruncationOfVersion4IsRefused() throws IOException {
    refusesEveryFlipAndCut(Files.readAllBytes(V4));
  }

  @Test
  void everyFlippedByteOrTruncationOfVersion3IsRefused() throws IOException {
    refusesEveryFlipAndCut(Files.readAllBytes(V3));
  }

  /** The framing is checked on its own, not only by the checksum. */
  @Test
  void aSectionMustFillExactlyItsLength() throws IOException {
    List<Section> sections = sectionsOf(Files.readAllBytes(V5));
    Section position = sections.get(0);
    byte[] longer = Arrays.copyOf(position.body(), position.body().length + 1);
    sections.set(0, new Section(1, longer));
    assertThatThrownBy(() -> read(encode(sections)))
        .isInstanceOf(SnapshotFormatException.class)
        .hasMessageContaining("section 1: 1 of its 41 bytes unread");
    sections.set(0, new Section(1, Arrays.copyOf(position.body(), position.body().length - 1)));
    assertThatThrownBy(() -> read(encode(sections)))
        .isInstanceOf(SnapshotFormatException.class)
        .hasMessageContaining("section 1 is longer than its length 39");
  }

  @Test
  void sectionsAreRequiredInOrder() throws IOException {
    List<Section> sections = sectionsOf(Files.readAllBytes(V5));
    Section leases = sections.remove(2);
    sections.add(3, leases);
    assertThatThrownBy(() -> read(encode(sections)))
        .isInstanceOf(SnapshotFormatException.class)
        .hasMessageContaining("expected section 3, found 4");
    sections.remove(3);
    assertThatThrownBy(() -> read(encode(sections)))
        .isInstanceOf(SnapshotFormatException.class)
        .hasMessageContaining("expected section 3, found 4");
  }

  /**
   * Version 9 adds section 10, the group of a cluster of several Raft groups: a data group's state
   * is written in it and reads back to the same group, map and digest; a cluster of one group keeps
   * writing version 8.
   */
  @Test
  void aGroupOfSeveralIsWrittenAsVersion9WithItsGroup() throws IOException {
    ReplicatedState single = GoldenStates.state(8);
    assertThat(StateSnapshot.versionFor(single)).isEqualTo(8);
    ReplicatedState grouped = new ReplicatedState();
    grouped.configuration.groups.set(3, 4);
    byte[] bytes = bytesOf(grouped);
    assertThat(sectionsOf(bytes))
        .extracting(Section::id)
        .containsExactly(1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
    ReplicatedState s = read(bytes);
    assertThat(s.configuration.groups.group()).isEqualTo(3);
    assertThat(s.configuration.groups.count()).isEqualTo(4);
    assertThat(s.configuration.groups.map().getGroups(2)).isEqualTo(3);
    assertThat(StateSnapshot.digest(s)).isEqualTo(StateSnapshot.digest(grouped));
    ReplicatedState other = new ReplicatedState();
    other.configuration.groups.set(2, 4);
    assertThat(StateSnapshot.digest(other))
        .as("the group is part of the digest")
        .isNotEqualTo(StateSnapshot.digest(grouped));
    List<Section> sections = new ArrayList<>(sectionsOf(bytes));
    sections.set(9, new Section(10, new byte[] {0, 0, 0, 9, 0, 0, 0, 4})); // group 9 of 4
    assertThatThrownBy(() -> read(encode(sections, StateSnapshot.VERSION)))
        .isInstanceOf(SnapshotFormatException.class)
        .hasMessageContaining("group 9 out of [0, 4]");
  }

  @Test
  void anUnknownVersionIsRefused() throws IOException {
    byte[] future = Files.readAllBytes(V8);
    future[7] = (byte) (StateSnapshot.VERSION + 1);
    assertThatThrownBy(() -> read(future))
        .isInstanceOf(SnapshotFormatException.class)
        .hasMessageContaining("version " + (StateSnapshot.VERSION + 1));
  }

  private static void refusesEveryFlipAndCut(byte[] golden) {
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

  // ---- a framed (version 4 or 5) snapshot taken apart and put together again, with a valid
  // checksum ----

  private record Section(int id, byte[] body) {}

  private static List<Section> sectionsOf(byte[] snapshot) throws IOException {
    DataInputStream in =
        new DataInputStream(new ByteArrayInputStream(snapshot, 0, snapshot.length - 4));
    assertThat(in.readInt()).isEqualTo(StateSnapshot.MAGIC);
    assertThat(in.readInt()).isBetween(4, StateSnapshot.VERSION);
    List<Section> sections = new ArrayList<>();
    while (in.available() > 0) {
      int id = in.readInt();
      byte[] body = new byte[Math.toIntExact(in.readLong())];
      in.readFully(body);
      sections.add(new Section(id, body));
    }
    return sections;
  }

  private static byte[] encode(List<Section> sections) throws IOException {
    return encode(sections, StateSnapshot.SINGLE_GROUP_VERSION);
  }

  private static byte[] encode(List<Section> sections, int version) throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    DataOutputStream out = new DataOutputStream(bytes);
    out.writeInt(StateSnapshot.MAGIC);
    out.writeInt(version);
    for (Section s : sections) {
      out.writeInt(s.id());
      out.writeLong(s.body().length);
      out.write(s.body());
    }
    return withChecksum(bytes.toByteArray());
  }

  /**
   * The version 2 snapshot {@code v2} as version 1 wrote it: without the lease holders. Its one
   * lease ("lock") follows the header (magic, version, five longs) and the lease count.
   */
  private static byte[] version1Of(byte[] v2) {
    ByteBuffer in = ByteBuffer.wrap(v2, 0, v2.length - 4);
    assertThat(in.getInt(4)).isEqualTo(2);
    int leases = 8 + 5 * Long.BYTES;
    assertThat(in.getInt(leases)).as("one lease").isEqualTo(1);
    int holder = leases + 4 + 4 + in.getInt(leases + 4);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.write(v2, 0, holder);
    out.write(v2, holder + Long.BYTES, v2.length - 4 - holder - Long.BYTES);
    byte[] body = out.toByteArray();
    body[7] = 1;
    return withChecksum(body);
  }

  private static byte[] withChecksum(byte[] body) {
    CRC32C crc = new CRC32C();
    crc.update(body);
    return ByteBuffer.allocate(body.length + 4).put(body).putInt((int) crc.getValue()).array();
  }
}
