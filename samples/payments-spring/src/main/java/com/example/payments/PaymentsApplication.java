package com.example.payments;

import io.idem.spring.IdempotencyKey;
import io.idem.spring.Idempotent;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/**
 * Withdrawals that are never paid twice: a retried POST with the same {@code Idempotency-Key} gets
 * the first answer back, and the handler runs once. application.properties points the starter at
 * an Idem cluster.
 */
@SpringBootApplication
public class PaymentsApplication {

  public static void main(String[] args) {
    SpringApplication.run(PaymentsApplication.class, args);
  }

  @RestController
  public static class Withdrawals {
    private final Map<String, AtomicLong> balances = new ConcurrentHashMap<>();

    @Idempotent(keyRequired = Idempotent.Setting.YES)
    @PostMapping("/accounts/{account}/withdrawals")
    public ResponseEntity<Map<String, Object>> withdraw(
        @IdempotencyKey String key,
        @PathVariable("account") String account,
        @RequestBody Map<String, Object> body) {
      long amount = ((Number) body.get("amount")).longValue();
      long balance = balances.computeIfAbsent(account, a -> new AtomicLong(100)).addAndGet(-amount);
      return ResponseEntity.status(201)
          .body(Map.of("account", account, "amount", amount, "balance", balance));
    }

    @GetMapping("/accounts/{account}")
    public Map<String, Object> balance(@PathVariable("account") String account) {
      return Map.of(
          "account",
          account,
          "balance",
          balances.computeIfAbsent(account, a -> new AtomicLong(100)).get());
    }
  }
}
