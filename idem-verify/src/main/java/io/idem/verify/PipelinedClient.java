package io.idem.verify;

import io.idem.client.IdemClient;
import java.nio.charset.StandardCharsets;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * An appending or incrementing client with {@code window} calls in flight. An unknown outcome that
 * is not a timeout (the session was lost, or the client fenced or closed) retires the client: the
 * next calls go to a new client, a new session, under a new process name.
 */
final class PipelinedClient implements Runnable {
  private final Workloads w;
  private final Campaign.Settings settings;
  private final long end;
  private final int id;
  private final boolean appender;

  /**
   * Client {@code id} of the workloads {@code w}.
   *
   * @param appender appends unique elements to the lists if true, increments the counters if false
   */
  PipelinedClient(Workloads w, int id, boolean appender) {
    this.w = w;
    this.settings = w.settings;
    this.end = w.end;
    this.id = id;
    this.appender = appender;
  }

  @Override
  public void run() {
    Random r = w.random(id);
    Semaphore slots = new Semaphore(settings.window());
    AtomicBoolean broken = new AtomicBoolean();
    Workloads.Life life = w.life(id);
    long seq = 0;
    long element = (long) id * 1_000_000_000L;
    try {
      while (System.nanoTime() < end) {
        if (!slots.tryAcquire(100, TimeUnit.MILLISECONDS)) {
          continue;
        }
        if (broken.get()) {
          slots.release();
          drain(slots);
          life.renew();
          broken.set(false);
          continue;
        }
        String process = life.process();
        String key =
            appender
                ? "list/" + r.nextInt(Workloads.LISTS)
                : "counter/" + r.nextInt(Workloads.COUNTERS);
        long value = appender ? ++element : 1;
        long s = ++seq;
        long start = w.now();
        issue(life.current(), key, value)
            .whenComplete(
                (result, e) -> {
                  Throwable cause = e == null ? null : Workloads.unwrap(e);
                  Op.Outcome o = cause == null ? Op.Outcome.OK : Op.Outcome.INFO;
                  if (cause != null && !Workloads.deadlinePassed(cause)) {
                    broken.set(true);
                  }
                  w.record(
                      process,
                      appender ? Op.Fn.APPEND : Op.Fn.INCR,
                      key,
                      value,
                      0,
                      s,
                      start,
                      o,
                      appender ? null : result);
                  slots.release();
                });
      }
      drain(slots);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      life.close();
    }
  }

  private void drain(Semaphore slots) throws InterruptedException {
    if (slots.tryAcquire(settings.window(), 90, TimeUnit.SECONDS)) {
      slots.release(settings.window());
    }
  }

  /**
   * One call. In the negative control a timed-out call is sent again as a new call with a new
   * number, until one is answered or the campaign ends: plain at-least-once retry logic.
   */
  private CompletableFuture<Long> issue(IdemClient client, String key, long value) {
    CompletableFuture<Long> call =
        appender
            ? client.appendAsync(key, Long.toString(value).getBytes(StandardCharsets.UTF_8))
            : client.incrementAsync(key, value);
    if (!settings.atLeastOnce()) {
      return call;
    }
    return call.handle(
            (v, e) -> {
              if (e != null
                  && Workloads.deadlinePassed(Workloads.unwrap(e))
                  && System.nanoTime() < end) {
                // Off the client's I/O thread: a new call may wait for a window slot.
                return CompletableFuture.supplyAsync(() -> 0, w.resender)
                    .thenCompose(x -> issue(client, key, value));
              }
              return e == null
                  ? CompletableFuture.completedFuture(v)
                  : CompletableFuture.<Long>failedFuture(Workloads.unwrap(e));
            })
        .thenCompose(f -> f);
  }
}
