package io.idem.verify;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Random;

/**
 * A store the keys campaign runs on: how to start its servers and what faults they suffer (the
 * campaign side), and how a worker reaches it ({@link PaymentBackend}, the client side). One class
 * per store: {@link IdemPayments} ({@code idem}), {@link RedisPayments} ({@code redis}), {@link
 * PostgresPayments} ({@code postgres}), {@link Seed001Payments} ({@code seed001}, the negative
 * control). Another store plugs in with one class implementing this interface and one line in
 * {@link #named}.
 */
interface PaymentStore {

  /** The stores {@link #named} knows, in the order the command line lists them. */
  List<String> NAMES = List.of("idem", "redis", "redis-cluster", "postgres", "seed001");

  /**
   * The store called {@code name}.
   *
   * @throws IllegalArgumentException for a name not in {@link #NAMES}, naming it
   */
  static PaymentStore named(String name) {
    return switch (name) {
      case "idem" -> new IdemPayments();
      case "redis" -> new RedisPayments(false);
      case "redis-cluster" -> new RedisPayments(true);
      case "postgres" -> new PostgresPayments();
      case "seed001" -> new Seed001Payments();
      default ->
          throw new IllegalArgumentException("no store named " + name + "; stores: " + NAMES);
    };
  }

  /** Its name on the command line and in reports. */
  String name();

  /** What the store's records hold for the checker, and whether it is a negative control. */
  Capabilities capabilities();

  /**
   * What a store's records let the checker compare.
   *
   * @param tokens the store hands out fencing tokens (else the ledger's tags are the payers'
   *     process ids), and the checker compares them
   * @param responses the store keeps each key's response, and the checker compares the answers
   * @param statusRecords each owner writes a status record ({@link PaymentBackend#statusToken}),
   *     and the checker checks it
   * @param expectsViolations the checker must flag this store: it is a negative control (seed 001)
   */
  record Capabilities(
      boolean tokens, boolean responses, boolean statusRecords, boolean expectsViolations) {
    /** Idem: tokens, responses and fenced status records. */
    static final Capabilities IDEM = new Capabilities(true, true, true, false);

    /** A store of the library without fenced writes of its own (Redis, PostgreSQL). */
    static final Capabilities KEY_STORE = new Capabilities(true, true, false, false);

    /** Seed 001: no token, no response, and the violations it is there to show. */
    static final Capabilities SEED_001 = new Capabilities(false, false, false, true);
  }

  /**
   * Refuses {@code writes} other than {@link Writes#FENCED_COMPLETION}, for {@code store}, a store
   * whose only negative control is the store seed001.
   */
  static void requireFencedCompletion(String store, Writes writes) {
    if (writes != Writes.FENCED_COMPLETION) {
      throw new IllegalArgumentException(
          "the "
              + store
              + " store has no unfenced mode; its negative control is the store seed001");
    }
  }

  /** Starts the store's servers, their data and logs under {@code dir}; returns once they serve. */
  Servers start(Path dir) throws Exception;

  /**
   * {@link #start}, with a store that elects a leader electing the next one no sooner than {@code
   * electionTimeout} after it last heard from the one before (Idem: the lower bound of the Raft
   * election timeout, the upper bound 5/3 of it), so that every failover lasts at least that long;
   * zero for the store's default. A store without a leader ignores it.
   */
  default Servers start(Path dir, Duration electionTimeout) throws Exception {
    return start(dir);
  }

  /**
   * The client side over {@code address} (one of {@link Servers}'), making {@code writes}; {@code
   * settler} asks for patience (long timeouts) over speed: the settling pass and the checker, which
   * run without faults.
   *
   * @throws IllegalArgumentException for writes this store does not make (only Idem makes others
   *     than {@link Writes#FENCED_COMPLETION})
   */
  PaymentBackend connect(String address, Writes writes, boolean settler);

  /** The writes of one payment on Idem. Redis and PostgreSQL make their own, as the first. */
  enum Writes {
    /** A fenced status put, then the completion carrying the ledger append: both or neither. */
    FENCED_COMPLETION,
    /**
     * A fenced status put and a fenced ledger append, then a plain completion: each write is
     * refused once the owner's token no longer holds the key, but what landed stays if the
     * completion does not. So an owner that took the key over reconciles first: it reads the
     * ledger, and if an earlier owner's entry for the payment landed, it completes with that
     * payment's answer instead of appending again.
     */
    FENCED_LEDGER,
    /**
     * As {@link #FENCED_LEDGER}, without the reconciliation: an owner that took the key over
     * appends again, so an entry whose owner's completion came too late is paid twice. For
     * measurements (docs/VERIFICATION.md), not for a campaign that must hold.
     */
    FENCED_LEDGER_UNRECONCILED,
    /**
     * The status put and the ledger append unfenced, then a plain completion: Idem's negative
     * control.
     */
    UNFENCED
  }

  /** A store's running servers. Closing stops them. */
  interface Servers extends AutoCloseable {
    /** Where workers connect: through whatever the faults act on. */
    String workerAddress();

    /** Where the settling pass and the checker connect: past the faults. */
    String directAddress();

    /**
     * The faults the store itself suffers, besides the workers' (kill -9 and SIGSTOP), in a fixed
     * order: the campaign shuffles them into its rounds with its seeded random.
     */
    List<Fault> faults();

    /**
     * Faults a profile may choose by name ({@link KeysCampaign.Settings#faultKinds}), which are not
     * injected otherwise.
     */
    default List<Fault> optionalFaults() {
      return List.of();
    }

    @Override
    void close();
  }

  /**
   * One kind of store fault.
   *
   * @param name its name in the report's fault counts
   * @param injection runs it and the recovery after it
   */
  record Fault(String name, Injection injection) {}

  /** Injects a fault; draws its choices from the campaign's {@code random}. */
  interface Injection {
    /** Returns once the store is back; false if the fault could not be injected this time. */
    boolean inject(Random random) throws InterruptedException;
  }
}
