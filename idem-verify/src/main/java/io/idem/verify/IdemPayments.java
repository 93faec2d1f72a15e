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
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The keys campaign on Idem: three real server processes behind fault proxies ({@link
 * ProcessCluster}); faults: responses lost at the leader's proxy and kill -9 of the leader
 * (restarted); and, for a profile that chooses it, SIGSTOP of the leader past its followers'
 * election timeout (then SIGCONT), so that another node leads after a failover, with a longer
 * election timeout ({@link PaymentStore#start(Path, Duration)}) a failover longer than the keys'
 * in-progress timeout. A payment acquires {@code payments/pay-i}, writes its status record {@code
 * payment/i} fenced with its token, and completes with the ledger entry appended to {@code
 * ledger/account} in the same command ({@link PaymentStore.Writes#FENCED_COMPLETION}). With {@link
 * PaymentStore.Writes#FENCED_LEDGER}, the ledger append is a fenced write of its own before a plain
 * completion. Unfenced (the negative control): the status put and the ledger append as plain writes
 * of their own, then a plain completion.
 */
final class IdemPayments implements PaymentStore {
  /** The scope of the payments' keys. */
  static final String SCOPE = "payments";

  /** The fault that kills the leader (kill -9) and restarts it 0.5-1.5 s later. */
  static final String KILL_LEADER = "kill -9 leader";

  /**
   * The fault that freezes the leader (SIGSTOP) past its followers' election timeout (1-2 s with
   * the default timeout), then resumes it (SIGCONT).
   */
  static final String PAUSE_LEADER = "SIGSTOP leader";

  @Override
  public String name() {
    return "idem";
  }

  @Override
  public Capabilities capabilities() {
    return Capabilities.IDEM;
  }

  @Override
  public Servers start(Path dir) throws InterruptedException {
    return start(dir, Duration.ZERO);
  }

  @Override
  public Servers start(Path dir, Duration electionTimeout) throws InterruptedException {
    ProcessCluster cluster = new ProcessCluster(dir.resolve("cluster"), 3);
    if (!electionTimeout.isZero()) {
      long min = electionTimeout.toMillis();
      for (int i = 0; i < cluster.size(); i++) {
        cluster.setExtraArgs(
            i,
            List.of(
                "--election-timeout-min-ms",
                Long.toString(min),
                "--election-timeout-max-ms",
                Long.toString(min * 5 / 3)));
      }
    }
    try {
      cluster.startAll();
      awaitLeader(cluster, Duration.ofSeconds(60));
      // Past the election timeout's upper bound (600 ms by default), so that another node leads.
      return new Cluster(
          cluster, electionTimeout.isZero() ? 1_000 : electionTimeout.toMillis() * 5 / 3 + 500);
    } catch (RuntimeException | InterruptedException e) {
      cluster.close();
      throw e;
    }
  }

  @Override
  public PaymentBackend connect(String address, Writes writes, boolean settler) {
    IdemClient.Builder b = IdemClient.builder().servers(address);
    if (settler) {
      b.requestTimeout(Duration.ofSeconds(60));
    } else {
      b.requestTimeout(Duration.ofSeconds(20)).stallTimeout(Duration.ofSeconds(2));
    }
    return new Backend(b.build(), writes);
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
    private final long pauseMs; // the least pause of the leader: past its followers' election

    Cluster(ProcessCluster cluster, long pauseMs) {
      this.cluster = cluster;
      this.pauseMs = pauseMs;
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
          new Fault(KILL_LEADER, this::killLeader));
    }

    @Override
    public List<Fault> optionalFaults() {
      return List.of(new Fault(PAUSE_LEADER, this::pauseLeader));
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

    /**
     * Freezes the leader past the election timeout, so that the others elect a new one: requests it
     * held are resent there, stamped with the new leader's later log time.
     */
    private boolean pauseLeader(Random random) throws InterruptedException {
      Optional<Integer> leader = cluster.leader();
      if (leader.isEmpty()) {
        return false;
      }
      cluster.pause(leader.get());
      try {
        Thread.sleep(pauseMs + random.nextInt(1_000));
      } finally {
        cluster.resume(leader.get());
      }
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
    private final Writes writes;
    // Tokens this process took a key over with: their payments reconcile before they append.
    private final Set<Long> takeovers = ConcurrentHashMap.newKeySet();

    Backend(IdemClient client, Writes writes) {
      this.client = client;
      this.writes = writes;
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
        if (owned.takeover()) {
          takeovers.add(owned.token());
        }
        return new Claim.Owned(owned.token());
      }
      return new Claim.Busy();
    }

    @Override
    public Attempt pay(Payment p, long token) {
      String ledger = "ledger/" + p.account();
      byte[] entry = p.entry(token).getBytes(StandardCharsets.UTF_8);
      byte[] status = Long.toString(token).getBytes(StandardCharsets.UTF_8);
      String response = p.response(token);
      KeySettlement s;
      try {
        switch (writes) {
          case FENCED_COMPLETION -> {
            IdemClient owner = client.fenced(new Fence(SCOPE, p.key(), token));
            owner.put("payment/" + p.i(), status);
            s =
                client.completeKey(
                    SCOPE, p.key(), token, utf8(response), Write.append(ledger, entry));
          }
          case FENCED_LEDGER, FENCED_LEDGER_UNRECONCILED -> {
            IdemClient owner = client.fenced(new Fence(SCOPE, p.key(), token));
            owner.put("payment/" + p.i(), status);
            // Read after the takeover: an earlier owner's append either shows here or is refused.
            Optional<Long> earlier =
                writes == Writes.FENCED_LEDGER && takeovers.contains(token)
                    ? earlierEntry(p)
                    : Optional.empty();
            if (earlier.isPresent()) {
              response = p.response(earlier.get()); // that owner paid: answer as it would have
            } else {
              owner.append(ledger, entry);
            }
            s = client.completeKey(SCOPE, p.key(), token, utf8(response));
          }
          case UNFENCED -> {
            client.put("payment/" + p.i(), status);
            client.append(ledger, entry);
            s = client.completeKey(SCOPE, p.key(), token, utf8(response));
          }
          default -> throw new IllegalStateException("writes " + writes);
        }
      } catch (FencedWriteException e) {
        // The key still has this token: refused only because its deadline had passed (format 8).
        return new Attempt.Fenced(e.currentToken() == token);
      } catch (IdemException e) {
        throw new Unavailable("payment " + p.i() + ": " + e.getMessage(), e);
      }
      return s instanceof KeySettlement.Fenced
          ? new Attempt.Fenced(false)
          : new Attempt.Paid(response);
    }

    /** The token of payment {@code p}'s entry in its ledger, if one landed. */
    private Optional<Long> earlierEntry(Payment p) {
      String prefix = p.i() + ":";
      for (String e : ledger(p.account())) {
        if (e.startsWith(prefix)) {
          return Optional.of(Payment.tagOf(e));
        }
      }
      return Optional.empty();
    }

    private static byte[] utf8(String s) {
      return s.getBytes(StandardCharsets.UTF_8);
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
    public Optional<Long> statusToken(long i) {
      return client.get("payment/" + i).map(v -> Long.parseLong(v.valueAsString()));
    }

    @Override
    public void close() {
      client.close();
    }
  }
}
