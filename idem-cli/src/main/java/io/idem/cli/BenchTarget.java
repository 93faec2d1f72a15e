package io.idem.cli;

import java.util.concurrent.CompletableFuture;

/** What {@code idem bench} drives: a system that takes one write per call. */
interface BenchTarget extends AutoCloseable {
  /** The name in the report and its JSON line. */
  String name();

  /** Issues write {@code n} of {@code session}; completes when it is acknowledged. */
  CompletableFuture<?> op(int session, long n);

  /** Requests resent so far (0 where the target does not retry). */
  long retries();

  /** Answers that were saved answers of earlier copies (0 where there are none). */
  long duplicates();

  @Override
  void close();
}
