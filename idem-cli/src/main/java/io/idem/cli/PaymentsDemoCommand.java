package io.idem.cli;

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
 * against the acknowledged withdrawals. {@code --serve} only runs the service, for curl.
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
      "--serve only starts the service on --port for curl (README)."
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

  @Option(names = "--serve", description = "Only run the service (with its embedded store).")
  boolean serve;

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
      List<String> args = new ArrayList<>();
      args.addAll(List.of("--port", Integer.toString(port)));
      args.addAll(List.of("--processing-delay", processingDelay, "--wait", waitForResult));
      if (noIdempotency) {
        args.add("--no-idempotency");
      }
      return PaymentsService.serve(args.toArray(new String[0]), new CountDownLatch(1));
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
}
