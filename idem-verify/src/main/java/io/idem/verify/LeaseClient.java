package io.idem.verify;

import io.idem.client.DuplicateLeaseException;
import io.idem.client.IdemClient;
import io.idem.client.IdemException;
import io.idem.client.LeaseNotFoundException;
import java.time.Duration;
import java.util.Random;

/**
 * A lease client's loop: grant one of two names for 1.5 s; while it holds it, renew it a few times
 * a third of the TTL apart; then revoke it, or let it go (stop renewing). Names another client
 * holds are tried again after a moment.
 */
final class LeaseClient implements Runnable {
  private static final int LEASES = 2;
  private static final long LEASE_TTL_MS = 1_500;

  private final Workloads w;
  private final long end;
  private final int id;

  LeaseClient(Workloads w, int id) {
    this.w = w;
    this.end = w.end;
    this.id = id;
  }

  @Override
  public void run() {
    Random r = w.random(id);
    try (Workloads.Life life = w.life(id)) {
      while (System.nanoTime() < end) {
        IdemClient client = life.current();
        String process = life.process();
        String name = "lease/" + r.nextInt(LEASES);
        Op.Fn f = Op.Fn.GRANT;
        long start = w.now();
        try {
          long expiry = client.grantLease(name, Duration.ofMillis(LEASE_TTL_MS));
          w.record(process, f, name, LEASE_TTL_MS, 0, start, Op.Outcome.OK, expiry);
          boolean held = true;
          for (int k = r.nextInt(4); k > 0 && held && System.nanoTime() < end; k--) {
            Thread.sleep(LEASE_TTL_MS / 3);
            f = Op.Fn.RENEW;
            start = w.now();
            try {
              long e = client.keepAliveLease(name);
              w.record(process, f, name, LEASE_TTL_MS, 0, start, Op.Outcome.OK, e);
            } catch (LeaseNotFoundException gone) {
              w.record(process, f, name, LEASE_TTL_MS, 0, start, Op.Outcome.FAIL, null);
              held = false;
            }
          }
          if (held && r.nextInt(10) < 7) {
            f = Op.Fn.REVOKE;
            start = w.now();
            try {
              long at = client.revokeLease(name);
              w.record(process, f, name, 0, 0, start, Op.Outcome.OK, at);
            } catch (LeaseNotFoundException gone) {
              w.record(process, f, name, 0, 0, start, Op.Outcome.FAIL, null);
            }
          }
        } catch (DuplicateLeaseException taken) {
          w.record(process, f, name, LEASE_TTL_MS, 0, start, Op.Outcome.FAIL, null);
          Thread.sleep(20 + r.nextInt(80));
        } catch (IdemException e) {
          w.record(
              process,
              f,
              name,
              f == Op.Fn.REVOKE ? 0 : LEASE_TTL_MS,
              0,
              start,
              Op.Outcome.INFO,
              null);
          life.after(e);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
