package io.idem.examples.payments;

import io.idem.client.IdemClient;
import io.idem.client.KeyRecord;
import io.idem.client.Write;
import io.idem.http.IdempotencyFilter;
import io.idem.http.IdempotentRequest;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.idem.IdemKeyStore;
import java.util.Optional;

/** Balances on the Idem cluster ({@code balance/<account>}), keys in the Idem store. */
final class IdemBalances implements Balances {
  private final IdemClient client;

  /** Over {@code client}, which stays the caller's. */
  IdemBalances(IdemClient client) {
    this.client = client;
  }

  @Override
  public PaymentsService.Store store() {
    return PaymentsService.Store.IDEM;
  }

  @Override
  public IdempotencyFilter.Builder filter() {
    return IdempotencyFilter.builder(IdemKeyStore.over(client));
  }

  @Override
  public void open(String account, long balance) {
    PaymentsService.openAccount(client, account, balance);
  }

  @Override
  public Optional<Long> balance(Optional<IdempotentRequest> keyed, String account) {
    return PaymentsService.balance(client, account);
  }

  @Override
  public void debit(String account, long amount) {
    client.increment(PaymentsService.balanceKey(account), -amount);
  }

  @Override
  public void debit(IdempotentRequest keyed, String account, long amount) {
    // The debit lands with the stored response or not at all (seed 001's second defect).
    keyed.completeWith(Write.increment(PaymentsService.balanceKey(account), -amount));
  }

  @Override
  public Optional<byte[]> storedResponse(IdempotencyKey key) {
    return client
        .getKey(key.scope(), key.key())
        .filter(KeyRecord::completed)
        .flatMap(r -> Withdrawals.executorResult(r.response()));
  }

  @Override
  public void close() {
    // the client is the caller's
  }
}
