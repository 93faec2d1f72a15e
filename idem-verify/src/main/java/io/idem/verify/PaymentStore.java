package io.idem.verify;

import java.nio.file.Path;
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
  List<String> NAMES = List.of("idem", "redis", "postgres", "seed001");

  /**
   * The store called {@code name}.
   *
   * @throws IllegalArgumentException for a name not in {@link #NAMES}, naming it
   */
  static PaymentStore named(String name) {
    return switch (name) {
      case "idem" -> new IdemPayments();
      case "redis" -> new RedisPayments();
      case "postgres" -> new PostgresPayments();
      case "seed001" -> new Seed001Payments();
      default ->
          throw new IllegalArgumentException("no store named " + name + "; stores: " + NAMES);
    };
  }

  /** Its name on the command line and in reports. */
  String name();

  /** Whether the checker must flag this store: it is a negative control (seed 001). */
  boolean expectsViolations();

  /** Starts the store's servers, their data and logs under {@code dir}; returns once they serve. */
  Servers start(Path dir) throws Exception;

  /**
   * The client side over {@code address} (one of {@link Servers}'). {@code fenced} false is Idem's
   * unfenced negative control; {@code settler} asks for patience (long timeouts) over speed: the
   * settling pass and the checker, which run without faults.
   */
  PaymentBackend connect(String address, boolean fenced, boolean settler);

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
