package io.idem.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.core.KeyTable.Acquisition;
import io.idem.core.KeyTable.KeyId;
import io.idem.core.KeyTable.Settlement;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Each transition of a key record, named by what it guarantees. */
class KeyTableTest {
  static final KeyId PAY = new KeyId("tenant-a", "payment-42");
  static final byte[] FP = {1, 2, 3};
  static final long MIN = 60_000;
  static final long DAY = 86_400_000;

  final KeyTable t = new KeyTable(KeyTable.Bounds.DEFAULTS);
  long token = 100;
  long now = 1_000_000;

  Acquisition acquire(KeyId id, byte[] fp) {
    return t.acquire(id, fp, MIN, DAY, ++token, now);
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void aNewKeyIsAcquiredWithTheTokenAndADeadlineInLogTime() {
    Acquisition a = acquire(PAY, FP);
    assertThat(a).isEqualTo(new Acquisition.Acquired(101, now + MIN, false));
    assertThat(t.currentToken(PAY)).isEqualTo(101);
  }

  @Test
  void aHeldKeyAnswersInProgressUntilItsDeadlineThenIsTakenOverWithAGreaterToken() {
    acquire(PAY, FP);
    now += MIN;
    assertThat(acquire(PAY, FP)).isEqualTo(new Acquisition.InProgress(now));
    now += 1;
    Acquisition a = acquire(PAY, FP);
    assertThat(a).isInstanceOf(Acquisition.Acquired.class);
    Acquisition.Acquired taken = (Acquisition.Acquired) a;
    assertThat(taken.takeover()).isTrue();
    assertThat(taken.token()).isEqualTo(token).isGreaterThan(101);
  }

  @Test
  void theOwnerWhoseKeyWasTakenOverIsFencedEverywhere() {
    long stale = ((Acquisition.Acquired) acquire(PAY, FP)).token();
    now += MIN + 1;
    long current = ((Acquisition.Acquired) acquire(PAY, FP)).token();
    assertThat(t.complete(PAY, stale, utf8("late"), now)).isEqualTo(new Settlement.Fenced(current));
    assertThat(t.renew(PAY, stale, MIN, now)).isEqualTo(new Settlement.Fenced(current));
    assertThat(t.release(PAY, stale, now)).isEqualTo(new Settlement.Fenced(current));
    assertThat(t.complete(PAY, current, utf8("ok"), now)).isEqualTo(new Settlement.Done(0));
    assertThat(acquire(PAY, FP)).isInstanceOf(Acquisition.Completed.class);
  }

  @Test
  void aCompletedKeyReplaysItsResponseUntilItsRetentionEnds() {
    long tk = ((Acquisition.Acquired) acquire(PAY, FP)).token();
    t.complete(PAY, tk, utf8("receipt"), now);
    long completedAt = now;
    now += DAY;
    Acquisition a = acquire(PAY, FP);
    assertThat(a).isInstanceOf(Acquisition.Completed.class);
    assertThat(((Acquisition.Completed) a).response()).isEqualTo(utf8("receipt"));
    assertThat(((Acquisition.Completed) a).completedAt()).isEqualTo(completedAt);
    now += 1;
    assertThat(acquire(PAY, FP)).isInstanceOf(Acquisition.Acquired.class);
  }

  @Test
  void anotherFingerprintIsAMismatchAndChangesNothing() {
    acquire(PAY, FP);
    String before = t.digest();
    assertThat(acquire(PAY, new byte[] {9})).isEqualTo(new Acquisition.Mismatch());
    assertThat(t.digest()).isEqualTo(before);
  }

  @Test
  void aReleasedKeyCanBeAcquiredAgainAtOnce() {
    long tk = ((Acquisition.Acquired) acquire(PAY, FP)).token();
    assertThat(t.release(PAY, tk, now)).isEqualTo(new Settlement.Done(0));
    assertThat(t.size()).isZero();
    assertThat(acquire(PAY, FP)).isInstanceOf(Acquisition.Acquired.class);
  }

  @Test
  void renewMovesTheDeadlineSoThatNoTakeoverHappens() {
    long tk = ((Acquisition.Acquired) acquire(PAY, FP)).token();
    now += MIN - 1;
    assertThat(t.renew(PAY, tk, MIN, now)).isEqualTo(new Settlement.Done(now + MIN));
    now += MIN - 1;
    assertThat(acquire(PAY, FP)).isInstanceOf(Acquisition.InProgress.class);
  }

  @Test
  void theOwnerMayStillCompleteAfterItsDeadlineIfNobodyTookOver() {
    long tk = ((Acquisition.Acquired) acquire(PAY, FP)).token();
    now += 10 * MIN;
    assertThat(t.complete(PAY, tk, utf8("slow"), now)).isEqualTo(new Settlement.Done(0));
  }

  @Test
  void aTokenHoldsItsKeyUpToItsDeadlineInclusiveWhetherOrNotItCompleted() {
    long tk = ((Acquisition.Acquired) acquire(PAY, FP)).token();
    long deadline = now + MIN;
    assertThat(t.holds(PAY, tk, deadline)).isTrue();
    assertThat(t.holds(PAY, tk, deadline + 1)).as("nobody took over, yet past it").isFalse();
    assertThat(t.holds(PAY, tk)).as("the token alone, formats 5 to 7").isTrue();
    assertThat(t.holds(PAY, tk + 1, now)).isFalse();
    assertThat(t.holds(new KeyId("tenant-a", "other"), tk, now)).isFalse();
    t.complete(PAY, tk, utf8("done"), now);
    assertThat(t.holds(PAY, tk, deadline)).isTrue();
    assertThat(t.holds(PAY, tk, deadline + 1)).isFalse();
  }

  @Test
  void anUnfinishedRecordExpiresOneRetentionAfterItsDeadline() {
    acquire(PAY, FP);
    now += MIN + DAY;
    assertThat(t.expire(now)).isZero();
    now += 1;
    assertThat(t.expire(now)).isEqualTo(1);
    assertThat(t.currentToken(PAY)).isZero();
  }

  @Test
  void scopesSeparateKeys() {
    acquire(PAY, FP);
    assertThat(acquire(new KeyId("tenant-b", "payment-42"), new byte[] {7}))
        .isInstanceOf(Acquisition.Acquired.class);
  }

  @Test
  void boundsAreCheckedWithAClearReasonAndChangeNothing() {
    String before = t.digest();
    assertThat(acquire(new KeyId("s", "k".repeat(256)), FP))
        .isEqualTo(new Acquisition.Invalid("key is 256 characters, the limit is 255"));
    assertThat(acquire(new KeyId("s", ""), FP)).isInstanceOf(Acquisition.Invalid.class);
    assertThat(t.acquire(PAY, FP, MIN, 8 * DAY, ++token, now))
        .isInstanceOf(Acquisition.Invalid.class);
    assertThat(t.acquire(PAY, new byte[65], MIN, DAY, ++token, now))
        .isInstanceOf(Acquisition.Invalid.class);
    assertThat(t.digest()).isEqualTo(before);
    long tk = ((Acquisition.Acquired) acquire(PAY, FP)).token();
    before = t.digest();
    assertThat(t.complete(PAY, tk, new byte[64 * 1024 + 1], now))
        .isInstanceOf(Settlement.Invalid.class);
    assertThat(t.renew(PAY, tk, 0, now)).isInstanceOf(Settlement.Invalid.class);
    assertThat(t.digest()).isEqualTo(before);
  }

  @Test
  void aTokenThatDoesNotGrowIsTheCallersBug() {
    acquire(PAY, FP);
    assertThatThrownBy(() -> t.acquire(new KeyId("s", "other"), FP, MIN, DAY, token, now))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aSnapshotRestoresTheSameStateAndRefusesCorruption() throws IOException {
    long tk = ((Acquisition.Acquired) acquire(PAY, FP)).token();
    t.complete(PAY, tk, utf8("r"), now);
    acquire(new KeyId("s", "held"), FP);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    t.writeSnapshot(out);
    byte[] bytes = out.toByteArray();
    KeyTable back = KeyTable.readSnapshot(new ByteArrayInputStream(bytes));
    assertThat(back.digest()).isEqualTo(t.digest());
    assertThat(back.size()).isEqualTo(2);
    // The restored table goes on exactly as the original would.
    now += MIN + 1;
    Acquisition a = back.acquire(new KeyId("s", "held"), FP, MIN, DAY, ++token, now);
    assertThat(t.acquire(new KeyId("s", "held"), FP, MIN, DAY, token, now)).isEqualTo(a);
    for (int i = 0; i < bytes.length; i++) {
      byte[] flipped = bytes.clone();
      flipped[i] ^= 0x20;
      assertThatThrownBy(() -> KeyTable.readSnapshot(new ByteArrayInputStream(flipped)))
          .as("flipped byte %d", i)
          .isInstanceOf(IOException.class);
    }
    assertThatThrownBy(
            () -> KeyTable.readSnapshot(new ByteArrayInputStream(bytes, 0, bytes.length - 1)))
        .isInstanceOf(IOException.class);
  }

  @Test
  void equalTablesHaveEqualDigestsWhateverTheirHistoryAndSnapshotsKeepTheTablesOrder()
      throws IOException {
    // Table a: three keys, acquired out of key order. Table b: the same three, with the same
    // tokens and times, after 2,000 other keys came and went (its hash map grew and emptied).
    // Table c: the same three after a key acquired before them was released, which moved the last
    // record into its slot: c holds them in another order.
    KeyTable a = new KeyTable(KeyTable.Bounds.DEFAULTS);
    KeyTable b = new KeyTable(KeyTable.Bounds.DEFAULTS);
    KeyTable c = new KeyTable(KeyTable.Bounds.DEFAULTS);
    KeyId gone = new KeyId("other", "first");
    c.acquire(gone, FP, MIN, DAY, 1, now);
    long tk = 2;
    for (int i = 0; i < 2_000; i++) {
      KeyId other = new KeyId("other", "k" + i);
      b.acquire(other, FP, MIN, DAY, tk, now);
      assertThat(b.release(other, tk++, now)).isEqualTo(new Settlement.Done(0));
    }
    for (String k : List.of("k3", "k1", "k2")) {
      KeyId id = new KeyId("s", k);
      for (KeyTable t : List.of(a, b, c)) {
        t.acquire(id, FP, MIN, DAY, tk, now);
        if (!k.equals("k2")) {
          t.complete(id, tk, utf8("r" + k), now);
        }
      }
      tk++;
    }
    assertThat(c.release(gone, 1, now)).isEqualTo(new Settlement.Done(0));

    byte[] fromA = snapshot(a);
    byte[] fromC = snapshot(c);
    assertThat(snapshotOfFrozen(b)).isEqualTo(snapshot(b)).isEqualTo(fromA);
    // In the table's order: a and b in the order of acquisition, c with k2 moved to the front.
    assertThat(order(fromA, "k1", "k2", "k3")).containsExactly("k3", "k1", "k2");
    assertThat(order(fromC, "k1", "k2", "k3")).containsExactly("k2", "k3", "k1");
    assertThat(fromC).hasSameSizeAs(fromA).isNotEqualTo(fromA);
    // One digest for all three, frozen or not, and for the tables read back from either snapshot.
    assertThat(List.of(b.digest(), c.digest(), b.freeze().digest(), c.freeze().digest()))
        .containsOnly(a.digest());
    KeyTable fromReadC = KeyTable.readSnapshot(new ByteArrayInputStream(fromC));
    assertThat(fromReadC.digest()).isEqualTo(a.digest());
    assertThat(KeyTable.readSnapshot(new ByteArrayInputStream(fromA)).digest())
        .isEqualTo(a.digest());
    // A table read from a snapshot keeps its order: it writes the same bytes again.
    assertThat(snapshot(fromReadC)).isEqualTo(fromC);
    // The digest covers every field: another response is another digest.
    KeyTable d = KeyTable.readSnapshot(new ByteArrayInputStream(fromA));
    KeyId k2 = new KeyId("s", "k2");
    d.complete(k2, tk - 1, utf8("other"), now);
    a.complete(k2, tk - 1, utf8("rk2"), now);
    assertThat(d.digest()).isNotEqualTo(a.digest());
  }

  private static byte[] snapshot(KeyTable t) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    t.writeSnapshot(out);
    return out.toByteArray();
  }

  private static byte[] snapshotOfFrozen(KeyTable t) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    t.freeze().writeSnapshot(out);
    return out.toByteArray();
  }

  /** The given strings in the order in which they appear in {@code bytes}. */
  private static List<String> order(byte[] bytes, String... strings) {
    String text = new String(bytes, StandardCharsets.ISO_8859_1);
    return java.util.Arrays.stream(strings)
        .sorted(java.util.Comparator.comparingInt(text::indexOf))
        .toList();
  }

  @Test
  void aSnapshotWhoseRecordsShareATokenOrAKeyIsRefusedAndVersion1AlsoOutOfKeyOrder()
      throws IOException {
    for (int v : new int[] {1, 2}) {
      assertThatThrownBy(
              () -> KeyTable.readSnapshot(snapshotOf(v, "a", 5, 1_000_000, "b", 5, 1_000_000)))
          .isInstanceOf(SnapshotFormatException.class)
          .hasMessageContaining("token 5");
      // The same token with different expiry times too (the index would tell them apart, and
      // lose one at the next equal time).
      assertThatThrownBy(
              () -> KeyTable.readSnapshot(snapshotOf(v, "a", 5, 1_000_000, "b", 5, 2_000_000)))
          .isInstanceOf(SnapshotFormatException.class)
          .hasMessageContaining("token 5");
      assertThatThrownBy(
              () -> KeyTable.readSnapshot(snapshotOf(v, "a", 5, 1_000_000, "a", 6, 1_000_000)))
          .isInstanceOf(SnapshotFormatException.class)
          .hasMessageContaining("bad key record 1");
      assertThat(KeyTable.readSnapshot(snapshotOf(v, "a", 5, 1_000_000, "b", 6, 1_000_000)).size())
          .isEqualTo(2);
    }
    // Version 1 listed the records in key order, and its reader still checks it; version 2 lists
    // them in the table's order.
    assertThatThrownBy(
            () -> KeyTable.readSnapshot(snapshotOf(1, "b", 5, 1_000_000, "a", 6, 1_000_000)))
        .isInstanceOf(SnapshotFormatException.class)
        .hasMessageContaining("bad key record 1");
    KeyTable unsorted = KeyTable.readSnapshot(snapshotOf(2, "b", 5, 1_000_000, "a", 6, 1_000_000));
    assertThat(unsorted.digest())
        .isEqualTo(
            KeyTable.readSnapshot(snapshotOf(1, "a", 6, 1_000_000, "b", 5, 1_000_000)).digest());
  }

  /**
   * A key table snapshot of two in-progress records in the given format version, written field by
   * field as the table does.
   */
  private static ByteArrayInputStream snapshotOf(
      int version, String k1, long t1, long deadline1, String k2, long t2, long deadline2)
      throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    SnapshotEncoder e = new SnapshotEncoder(out::write);
    KeyTable.Bounds b = KeyTable.Bounds.DEFAULTS;
    e.putInt(0x49444b59);
    e.putInt(version);
    e.putInt(b.maxKeyChars());
    e.putInt(b.maxFingerprintBytes());
    e.putInt(b.maxResponseBytes());
    e.putLong(b.maxRetentionMs());
    e.putLong(Math.max(t1, t2));
    e.putInt(2);
    for (Object[] r : new Object[][] {{k1, t1, deadline1}, {k2, t2, deadline2}}) {
      e.putBytes(utf8("s"));
      e.putBytes(utf8((String) r[0]));
      e.putBytes(FP);
      e.putLong((Long) r[1]);
      e.putLong((Long) r[2]); // deadline
      e.putLong(DAY); // retention
      e.putLong(0); // completed at
      e.putBytes(null); // response: in progress
    }
    e.finish();
    return new ByteArrayInputStream(out.toByteArray());
  }

  @Test
  void aFullTableRefusesNewKeysButNotTakeoversAndExpiryMakesRoom() throws IOException {
    KeyTable.Capacity two = new KeyTable.Capacity(2, Long.MAX_VALUE);
    KeyId a = new KeyId("s", "a");
    KeyId b = new KeyId("s", "b");
    KeyId c = new KeyId("s", "c");
    assertThat(t.acquire(a, FP, MIN, DAY, ++token, now, two))
        .isInstanceOf(Acquisition.Acquired.class);
    assertThat(t.acquire(b, FP, 1, 10, ++token, now, two)).isInstanceOf(Acquisition.Acquired.class);
    long before = token;
    Acquisition full = t.acquire(c, FP, MIN, DAY, ++token, now, two);
    assertThat(full).isInstanceOf(Acquisition.Full.class);
    assertThat(((Acquisition.Full) full).reason()).contains("2 records");
    assertThat(t.size()).isEqualTo(2);
    assertThat(t.currentToken(c)).isZero();
    // A takeover of b adds no record: allowed while full.
    now += 2;
    Acquisition taken = t.acquire(b, FP, MIN, DAY, ++token, now, two);
    assertThat(taken).isInstanceOf(Acquisition.Acquired.class);
    assertThat(((Acquisition.Acquired) taken).takeover()).isTrue();
    assertThat(token).isGreaterThan(before);
    // Once a record expires, a new key fits again.
    assertThat(t.release(b, token, now)).isEqualTo(new Settlement.Done(0));
    assertThat(t.acquire(c, FP, MIN, DAY, ++token, now, two))
        .isInstanceOf(Acquisition.Acquired.class);
  }

  @Test
  void theByteBudgetCountsKeysFingerprintsAndResponsesAndSurvivesASnapshot() throws IOException {
    KeyId a = new KeyId("s", "a"); // 2 chars: 4 bytes, plus a 3-byte fingerprint
    assertThat(t.acquire(a, FP, MIN, DAY, ++token, now, KeyTable.Capacity.UNLIMITED))
        .isInstanceOf(Acquisition.Acquired.class);
    assertThat(t.bytes()).isEqualTo(7);
    assertThat(t.complete(a, token, new byte[100], now)).isEqualTo(new Settlement.Done(0));
    assertThat(t.bytes()).isEqualTo(107);
    KeyTable.Capacity tight = new KeyTable.Capacity(1_000, 110);
    assertThat(t.acquire(new KeyId("s", "b"), FP, MIN, DAY, ++token, now, tight))
        .isInstanceOf(Acquisition.Full.class);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    t.writeSnapshot(out);
    KeyTable restored = KeyTable.readSnapshot(new ByteArrayInputStream(out.toByteArray()));
    assertThat(restored.bytes()).isEqualTo(107);
    now += DAY + 1;
    assertThat(t.expire(now)).isEqualTo(1);
    assertThat(t.bytes()).isZero();
  }

  Acquisition acquireAs(String owner, KeyId id, KeyTable.Capacity quota) {
    return t.acquire(id, FP, MIN, DAY, ++token, now, KeyTable.Capacity.UNLIMITED, owner, quota);
  }

  @Test
  void aNewRecordIsChargedToItsOwnerAndRefusedPastTheOwnersQuota() {
    KeyTable.Capacity two = new KeyTable.Capacity(2, Long.MAX_VALUE);
    assertThat(acquireAs("alice", new KeyId("a", "1"), two))
        .isInstanceOf(Acquisition.Acquired.class);
    assertThat(acquireAs("alice", new KeyId("a", "2"), two))
        .isInstanceOf(Acquisition.Acquired.class);
    String before = t.digest();
    Acquisition over = acquireAs("alice", new KeyId("a", "3"), two);
    assertThat(over).isInstanceOf(Acquisition.OverQuota.class);
    assertThat(((Acquisition.OverQuota) over).reason()).contains("alice", "2 records");
    assertThat(t.digest()).isEqualTo(before);
    assertThat(acquireAs("bob", new KeyId("a", "3"), two)).isInstanceOf(Acquisition.Acquired.class);
    // A completion adds its response to the owner's bytes; a release gives the record back.
    long aliceBytes = t.usageOf("alice").bytes();
    long t1 = t.currentToken(new KeyId("a", "1"));
    assertThat(t.complete(new KeyId("a", "1"), t1, new byte[100], now))
        .isInstanceOf(Settlement.Done.class);
    assertThat(t.usageOf("alice").bytes()).isEqualTo(aliceBytes + 100);
    long t2 = t.currentToken(new KeyId("a", "2"));
    assertThat(t.release(new KeyId("a", "2"), t2, now)).isInstanceOf(Settlement.Done.class);
    assertThat(t.usageOf("alice").records()).isEqualTo(1);
    assertThat(acquireAs("alice", new KeyId("a", "4"), two))
        .isInstanceOf(Acquisition.Acquired.class);
    // Expiry gives everything back.
    now += 3 * DAY;
    t.expire(now);
    assertThat(t.usageOf("alice").records()).isZero();
    assertThat(t.usageOf("bob").bytes()).isZero();
  }

  @Test
  void ownersAreInTheSnapshotFromVersion3AndATableWithoutOwnersIsWrittenAsVersion2()
      throws IOException {
    acquire(PAY, FP);
    ByteArrayOutputStream unowned = new ByteArrayOutputStream();
    t.writeSnapshot(unowned);
    assertThat(unowned.toByteArray()[7]).as("version 2").isEqualTo((byte) 2);
    acquireAs("alice", new KeyId("a", "1"), null);
    ByteArrayOutputStream owned = new ByteArrayOutputStream();
    t.writeSnapshot(owned);
    assertThat(owned.toByteArray()[7]).as("version 3").isEqualTo((byte) 3);
    KeyTable back = KeyTable.readSnapshot(new ByteArrayInputStream(owned.toByteArray()));
    assertThat(back.digest()).isEqualTo(t.digest());
    assertThat(back.usageOf("alice").records()).isEqualTo(1);
    assertThat(back.usageOf("alice").bytes()).isEqualTo(t.usageOf("alice").bytes());
    assertThat(t.freeze().snapshotBytes()).isEqualTo(owned.size());
    ByteArrayOutputStream frozen = new ByteArrayOutputStream();
    t.freeze().writeSnapshot(frozen);
    assertThat(frozen.toByteArray()).isEqualTo(owned.toByteArray());
  }
}
