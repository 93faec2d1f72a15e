package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.idem.proto.Append;
import io.idem.proto.CompareAndSet;
import io.idem.proto.GrantLease;
import io.idem.proto.Increment;
import io.idem.proto.Put;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * A frozen KV section ({@link KvState#freeze}) shares its entries with the live state until they
 * change: whatever is applied after the freeze, by any operation, through any number of later
 * freezes, the frozen section writes the bytes the state had at its moment, and states their number
 * without writing them.
 */
class KvStateProperties {
  /** Keys and principals of one, two, three and four UTF-8 bytes per character. */
  private static final String[] NAMES = {"k", "ké", "k日本", "k\uD83D\uDE00"};

  private static final Payer OWNER =
      new Payer("ø-owner", Quotas.UNLIMITED, false, 0, Long.MAX_VALUE);

  @Property(tries = 300)
  void aFrozenSectionWritesTheStateOfItsMoment(
      @ForAll @Size(max = 300) List<@IntRange(min = 0, max = 9_999) Integer> actions)
      throws IOException {
    ReplicatedState state = new ReplicatedState();
    KvState kv = state.kv;
    List<StateSection.Frozen> frozen = new ArrayList<>();
    List<byte[]> then = new ArrayList<>();
    long revision = 0;
    for (int n : actions) {
      String key = NAMES[n / 10 % 4] + (n / 40 % 3);
      String lease = "l" + (n / 120 % 3);
      ByteString value = ByteString.copyFromUtf8(Integer.toString(n));
      revision++;
      switch (n % 10) {
        case 0 -> kv.put(revision, Put.newBuilder().setKey(key).setValue(value).build());
        case 1 -> kv.put(revision, Put.newBuilder().setKey(key).setValue(value).build(), OWNER);
        case 2 -> {
          if (state.leases.exists(lease)) {
            kv.put(revision, Put.newBuilder().setKey(key).setValue(value).setLease(lease).build());
          } else {
            state.leases.grant(
                revision, 1, GrantLease.newBuilder().setName(lease).setTtlMs(1_000).build(), 0);
          }
        }
        case 3 -> kv.delete(revision, key);
        case 4 -> kv.append(revision, Append.newBuilder().setKey(key).setValue(value).build());
        case 5 -> {
          long version = kv.get(key).getVersion();
          kv.compareAndSet(
              revision,
              CompareAndSet.newBuilder()
                  .setKey(key)
                  .setExpectedVersion(version)
                  .setValue(value)
                  .build());
        }
        case 6 -> kv.increment(revision, Increment.newBuilder().setKey(key).setDelta(n).build());
        case 7 -> kv.deleteLeased(lease);
        default -> {
          then.add(bytes(kv::writeSection));
          frozen.add(kv.freeze());
        }
      }
    }
    for (int i = 0; i < frozen.size(); i++) {
      assertThat(frozen.get(i).length()).as("length stated").isEqualTo(then.get(i).length);
      assertThat(bytes(frozen.get(i)::writeSection))
          .as("frozen section %d of %d", i + 1, frozen.size())
          .isEqualTo(then.get(i));
      assertThat(bytes(frozen.get(i)::writeSection)).as("written again").isEqualTo(then.get(i));
    }
  }

  private interface Writer {
    void writeSection(DataOutputStream out) throws IOException;
  }

  private static byte[] bytes(Writer w) throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    DataOutputStream out = new DataOutputStream(bytes);
    w.writeSection(out);
    out.flush();
    return bytes.toByteArray();
  }
}
