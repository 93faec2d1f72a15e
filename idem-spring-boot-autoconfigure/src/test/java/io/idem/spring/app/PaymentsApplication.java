package io.idem.spring.app;

import io.idem.client.Write;
import io.idem.http.IdempotentRequest;
import io.idem.spring.IdempotencyKey;
import io.idem.spring.Idempotent;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/** A Spring Boot application as a user writes one: controllers with {@code @Idempotent}. */
@SpringBootApplication
public class PaymentsApplication {

  /** Runs per endpoint, read by the test. */
  public static final Map<String, AtomicInteger> RUNS = new ConcurrentHashMap<>();

  public static volatile CountDownLatch entered = new CountDownLatch(1);
  public static volatile CountDownLatch release = new CountDownLatch(1);
  public static final AtomicInteger failuresLeft = new AtomicInteger();

  static int run(String endpoint) {
    return RUNS.computeIfAbsent(endpoint, e -> new AtomicInteger()).incrementAndGet();
  }

  static void hold() throws InterruptedException {
    entered.countDown();
    if (!release.await(60, TimeUnit.SECONDS)) {
      throw new IllegalStateException("never released");
    }
  }

  @RestController
  public static class Payments {

    /** Seed 001's withdraw(id, account, amount), as an endpoint. */
    @Idempotent(keyRequired = Idempotent.Setting.YES)
    @PostMapping("/accounts/{account}/withdrawals")
    public ResponseEntity<Map<String, Object>> withdraw(
        @IdempotencyKey String id,
        @PathVariable("account") String account,
        @RequestBody Map<String, Object> body) {
      int run = run("withdraw");
      return ResponseEntity.status(201)
          .header("Location", "/accounts/" + account + "/withdrawals/" + id)
          .body(Map.of("id", id, "account", account, "amount", body.get("amount"), "run", run));
    }

    @Idempotent
    @PostMapping("/held")
    public Map<String, Object> held(@RequestBody String body) throws InterruptedException {
      int run = run("held");
      hold();
      return Map.of("run", run);
    }

    @Idempotent(waitForResult = "20s")
    @PostMapping("/waiting")
    public Map<String, Object> waiting(@RequestBody String body) throws InterruptedException {
      int run = run("waiting");
      hold();
      return Map.of("run", run);
    }

    @PostMapping("/plain")
    public Map<String, Object> plain(@IdempotencyKey String id, @RequestBody String body) {
      return Map.of("run", run("plain"), "key", String.valueOf(id));
    }

    @Idempotent(storeServerErrors = Idempotent.Setting.YES)
    @PostMapping("/stored-5xx")
    public ResponseEntity<Map<String, Object>> stored5xx(@RequestBody String body) {
      int run = run("stored-5xx");
      return ResponseEntity.status(failuresLeft.getAndDecrement() > 0 ? 503 : 201)
          .body(Map.of("run", run));
    }

    @Idempotent
    @PostMapping("/released-5xx")
    public ResponseEntity<Map<String, Object>> released5xx(@RequestBody String body) {
      int run = run("released-5xx");
      return ResponseEntity.status(failuresLeft.getAndDecrement() > 0 ? 500 : 201)
          .body(Map.of("run", run));
    }

    /** The debit lands with the stored response, through the filter's request view. */
    @Idempotent
    @PostMapping("/debits/{account}")
    public ResponseEntity<Map<String, Object>> debit(
        IdempotentRequest request,
        @PathVariable("account") String account,
        @RequestBody String body) {
      int run = run("debit");
      request.completeWith(Write.increment("balance/" + account, -10));
      return ResponseEntity.status(201).body(Map.of("run", run, "token", request.fencingToken()));
    }
  }
}
