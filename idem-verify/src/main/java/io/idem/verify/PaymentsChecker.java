package io.idem.verify;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The keys campaign's checker: once the workers stopped and the settling pass completed every
 * payment it could, it reads the ledgers and key records back and compares them with the workers'
 * answers.
 */
final class PaymentsChecker {
  /** A worker's answer for payment {@code i}, from its journal. */
  record Ack(long i, String response, int worker) {}

  private final int accounts;
  private final PaymentStore.Capabilities caps;

  PaymentsChecker(int accounts, PaymentStore.Capabilities caps) {
    this.accounts = accounts;
    this.caps = caps;
  }

  /**
   * Adds to {@code out} what the store's records and the workers' answers show: a payment paid
   * twice (DUPLICATE), an entry nobody wrote (PHANTOM), a payment of the first {@code started + 1}
   * without a completed key or a ledger entry, or whose answer differs from the stored one (LOST),
   * and a write under a token that did not complete the key (STALE_WRITE). Reads through {@code
   * backend}; compares only what the store's {@link PaymentStore.Capabilities} say it keeps.
   */
  void check(PaymentBackend backend, long started, List<Ack> acks, List<Violation> out) {
    // Ledger entries by payment: i -> tags of its entries (tokens, or seed 001's payers).
    Map<Long, List<Long>> entries = new HashMap<>();
    for (int a = 0; a < accounts; a++) {
      for (String e : backend.ledger(a)) {
        String[] f = e.split(":");
        long i = Long.parseLong(f[0]);
        Payment p = Payment.of(i, accounts);
        if (p.account() != a || Long.parseLong(f[1]) != p.amount()) {
          out.add(
              new Violation(
                  Violation.Kind.PHANTOM, "ledger/" + a, "an entry nobody wrote: " + f[0]));
        }
        entries.computeIfAbsent(i, k -> new ArrayList<>()).add(Long.parseLong(f[2]));
      }
    }
    Map<Long, String> stored = new HashMap<>();
    for (long i = 0; i <= started; i++) {
      Payment p = Payment.of(i, accounts);
      String key = p.key();
      Optional<PaymentBackend.KeyState> r = backend.key(p);
      List<Long> tags = entries.getOrDefault(i, List.of());
      if (tags.size() > 1) {
        out.add(
            new Violation(
                Violation.Kind.DUPLICATE,
                key,
                "paid "
                    + tags.size()
                    + " times, "
                    + (caps.tokens() ? "tokens " : "payers (process ids) ")
                    + tags));
      }
      if (r.isEmpty() || !r.get().completed()) {
        out.add(new Violation(Violation.Kind.LOST, key, "no completed key record"));
        continue;
      }
      if (tags.isEmpty()) {
        out.add(new Violation(Violation.Kind.LOST, key, "completed, but no ledger entry"));
      }
      if (caps.responses()) {
        stored.put(i, r.get().response());
      }
      if (!caps.tokens()) {
        continue;
      }
      long token = r.get().token();
      // The answer names the token the payment was made under: the completing owner's, or, where
      // a takeover owner reconciled (a fenced ledger), the earlier owner's whose entry it found.
      long paidUnder = caps.responses() ? Payment.tagOf(r.get().response()) : token;
      for (long t : tags) {
        if (t != paidUnder) {
          out.add(
              new Violation(
                  Violation.Kind.STALE_WRITE,
                  key,
                  "a ledger entry of token "
                      + t
                      + "; the key was completed under "
                      + token
                      + (paidUnder == token ? "" : ", answering for token " + paidUnder)));
        }
      }
      if (caps.statusRecords()) {
        long statusToken = backend.statusToken(i).orElse(-1L);
        if (statusToken != token) {
          out.add(
              new Violation(
                  Violation.Kind.STALE_WRITE,
                  "payment/" + i,
                  "status written by token " + statusToken + "; completed under " + token));
        }
      }
    }
    if (!caps.responses()) {
      return; // nothing to compare the answers with
    }
    for (Ack a : acks) {
      String want = stored.get(a.i());
      if (!a.response().equals(want)) {
        out.add(
            new Violation(
                Violation.Kind.LOST,
                PaymentWorker.key(a.i()),
                "worker " + a.worker() + " answered \"" + a.response() + "\"; stored: " + want));
      }
    }
  }
}
