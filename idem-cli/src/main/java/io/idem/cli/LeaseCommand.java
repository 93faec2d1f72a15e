package io.idem.cli;

import io.idem.client.IdemClient;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Parameters;

/** {@code idem lease grant|keepalive|revoke}. */
@Command(
    name = "lease",
    mixinStandardHelpOptions = true,
    description = "Leases: a name held for a TTL; keys attached to it go with it.",
    subcommands = {
      LeaseCommand.Grant.class,
      LeaseCommand.KeepAlive.class,
      LeaseCommand.Revoke.class
    })
final class LeaseCommand {

  @Command(name = "grant", mixinStandardHelpOptions = true, description = "Grants a lease.")
  static final class Grant implements Callable<Integer> {
    @Mixin ClientOptions options;

    @Parameters(index = "0", description = "The lease name.")
    String name;

    @Parameters(
        index = "1",
        converter = DurationConverter.class,
        description = "The TTL, e.g. 10s.")
    Duration ttl;

    @Override
    public Integer call() {
      try (IdemClient c = options.client()) {
        System.out.println("granted: " + expiry(c.grantLease(name, ttl)));
      }
      return 0;
    }
  }

  @Command(name = "keepalive", mixinStandardHelpOptions = true, description = "Renews a lease.")
  static final class KeepAlive implements Callable<Integer> {
    @Mixin ClientOptions options;

    @Parameters(index = "0", description = "The lease name.")
    String name;

    @Override
    public Integer call() {
      try (IdemClient c = options.client()) {
        System.out.println("renewed: " + expiry(c.keepAliveLease(name)));
      }
      return 0;
    }
  }

  @Command(
      name = "revoke",
      mixinStandardHelpOptions = true,
      description = "Revokes a lease and deletes its keys.")
  static final class Revoke implements Callable<Integer> {
    @Mixin ClientOptions options;

    @Parameters(index = "0", description = "The lease name.")
    String name;

    @Override
    public Integer call() {
      try (IdemClient c = options.client()) {
        long at = c.revokeLease(name);
        System.out.println("revoked at " + Instant.ofEpochMilli(at) + " (log time " + at + " ms)");
      }
      return 0;
    }
  }

  /**
   * A lease's expiry for people: log time is the leaders' clocks (ms since the epoch) as stamped
   * into the log, so it reads as a time; how far ahead is measured against this machine's clock,
   * hence "about".
   */
  static String expiry(long logTimeMs) {
    return expiry(logTimeMs, Clock.systemUTC());
  }

  /** As {@link #expiry(long)}, how far ahead measured against {@code clock}. */
  static String expiry(long logTimeMs, Clock clock) {
    Duration left = Duration.ofMillis(logTimeMs - clock.millis());
    return "expires at "
        + Instant.ofEpochMilli(logTimeMs)
        + ", in about "
        + String.format(java.util.Locale.ROOT, "%.1f s", left.toMillis() / 1000.0)
        + " (log time "
        + logTimeMs
        + " ms)";
  }
}
