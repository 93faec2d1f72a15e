package io.idem.core;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.core.KeyTable.Acquisition;
import io.idem.core.KeyTable.KeyId;
import io.idem.core.KeyTable.Settlement;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.CharRange;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.StringLength;

/**
 * {@link KeyTable} against a plain reference model, over random operations on a few keys by owners
 * that pause, retry and go stale: the answers agree with the model, tokens only grow, a takeover
 * happens only after the owner's deadline, a stale token never changes anything, a replica restored
 * from a snapshot midway gives the same answers and digest as one that was not, and a frozen copy
 * taken at any step writes the snapshot of that step, whatever happens after it (the table shares
 * its records with frozen copies and copies a record before it changes it).
 */
class KeyTableProperties {
  static final long DAY = 86_400_000;

  /** The model's record of one key. */
  static final class Model {
    byte[] fp;
    long token;
    long deadline;
    long retention;
    byte[] response;
    long completedAt;

    long expiresAt() {
      return (response != null ? completedAt : deadline) + retention;
    }
  }

  @Property(tries = 300)
  void theTableKeepsTheKeyPromises(
      @ForAll long seed,
      @ForAll @IntRange(min = 1, max = 400) int steps,
      @ForAll @IntRange(min = 0, max = 399) int snapshotAt)
      throws IOException {
    Random r = new Random(seed);
    KeyTable table = new KeyTable(KeyTable.Bounds.DEFAULTS);
    KeyTable replica = new KeyTable(KeyTable.Bounds.DEFAULTS);
    Map<KeyId, Model> model = new HashMap<>();
    Map<KeyId, Long> lastTokenSeen = new HashMap<>();
    List<Long> tokensHeld = new ArrayList<>();
    long now = 1_000_000;
    long token = 0;
    byte[][] fps = {{1}, {2}};
    Freezes freezes = new Freezes();
    for (int step = 0; step < steps; step++) {
      if (r.nextInt(8) == 0) {
        freezes.take(table);
      }
      if (step == snapshotAt) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        replica.writeSnapshot(out);
        replica = KeyTable.readSnapshot(new ByteArrayInputStream(out.toByteArray()));
      }
      now += r.nextInt(3) == 0 ? r.nextInt(120_000) : r.nextInt(100);
      KeyId id = new KeyId("s", "k" + r.nextInt(5));
      // The model expires first, as the table does.
      Model m = model.get(id);
      if (m != null && m.expiresAt() < now) {
        model.remove(id);
        m = null;
      }
      int kind = r.nextInt(10);
      if (kind < 4) {
        byte[] fp = fps[r.nextInt(10) == 0 ? 1 : 0];
        long timeout = 1L + r.nextInt(60_000);
        long retention = 1L + r.nextInt(300_000);
        long tk = ++token;
        Acquisition a = table.acquire(id, fp, timeout, retention, tk, now);
        assertThat(replica.acquire(id, fp, timeout, retention, tk, now)).isEqualTo(a);
        if (m != null && !Arrays.equals(m.fp, fp)) {
          assertThat(a).isEqualTo(new Acquisition.Mismatch());
        } else if (m != null && m.response != null) {
          assertThat(a).isInstanceOf(Acquisition.Completed.class);
          assertThat(((Acquisition.Completed) a).response()).isEqualTo(m.response);
        } else if (m != null && m.deadline >= now) {
          assertThat(a).isEqualTo(new Acquisition.InProgress(m.deadline));
        } else {
          assertThat(a).isEqualTo(new Acquisition.Acquired(tk, now + timeout, m != null));
          assertThat(tk).as("tokens only grow").isGreaterThan(lastTokenSeen.getOrDefault(id, 0L));
          lastTokenSeen.put(id, tk);
          if (m == null) {
            m = new Model();
            m.fp = fp;
            model.put(id, m);
          }
          m.token = tk;
          m.deadline = now + timeout;
          m.retention = retention;
          tokensHeld.add(tk);
        }
      } else {
        // An owner acts with a token it once held: the current one, or a stale one.
        long tk = tokensHeld.isEmpty() ? 1 : tokensHeld.get(r.nextInt(tokensHeld.size()));
        boolean owns = m != null && m.response == null && m.token == tk;
        Settlement s;
        Settlement again;
        if (kind < 7) {
          byte[] response = {(byte) step};
          s = table.complete(id, tk, response, now);
          again = replica.complete(id, tk, response, now);
          if (owns) {
            m.response = response;
            m.completedAt = now;
          }
        } else if (kind < 9) {
          long ext = 1L + r.nextInt(60_000);
          s = table.renew(id, tk, ext, now);
          again = replica.renew(id, tk, ext, now);
          if (owns) {
            m.deadline = now + ext;
          }
        } else {
          s = table.release(id, tk, now);
          again = replica.release(id, tk, now);
          if (owns) {
            model.remove(id);
          }
        }
        assertThat(again).isEqualTo(s);
        if (owns) {
          assertThat(s).isInstanceOf(Settlement.Done.class);
        } else {
          assertThat(s).as("a stale token changes nothing").isInstanceOf(Settlement.Fenced.class);
        }
      }
      assertThat(replica.digest()).isEqualTo(table.digest());
    }
    // The replica read from a snapshot holds its records in the table's order: the order follows
    // from the commands applied, and a snapshot keeps it, so both write the same bytes.
    ByteArrayOutputStream fromTable = new ByteArrayOutputStream();
    table.writeSnapshot(fromTable);
    ByteArrayOutputStream fromReplica = new ByteArrayOutputStream();
    replica.writeSnapshot(fromReplica);
    assertThat(fromReplica.toByteArray()).isEqualTo(fromTable.toByteArray());
    freezes.check(false);
  }

  /**
   * Many keys, with names in any script, coming and going (released, expired, taken over): a frozen
   * copy taken at any step writes that step's snapshot, states its length exactly before writing
   * it, and gives that step's digest, whether or not it was written first. The table keeps its
   * records packed in an array, each moved when another leaves, and a freeze copies the array.
   */
  @Property(tries = 200)
  void frozenCopiesOfManyKeysWriteTheirStep(
      @ForAll long seed, @ForAll @IntRange(min = 1, max = 1500) int steps) throws IOException {
    Random r = new Random(seed);
    KeyTable table = new KeyTable(KeyTable.Bounds.DEFAULTS);
    String[] names = {"k", "ключ", "鍵", "\uD83D\uDD11", "\uD800", "e\u0301", "\u07FF\u0800"};
    long now = 1_000_000;
    long token = 0;
    List<Long> tokens = new ArrayList<>();
    Freezes freezes = new Freezes();
    for (int step = 0; step < steps; step++) {
      if (r.nextInt(40) == 0) {
        freezes.take(table);
      }
      now += r.nextInt(20) == 0 ? r.nextInt(40_000) : r.nextInt(50);
      KeyId id = new KeyId("t" + r.nextInt(3), names[r.nextInt(names.length)] + r.nextInt(100));
      long tk = tokens.isEmpty() ? 1 : tokens.get(r.nextInt(tokens.size()));
      switch (r.nextInt(4)) {
        case 0, 1 -> {
          table.acquire(
              id,
              new byte[r.nextInt(3)],
              1 + r.nextInt(5_000),
              1 + r.nextInt(30_000),
              ++token,
              now);
          tokens.add(token);
        }
        case 2 -> table.complete(id, tk, new byte[r.nextInt(40)], now);
        default -> table.release(id, tk, now);
      }
    }
    freezes.check(true);
  }

  /**
   * Frozen copies of a table, each with the snapshot and digest the table had when it was taken.
   */
  private static final class Freezes {
    final List<KeyTable.Frozen> frozen = new ArrayList<>();
    final List<byte[]> bytes = new ArrayList<>();
    final List<String> digests = new ArrayList<>();

    void take(KeyTable table) throws IOException {
      ByteArrayOutputStream current = new ByteArrayOutputStream();
      table.writeSnapshot(current);
      bytes.add(current.toByteArray());
      digests.add(table.digest());
      frozen.add(table.freeze());
    }

    /**
     * Each copy writes its step's snapshot, of the length it states first, and gives its step's
     * digest after writing; with {@code digestFirst}, every other copy gives it before any write
     * too (encoded for it).
     */
    void check(boolean digestFirst) throws IOException {
      for (int i = 0; i < frozen.size(); i++) {
        KeyTable.Frozen f = frozen.get(i);
        if (digestFirst && i % 2 == 0) {
          assertThat(f.digest()).isEqualTo(digests.get(i));
        }
        long stated = f.snapshotBytes();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        f.writeSnapshot(out);
        assertThat(out.toByteArray())
            .as("frozen copy %d of %d", i, frozen.size())
            .isEqualTo(bytes.get(i));
        assertThat(stated).isEqualTo(out.size());
        assertThat(f.digest()).isEqualTo(digests.get(i));
      }
    }
  }

  /**
   * The snapshot's length is counted as String.getBytes(UTF_8) encodes, unpaired surrogates too.
   */
  @Property(tries = 2000)
  void utf8LengthIsTheEncodedLength(
      @ForAll @CharRange(from = '\u0000', to = '\uffff') @StringLength(max = 40) String s) {
    assertThat(KeyTableCodec.utf8Length(s)).isEqualTo(s.getBytes(StandardCharsets.UTF_8).length);
  }
}
