package io.idem.verify;

import io.idem.client.Fence;
import io.idem.client.FencedWriteException;
import io.idem.client.IdemClient;
import io.idem.client.IdemException;
import io.idem.client.KeyAcquisition;
import io.idem.client.KeyRecord;
import io.idem.client.KeySettlement;
import io.idem.client.KeyValue;
import io.idem.client.Write;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Random;

/**
 * The keys campaign on Idem: three real server processes behind fault proxies ({@link
 * ProcessCluster}); faults: responses lost at the leader's proxy, and kill -9 of the leader
 * (restarted). A payment acquires {@code payments/pay-i}, writes its status record {@code
 * payment/i} fenced with its token, and completes with the ledger entry appended to {@code
 * ledger/account} in the same command. Unfenced (the negative control): the status put and the
 * ledger append as plain writes of their own, then a plain completion.
 */
final class IdemPayments implements PaymentStore {
  /** The scope of the payments' keys. */
  static final String SCOPE = "payments";

  @Override
  public String name() {
    return "idem";
  }

  @Override
  public boolean expectsViolations() {
    return false;
  }

  @Override
  public Servers start(Path dir) throws InterruptedException {
    ProcessCluster cluster = new ProcessCluster(dir.resolve("cluster"), 3);
    try {
      cluster.startAll();
      awaitLeader(cluster, Duration.ofSeconds(60));
      return new Cluster(cluster);
    } catch (RuntimeException | InterruptedException e) {
      cluster.close();
      throw e;
    }
  }

  @Override
  public PaymentBackend connect(String address, boolean fenced, boolean settler) {
    IdemClient.Builder b = IdemClient.builder().servers(address);
    if (settler) {
      b.requestTimeout(Duration.ofSeconds(60));
    } else {
      b.requestTimeout(Duration.ofSeconds(20)).stallTimeout(Duration.ofSeconds(2));
    }
    return new Backend(b.build(), fenced);
  }

  static void awaitLeader(ProcessCluster cluster, Duration timeout) throws InterruptedException {
    long until = System.nanoTime() + timeout.toNanos();
    while (cluster.leader().isEmpty()) {
      if (System.nanoTime() > until) {
        throw new IllegalStateException("no leader within " + timeout);
      }
      Thread.sleep(200);
    }
  }

  /** The cluster and its faults. */
  private static final class Cluster implements Servers {
    private final ProcessCluster cluster;

    Cluster(ProcessCluster cluster) {
      this.cluster = cluster;
    }

    @Override
    public String workerAddress() {
      return String.join(",", cluster.clientAddresses());
    }

    @Override
    public String directAddress() {
      return String.join(",", cluster.directAddresses());
    }

    @Override
    public List<Fault> faults() {
      return List.of(
          new Fault("responses lost", this::loseResponses),
          new Fault("kill -9 leader", this::killLeader));
    }

    private boolean loseResponses(Random random) throws InterruptedException {
      int target = cluster.leader().orElse(random.nextInt(cluster.size()));
      cluster.proxy(target).blackholeResponses();
      Thread.sleep(300 + random.nextInt(1_200));
      cluster.proxy(target).resetConnections();
      cluster.proxy(target).passResponses();
      return true;
    }

    private boolean killLeader(Random random) throws InterruptedException {
      Optional<Integer> leader = cluster.leader();
      if (leader.isEmpty()) {
        return false;
      }
      cluster.kill(leader.get());
      Thread.sleep(500 + random.nextInt(1_000));
      cluster.start(leader.get());
      return true;
    }

    @Override
    public void close() {
      cluster.close();
    }
  }

  /** Payments over one {@link IdemClient}. */
  private static final class Backend implements PaymentBackend {
    private final IdemClient client;
    private final boolean fenced;

    Backend(IdemClient client, boolean fenced) {
      this.client = client;
      this.fenced = fenced;
    }

    @Override
    public Claim acquire(Payment p, Duration inProgress) {
      KeyAcquisition a;
      try {
        a = client.acquireKey(SCOPE, p.key(), p.fingerprint(), inProgress, Duration.ofHours(1));
      } catch (IdemException e) {
        throw new Unavailable("acquire of " + p.key() + ": " + e.getMessage(), e);
      }
      if (a instanceof KeyAcquisition.Completed c) {
        return new Claim.Done(new String(c.response(), StandardCharsets.UTF_8));
      }
      if (a instanceof KeyAcquisition.Mismatch) {
        return new Claim.Mismatch();
      }
      if (a instanceof KeyAcquisition.Acquired owned) {
        return new Claim.Owned(owned.token());
      }
      return new Claim.Busy();
    }

    @Override
    public String pay(Payment p, long token) {
      String ledger = "ledger/" + p.account();
      byte[] entry = p.entry(token).getBytes(StandardCharsets.UTF_8);
      byte[] status = Long.toString(token).getBytes(StandardCharsets.UTF_8);
      String response = p.response(token);
      byte[] body = response.getBytes(StandardCharsets.UTF_8);
      KeySettlement s;
      try {
        if (fenced) {
          try {
            client.fenced(new Fence(SCOPE, p.key(), token)).put("payment/" + p.i(), status);
          } catch (FencedWriteException e) {
            return null;
          }
          s = client.completeKey(SCOPE, p.key(), token, body, Write.append(ledger, entry));
        } else {
          client.put("payment/" + p.i(), status);
          client.append(ledger, entry);
          s = client.completeKey(SCOPE, p.key(), token, body);
        }
      } catch (IdemException e) {
        throw new Unavailable("payment " + p.i() + ": " + e.getMessage(), e);
      }
      return s instanceof KeySettlement.Fenced ? null : response;
    }

    @Override
    public List<String> ledger(int account) {
      Optional<KeyValue> ledger = client.get("ledger/" + account);
      List<String> out = new ArrayList<>();
      for (byte[] e : ledger.map(KeyValue::elements).orElse(List.of())) {
        out.add(new String(e, StandardCharsets.UTF_8));
      }
      return out;
    }

    @Override
    public Optional<KeyState> key(Payment p) {
      Optional<KeyRecord> r = client.getKey(SCOPE, p.key());
      return r.map(
          k ->
              new KeyState(
                  k.completed(),
                  k.token(),
                  k.completed() ? new String(k.response(), StandardCharsets.UTF_8) : null));
    }

    @Override
    public boolean hasTokens() {
      return true;
    }

    @Override
    public boolean keepsResponses() {
      return true;
    }

    @Override
    public Optional<Long> statusToken(long i) {
      return client.get("payment/" + i).map(v -> Long.parseLong(v.valueAsString()));
    }

    @Override
    public boolean writesStatus() {
      return true;
    }

    @Override
    public void close() {
      client.close();
    }
  }
}
