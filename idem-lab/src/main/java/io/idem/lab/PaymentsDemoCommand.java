package io.idem.lab;

import io.idem.examples.payments.PaymentsDemo;
import io.idem.examples.payments.PaymentsService;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code idem demo payments}: seed 001's withdrawals as an HTTP service behind the Idempotency-Key
 * filter, driven through lost responses, a killed Idem leader and a killed service, then judged
 * against the acknowledged withdrawals. {@code --serve} only runs the service, for curl, on the
 * store {@code --store} names ({@link PaymentsService#serve}: the same options).
 */
@Command(
    name = "payments",
    mixinStandardHelpOptions = true,
    description = {
      "Runs the payments service (HTTP, Idempotency-Key filter, embedded 3-node Idem store) under"
          + " faults: clients drop responses and retry, the network swallows responses, the Idem"
          + " leader and the service itself are killed; then prints balances and a verdict against"
          + " the acknowledged withdrawals. Exit 0 on PASS.",
      "--no-idempotency switches the filter off (the negative control: double withdrawals, exit 1).",
      "--serve only starts the service on --port for curl (README), on --store idem (default: an"
          + " embedded 3-node Idem store in a temporary folder, deleted when the service stops,"
          + " Ctrl-C included: balances and keys start anew at every start; --servers keeps them"
          + " on a cluster of your own), redis (--redis-uri) or postgres (--jdbc-url)."
    })
final class PaymentsDemoCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  @Option(
      names = "--seconds",
      defaultValue = "20",
      description = "How long the clients run, 8 to 600. Default: ${DEFAULT-VALUE}.")
  int seconds;

  @Option(
      names = "--clients",
      defaultValue = "8",
      description = "Concurrent clients, 1 to 64. Default: ${DEFAULT-VALUE}.")
  int clients;

  @Option(
      names = "--drop-rate",
      defaultValue = "0.25",
      description = "Share of answers a client drops and retries. Default: ${DEFAULT-VALUE}.")
  double dropRate;

  @Option(names = "--no-idempotency", description = "Switch the filter off: the negative control.")
  boolean noIdempotency;

  @Option(names = "--serve", description = "Only run the service, on --store.")
  boolean serve;

  @Option(
      names = "--store",
      defaultValue = "idem",
      paramLabel = "idem|redis|postgres",
      description =
          "With --serve: where keys and balances live: idem, redis or postgres."
              + " Default: ${DEFAULT-VALUE}.")
  String store;

  @Option(
      names = "--servers",
      paramLabel = "HOST:PORT,...",
      description =
          "With --serve --store idem: an Idem cluster of your own, whose balances and keys outlive"
              + " the service. Default: an embedded 3-node cluster, deleted when it stops.")
  String servers;

  @Option(
      names = "--redis-uri",
      paramLabel = "URI",
      description = "With --serve --store redis (required): the server, redis://host:port.")
  String redisUri;

  @Option(
      names = "--redis-prefix",
      defaultValue = "payments",
      description = "With --serve --store redis: the keys' namespace. Default: ${DEFAULT-VALUE}.")
  String redisPrefix;

  @Option(
      names = "--jdbc-url",
      paramLabel = "URL",
      description =
          "With --serve --store postgres (required): jdbc:postgresql://host:port/database.")
  String jdbcUrl;

  @Option(
      names = "--jdbc-user",
      defaultValue = "postgres",
      description = "With --serve --store postgres: the user. Default: ${DEFAULT-VALUE}.")
  String jdbcUser;

  @Option(
      names = "--jdbc-password",
      defaultValue = "",
      description = "With --serve --store postgres: the password. Default: none.")
  String jdbcPassword;

  @Option(
      names = "--pool",
      defaultValue = "16",
      description = "With --serve --store postgres: connections. Default: ${DEFAULT-VALUE}.")
  int pool;

  /** The options that only {@code --serve} takes. */
  private static final List<String> SERVE_ONLY =
      List.of(
          "--store",
          "--servers",
          "--redis-uri",
          "--redis-prefix",
          "--jdbc-url",
          "--jdbc-user",
          "--jdbc-password",
          "--pool",
          "--port",
          "--processing-delay",
          "--wait");

  @Option(
      names = "--port",
      defaultValue = "8080",
      description = "With --serve: the port. Default: ${DEFAULT-VALUE}.")
  int port;

  @Option(
      names = "--processing-delay",
      defaultValue = "0",
      description = "With --serve: how long each withdrawal takes (500ms, 3s), to see a 409.")
  String processingDelay;

  @Option(
      names = "--wait",
      defaultValue = "0",
      description = "With --serve: how long a duplicate in progress waits for the result (5s).")
  String waitForResult;

  @Override
  public Integer call() throws Exception {
    if (serve) {
      return serve();
    }
    for (String option : SERVE_ONLY) {
      if (spec.commandLine().getParseResult().hasMatchedOption(option)) {
        spec.commandLine()
            .getErr()
            .println(
                "idem: "
                    + option
                    + " applies to --serve (the demo under faults runs on its own embedded Idem"
                    + " store)");
        return 2;
      }
    }
    PaymentsDemo.Options options;
    try {
      options =
          new PaymentsDemo.Options(
              seconds, !noIdempotency, clients, dropRate, System.nanoTime() % 100_000);
    } catch (IllegalArgumentException e) {
      spec.commandLine().getErr().println("idem: " + e.getMessage());
      return 2;
    }
    return PaymentsDemo.run(options, spec.commandLine().getOut()).pass() ? 0 : 1;
  }

  /** The service alone, until SIGINT or SIGTERM ({@link PaymentsService#serve} cleans up). */
  private int serve() throws Exception {
    try {
      PaymentsService.Store.named(store);
    } catch (IllegalArgumentException e) {
      spec.commandLine().getErr().println("idem: " + e.getMessage());
      return 2;
    }
    List<String> args = new ArrayList<>();
    args.addAll(List.of("--port", Integer.toString(port), "--store", store));
    args.addAll(List.of("--processing-delay", processingDelay, "--wait", waitForResult));
    for (String[] option :
        new String[][] {
          {"--servers", servers}, {"--redis-uri", redisUri}, {"--jdbc-url", jdbcUrl},
        }) {
      if (option[1] != null) {
        args.addAll(List.of(option));
      }
    }
    if (store.equals("redis")) {
      args.addAll(List.of("--redis-prefix", redisPrefix));
    }
    if (store.equals("postgres")) {
      args.addAll(
          List.of(
              "--jdbc-user",
              jdbcUser,
              "--jdbc-password",
              jdbcPassword,
              "--pool",
              Integer.toString(pool)));
    }
    if (noIdempotency) {
      args.add("--no-idempotency");
    }
    return PaymentsService.serve(
        args.toArray(new String[0]),
        new CountDownLatch(1),
        spec.commandLine().getOut(),
        spec.commandLine().getErr());
  }
}
