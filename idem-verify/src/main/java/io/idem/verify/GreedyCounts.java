package io.idem.verify;

import java.util.Map;
import java.util.TreeMap;

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
}
