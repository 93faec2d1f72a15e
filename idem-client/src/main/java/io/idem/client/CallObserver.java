package io.idem.client;

import io.idem.proto.Operation;

/**
 * Watches the client's calls for its metrics. {@link #NONE} when no meter registry was given, so
 * that Micrometer, an optional dependency, is loaded only by those who use it.
 */
interface CallObserver {

  /** Watches nothing. */
  CallObserver NONE =
      new CallObserver() {
        @Override
        public long started() {
          return 0;
        }

        @Override
        public void finished(Operation.OpCase op, Throwable failure, long started) {}
      };

  /** A call starts; returns what {@link #finished} gets back (its start, in nanoseconds). */
  long started();

  /** The call of {@code op} that {@link #started} at {@code started} ended, failed if non-null. */
  void finished(Operation.OpCase op, Throwable failure, long started);
}
