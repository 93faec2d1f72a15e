package io.idem.client;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Renews a lease every interval until it is closed or the lease is lost, as jetcd's {@code
 * keepAlive} does. Built by {@link IdemClient#keepLeaseAlive}. A renewal that fails for a reason
 * that may pass (its outcome unknown, no server within its deadline) is retried at the next
 * interval; the lease is lost when the server says so ({@link LeaseNotFoundException}: it expired
 * or another session holds it), the session that holds it is gone, or the client is closed. Closing
 * stops renewing; it does not revoke the lease. Thread-safe.
 */
public final class LeaseKeepAlive implements AutoCloseable {

  /** Hears of renewals and of the end. Called on the client's worker pool; must not block long. */
  public interface Listener {
    /** The lease was renewed until {@code expiryLogMs} (log time). */
    default void onRenewed(long expiryLogMs) {}

    /** The lease is lost: renewing stopped. */
    default void onLost(IdemException cause) {}
  }

  private final IdemClient client;
  private final String name;
  private final long intervalMs;
  private final Listener listener;
  private final ScheduledExecutorService timer;
  private final CompletableFuture<IdemException> lost = new CompletableFuture<>();
  private final AtomicBoolean ended = new AtomicBoolean();
  private volatile boolean closed;

  LeaseKeepAlive(
      IdemClient client,
      String name,
      Duration interval,
      Listener listener,
      ScheduledExecutorService timer) {
    this.client = client;
    this.name = name;
    this.intervalMs = interval.toMillis();
    this.listener = listener;
    this.timer = timer;
  }

  void start() {
    renew();
  }

  private void renew() {
    if (closed) {
      return;
    }
    client
        .keepAliveLeaseAsync(name)
        .whenComplete(
            (expiry, error) -> {
              if (closed) {
                return;
              }
              if (error == null) {
                listener.onRenewed(expiry);
              } else {
                Throwable t = Outcomes.unwrap(error);
                boolean clientClosed =
                    t instanceof NotSentException n
                        && n.reason() == NotSentException.Reason.CLIENT_CLOSED;
                if (t instanceof LeaseNotFoundException
                    || t instanceof SessionLostException
                    || clientClosed
                    || !(t instanceof IdemException)) {
                  end(t instanceof IdemException e ? e : Outcomes.unexpected(t));
                  return;
                }
              }
              schedule();
            });
  }

  private void schedule() {
    try {
      timer.schedule(this::renew, intervalMs, TimeUnit.MILLISECONDS);
    } catch (RejectedExecutionException e) {
      end(new ClientClosedException("the client's transport was closed", 0, 0, e));
    }
  }

  private void end(IdemException cause) {
    closed = true;
    // The listener hears it before lost() completes, so that whoever waits on lost() finds the
    // listener's work done; once only, whoever ends it first.
    if (ended.compareAndSet(false, true)) {
      try {
        listener.onLost(cause);
      } finally {
        lost.complete(cause);
      }
    }
  }

  /** The lease's name. */
  public String name() {
    return name;
  }

  /** Completes with the reason when the lease is lost; never if it is closed first. */
  public CompletableFuture<IdemException> lost() {
    return lost;
  }

  /** Stops renewing (the lease then expires after its TTL unless revoked). */
  @Override
  public void close() {
    closed = true;
  }
}
