package io.idem.client.internal;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.proto.Increment;
import io.idem.proto.Operation;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The identity journal survives restarts, forgets answered requests, and tolerates a torn tail. */
class IdentityJournalTest {
  @TempDir Path dir;

  private static Operation incr(int i) {
    return Operation.newBuilder()
        .setIncrement(Increment.newBuilder().setKey("k" + i).setDelta(i))
        .build();
  }

  private static Map<Long, Operation> sent(long from, long to) {
    Map<Long, Operation> m = new LinkedHashMap<>();
    for (long s = from; s <= to; s++) {
      m.put(s, incr((int) s));
    }
    return m;
  }

  @Test
  void reopenedJournalHasIdentityAndUnansweredRequests() throws Exception {
    Path file = dir.resolve("w.id");
    try (IdentityJournal j = IdentityJournal.open(file)) {
      j.pendingRegistration("w", 99, 60_000);
      j.identity(new IdentityJournal.Identity("w", 4096, 7, 8, 60_000));
      j.sent(sent(1, 5));
      j.done(2);
      j.done(4);
      j.sync();
    }
    try (IdentityJournal j = IdentityJournal.open(file)) {
      assertThat(j.identity()).isEqualTo(new IdentityJournal.Identity("w", 4096, 7, 8, 60_000));
      assertThat(j.pending()).isNull();
      assertThat(j.outstandingNumbers()).containsExactly(1L, 3L, 5L);
      assertThat(j.outstanding().get(3L)).isEqualTo(incr(3));
    }
  }

  @Test
  void pendingRegistrationSurvivesACrashBeforeTheAnswer() throws Exception {
    Path file = dir.resolve("w.id");
    try (IdentityJournal j = IdentityJournal.open(file)) {
      j.pendingRegistration("w", 1234, 60_000);
    }
    try (IdentityJournal j = IdentityJournal.open(file)) {
      assertThat(j.identity()).isNull();
      assertThat(j.pending()).isEqualTo(new IdentityJournal.Pending("w", 1234, 60_000));
    }
  }

  @Test
  void aPendingRegistrationKeepsTheSecretItChose() throws Exception {
    Path file = dir.resolve("w.id");
    try (IdentityJournal j = IdentityJournal.open(file)) {
      j.pendingRegistration("w", 1234, 60_000, 0x1111L, 0x2222L);
    }
    try (IdentityJournal j = IdentityJournal.open(file)) {
      assertThat(j.pending())
          .isEqualTo(new IdentityJournal.Pending("w", 1234, 60_000, 0x1111L, 0x2222L));
    }
    // Open rewrote it; it reads back the same again.
    try (IdentityJournal j = IdentityJournal.open(file)) {
      assertThat(j.pending().secretHi()).isEqualTo(0x1111L);
    }
  }

  @Test
  void tornTailIsIgnoredAndEverythingBeforeItKept() throws Exception {
    Path file = dir.resolve("w.id");
    try (IdentityJournal j = IdentityJournal.open(file)) {
      j.identity(new IdentityJournal.Identity("w", 1, 2, 3, 60_000));
      j.sent(sent(1, 3));
    }
    long size = Files.size(file);
    try (RandomAccessFile raf = new RandomAccessFile(file.toFile(), "rw")) {
      raf.setLength(size - 3); // the last record is cut short, as by a crash mid-write
    }
    try (IdentityJournal j = IdentityJournal.open(file)) {
      assertThat(j.identity()).isNotNull();
      assertThat(j.outstandingNumbers()).containsExactly(1L, 2L);
    }
    // Reopening compacted the file: it now ends at a record boundary and replays the same.
    try (IdentityJournal j = IdentityJournal.open(file)) {
      assertThat(j.outstandingNumbers()).containsExactly(1L, 2L);
    }
  }

  @Test
  void forgetClearsTheSession() throws Exception {
    Path file = dir.resolve("w.id");
    try (IdentityJournal j = IdentityJournal.open(file)) {
      j.identity(new IdentityJournal.Identity("w", 1, 2, 3, 60_000));
      j.sent(sent(1, 2));
      j.forget();
    }
    try (IdentityJournal j = IdentityJournal.open(file)) {
      assertThat(j.identity()).isNull();
      assertThat(j.outstandingNumbers()).isEmpty();
    }
  }
}
