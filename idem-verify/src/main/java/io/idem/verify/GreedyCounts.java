package io.idem.verify;

import io.idem.client.NoSpaceException;
import io.idem.client.NotSentException;
import io.idem.client.QuotaExceededException;
import io.idem.proto.Code;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What a campaign's greedy client ({@link GreedyClient}) got: its calls answered OK, its refusals
 * at a quota by quota name, its refusals at the backend budget, its never-reading session streams
 * by how they ended, and everything else that went wrong, by exception class or status code.
 *
 * @param successes calls, registrations and late-read stream answers that came back OK
 * @param quotaExceeded {@code QUOTA_EXCEEDED} refusals by the quota they name ({@code sessions},
 *     {@code kv_keys}, ...)
 * @param noSpace {@code NO_SPACE} refusals (the backend budget's alarm)
 * @param streamCutOffs never-reading streams the server ended with {@code RESOURCE_EXHAUSTED}
 * @param streamsNotCut never-reading streams still open when the client gave up on them
 * @param otherErrors every other failure, by exception class or status code
 */
public record GreedyCounts(
    long successes,
    Map<String, Long> quotaExceeded,
    long noSpace,
    long streamCutOffs,
    long streamsNotCut,
    Map<String, Long> otherErrors) {

  /** A campaign without a greedy client. */
  public static final GreedyCounts NONE = new GreedyCounts(0, Map.of(), 0, 0, 0, Map.of());

  /** Copies the maps (toString sorts them by name). */
  public GreedyCounts {
    quotaExceeded = Map.copyOf(quotaExceeded);
    otherErrors = Map.copyOf(otherErrors);
  }

  /** {@code QUOTA_EXCEEDED} refusals over every quota. */
  public long quotaRefusals() {
    return quotaExceeded.values().stream().mapToLong(Long::longValue).sum();
  }

  @Override
  public String toString() {
    return "ok "
        + successes
        + ", QUOTA_EXCEEDED "
        + quotaRefusals()
        + " "
        + new TreeMap<>(quotaExceeded)
        + ", NO_SPACE "
        + noSpace
        + ", never-reading streams cut off "
        + streamCutOffs
        + " (not cut "
        + streamsNotCut
        + "), other errors "
        + new TreeMap<>(otherErrors);
  }

  /** The counts as a greedy client gathers them, from any thread. */
  static final class Tally {
    private static final Pattern QUOTA_NAME = Pattern.compile("quota (\\w+)");

    private final LongAdder successes = new LongAdder();
    private final Map<String, LongAdder> quota = new ConcurrentHashMap<>();
    private final LongAdder noSpace = new LongAdder();
    private final LongAdder cutOffs = new LongAdder();
    private final LongAdder notCut = new LongAdder();
    private final Map<String, LongAdder> other = new ConcurrentHashMap<>();

    /** A client call ended: OK if {@code failure} is null. */
    void answered(Throwable failure) {
      Throwable e = Workloads.unwrap(failure);
      if (e == null) {
        successes.increment();
      } else if (e instanceof QuotaExceededException) {
        quota(e.getMessage());
      } else if (e instanceof NoSpaceException) {
        noSpace.increment();
      } else if (e instanceof NotSentException n) {
        other("NotSentException " + n.reason());
      } else {
        other(e.getClass().getSimpleName());
      }
    }

    /** The server answered {@code code}. */
    void refused(Code code, String message) {
      switch (code) {
        case OK -> successes.increment();
        case QUOTA_EXCEEDED -> quota(message);
        case NO_SPACE -> noSpace.increment();
        default -> other(code.name());
      }
    }

    private void quota(String message) {
      Matcher m = QUOTA_NAME.matcher(String.valueOf(message));
      quota.computeIfAbsent(m.find() ? m.group(1) : "?", k -> new LongAdder()).increment();
    }

    void cutOff() {
      cutOffs.increment();
    }

    void notCut() {
      notCut.increment();
    }

    void other(String what) {
      other.computeIfAbsent(what, k -> new LongAdder()).increment();
    }

    GreedyCounts counts() {
      return new GreedyCounts(
          successes.sum(), sums(quota), noSpace.sum(), cutOffs.sum(), notCut.sum(), sums(other));
    }

    private static Map<String, Long> sums(Map<String, LongAdder> m) {
      Map<String, Long> out = new HashMap<>();
      m.forEach((k, v) -> out.put(k, v.sum()));
      return out;
    }
  }
}
