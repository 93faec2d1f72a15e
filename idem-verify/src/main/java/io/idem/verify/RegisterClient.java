package io.idem.verify;

import io.idem.client.IdemClient;
import io.idem.client.IdemException;
import io.idem.client.KeyValue;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Random;

/**
 * A register client's loop: linearizable reads, writes of unique values, and compare-and-sets at
 * the version its last read saw, on a few keys, one call at a time.
 */
final class RegisterClient implements Runnable {
  private static final int REGISTERS = 2;

  private final Workloads w;
  private final long end;
  private final int id;

  RegisterClient(Workloads w, int id) {
    this.w = w;
    this.end = w.end;
    this.id = id;
  }

  @Override
  public void run() {
    Random r = w.random(id);
    long unique = (long) id * 1_000_000_000L;
    Map<String, Long> lastVersion = new HashMap<>();
    try (Workloads.Life life = w.life(id)) {
      while (System.nanoTime() < end) {
        IdemClient client = life.current();
        String process = life.process();
        String key = "register/" + r.nextInt(REGISTERS);
        int kind = r.nextInt(10);
        long start = w.now();
        long v = ++unique;
        try {
          if (kind < 4) {
            Optional<KeyValue> kv = client.get(key);
            lastVersion.put(key, kv.map(KeyValue::version).orElse(0L));
            Long value = kv.map(x -> Long.parseLong(x.valueAsString())).orElse(null);
            w.record(process, Op.Fn.READ, key, 0, 0, start, Op.Outcome.OK, value);
          } else if (kind < 7) {
            client.put(key, Long.toString(v));
            w.record(process, Op.Fn.WRITE, key, v, 0, start, Op.Outcome.OK, null);
          } else {
            long expected = lastVersion.getOrDefault(key, 0L);
            boolean done =
                client
                    .compareAndSet(key, expected, Long.toString(v).getBytes(StandardCharsets.UTF_8))
                    .written();
            w.record(
                process,
                Op.Fn.CAS,
                key,
                v,
                expected,
                start,
                done ? Op.Outcome.OK : Op.Outcome.FAIL,
                null);
          }
        } catch (IdemException e) {
          if (kind >= 4) { // a read that failed tells nothing; a write or cas may have happened
            w.record(
                process,
                kind < 7 ? Op.Fn.WRITE : Op.Fn.CAS,
                key,
                v,
                lastVersion.getOrDefault(key, 0L),
                start,
                Op.Outcome.INFO,
                null);
          }
          life.after(e);
        }
      }
    }
  }
}
