package io.idem.client;

import io.idem.client.internal.SessionMachine;
import io.idem.proto.Operation;
import io.idem.proto.PartitionMap;
import io.idem.proto.Partitions;
import io.idem.proto.StatusReply;
import io.idem.proto.StatusRequest;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/**
 * A client's sessions: one in a cluster of one Raft group; in a cluster of several, one in the
 * metadata group, which gives the client its id, secret and epoch, and one in each data group it
 * writes to, registered under that id on first use, each with its own numbers (Kafka's producer id
 * with a sequence per partition, seed 003). Every operation goes to the session of its partition's
 * group ({@link Partitions}); its answers, retries and exactly-once guarantee are that session's.
 *
 * <p>With an identity file {@code F}, the metadata session journals in {@code F} and the session of
 * data group {@code g} in {@code F.group-g}. A restarted client resumes the metadata session (a new
 * epoch) and, at once, every data session it finds a journal of: each is taken over at the new
 * epoch, which fences the previous instance's streams in that group, and resends what that instance
 * had in flight with its numbers.
 *
 * <p>Thread-safe: data sessions are opened under the lock, used without it.
 */
final class GroupSessions {
  /** The journal file of data group {@code g}'s session, beside the metadata session's. */
  static Path journalOf(Path identityFile, int g) {
    return identityFile.resolveSibling(identityFile.getFileName() + ".group-" + g);
  }

  private final ClientSettings settings;
  private final SessionDriver primary;
  private final @Nullable PartitionMap map; // null: a cluster of one group
  private final SessionDriver @Nullable [] data; // by group number; null: not opened yet
  private final @Nullable IdemTransport owned; // the transport the sessions share, if ours
  private SessionMachine.@Nullable Given given;

  private GroupSessions(
      ClientSettings settings,
      SessionDriver primary,
      @Nullable PartitionMap map,
      @Nullable IdemTransport owned) {
    this.settings = settings;
    this.primary = primary;
    this.map = map;
    this.owned = owned;
    this.data = map == null ? null : new SessionDriver[map.getGroupCount() + 1];
  }

  /**
   * The sessions of a client with {@code settings}. Asks the servers for the cluster's shape first
   * ({@link #probe}), on the transport the sessions then use: the settings', or one of its own that
   * it closes with them. If no server tells, the client starts as in a cluster of one group (a
   * cluster of several then refuses its registration: "register in the metadata group first").
   *
   * @throws NotSentException if the cluster has several groups and the metadata session does not
   *     register within the request timeout
   */
  static GroupSessions open(ClientSettings settings) {
    IdemTransport owned = null;
    ClientSettings shared = settings;
    if (settings.transport() == null) {
      owned =
          settings.tls() == null ? IdemTransport.create() : IdemTransport.create(settings.tls());
      shared = withTransport(settings, owned);
    }
    GroupSessions s;
    try {
      PartitionMap map = probe(shared);
      if (map == null || map.getGroupCount() <= 1) {
        return new GroupSessions(shared, new SessionDriver(shared), null, owned);
      }
      SessionDriver meta =
          new SessionDriver(shared, Groups.METADATA, null, settings.identityFile());
      s = new GroupSessions(shared, meta, map, owned);
    } catch (RuntimeException e) {
      if (owned != null) {
        owned.close();
      }
      throw e;
    }
    try {
      s.awaitIdentity();
      s.resumeJournaled();
    } catch (RuntimeException e) {
      s.close(Duration.ZERO);
      throw e;
    }
    return s;
  }

  private static ClientSettings withTransport(ClientSettings s, IdemTransport t) {
    return new ClientSettings(
        s.servers(),
        s.window(),
        s.requestTimeoutMs(),
        s.sessionTtlMs(),
        s.keepAliveMs(),
        s.stallTimeoutMs(),
        s.probeIntervalMs(),
        s.rpcTimeoutMs(),
        s.identityFile(),
        s.name(),
        t,
        null);
  }

  /**
   * The cluster's partition map, from the first server that answers a Status. Asks every server at
   * once, each within the RPC timeout, and again while some did not answer in time (a loaded or
   * partitioned cluster), until the request timeout. Null if every server refused the connection in
   * one round (nobody listens: the client then starts as in a cluster of one group, connecting
   * lazily as it always did), or if none answered within the request timeout.
   */
  private static @Nullable PartitionMap probe(ClientSettings settings) {
    IdemTransport t = java.util.Objects.requireNonNull(settings.transport());
    long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(settings.requestTimeoutMs());
    try {
      while (true) {
        Round round = probeOnce(t, settings);
        if (round.map != null || round.allRefused || System.nanoTime() - end > 0) {
          return round.map;
        }
        Thread.sleep(100);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    }
  }

  /** One round of Status calls: the map if one answered; whether every server refused. */
  private record Round(@Nullable PartitionMap map, boolean allRefused) {}

  private static Round probeOnce(IdemTransport t, ClientSettings settings)
      throws InterruptedException {
    CompletableFuture<PartitionMap> first = new CompletableFuture<>();
    AtomicInteger left = new AtomicInteger(settings.servers().size());
    AtomicInteger refused = new AtomicInteger();
    for (String server : settings.servers()) {
      Groups.stub(t.connection(server).channel, Groups.NONE)
          .withDeadlineAfter(settings.rpcTimeoutMs(), TimeUnit.MILLISECONDS)
          .status(
              StatusRequest.getDefaultInstance(),
              new io.grpc.stub.StreamObserver<StatusReply>() {
                @Override
                public void onNext(StatusReply r) {
                  first.complete(
                      r.hasMap() ? r.getMap() : PartitionMap.newBuilder().setGroupCount(1).build());
                }

                @Override
                public void onError(Throwable e) {
                  if (io.grpc.Status.fromThrowable(e).getCode()
                      == io.grpc.Status.Code.UNAVAILABLE) {
                    refused.incrementAndGet();
                  }
                  if (left.decrementAndGet() == 0) {
                    first.complete(null);
                  }
                }

                @Override
                public void onCompleted() {}
              });
    }
    try {
      PartitionMap map = first.get(settings.rpcTimeoutMs() + 1_000, TimeUnit.MILLISECONDS);
      return new Round(map, refused.get() == settings.servers().size());
    } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
      return new Round(null, false);
    }
  }

  /** Waits for the metadata session's id, secret and epoch. */
  private void awaitIdentity() {
    awaitRegistered(primary, "the metadata group (0)");
    long[] secret = primary.secret();
    given = new SessionMachine.Given(primary.clientId(), primary.epoch(), secret[0], secret[1]);
  }

  /** Registers {@code d} now and waits until it is, within the request timeout. */
  private void awaitRegistered(SessionDriver d, String what) {
    d.connect();
    long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(settings.requestTimeoutMs());
    while (d.clientId() == 0) {
      if (System.nanoTime() - end > 0) {
        throw new NotSentException(
            NotSentException.Reason.DEADLINE,
            what + " did not register this client within " + settings.requestTimeoutMs() + " ms",
            0,
            d.leaderHint(),
            null);
      }
      try {
        Thread.sleep(5);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new NotSentException(NotSentException.Reason.CLIENT_CLOSED, "interrupted", 0, "", e);
      }
    }
  }

  /**
   * Takes over at once the data sessions a previous instance journaled, and waits until each is
   * taken over: from then on that instance is fenced in every group it wrote to.
   */
  private void resumeJournaled() {
    Path file = settings.identityFile();
    if (file == null || data == null) {
      return;
    }
    for (int g = 1; g < data.length; g++) {
      if (java.nio.file.Files.exists(journalOf(file, g))) {
        awaitRegistered(group(g), "data group " + g);
      }
    }
  }

  /** Whether the cluster has several groups. */
  boolean grouped() {
    return map != null;
  }

  /** The partition map, or null in a cluster of one group. */
  @Nullable PartitionMap map() {
    return map;
  }

  /**
   * The session that carries {@code op}.
   *
   * @throws InvalidArgumentException if {@code op} names keys of two groups: nothing is sent
   */
  SessionDriver forOp(Operation op) {
    if (map == null) {
      return primary;
    }
    String stray = Partitions.strayName(op, map);
    if (stray != null) {
      throw new InvalidArgumentException(
          "the "
              + stray
              + " is in another Raft group than the operation's key: one call touches one group;"
              + " give related names a common hash tag {...}",
          primary.clientId(),
          0);
    }
    return forPartition(Partitions.primary(op));
  }

  /** The session of the group holding {@code partition}. */
  SessionDriver forPartition(int partition) {
    if (map == null) {
      return primary;
    }
    return group(Partitions.groupIn(map, partition));
  }

  /** Data group {@code g}'s session, opened on first use. */
  synchronized SessionDriver group(int g) {
    SessionDriver[] sessions = java.util.Objects.requireNonNull(data);
    SessionDriver d = sessions[g];
    if (d == null) {
      Path file = settings.identityFile();
      d = new SessionDriver(settings, g, given, file == null ? null : journalOf(file, g));
      sessions[g] = d;
    }
    return d;
  }

  /** The metadata session (several groups) or the only one. */
  SessionDriver primary() {
    return primary;
  }

  /** Every open session, the primary first. */
  synchronized List<SessionDriver> all() {
    List<SessionDriver> out = new ArrayList<>();
    out.add(primary);
    if (data != null) {
      for (SessionDriver d : data) {
        if (d != null) {
          out.add(d);
        }
      }
    }
    return out;
  }

  long retries() {
    long n = 0;
    for (SessionDriver d : all()) {
      n += d.retries();
    }
    return n;
  }

  long duplicates() {
    long n = 0;
    for (SessionDriver d : all()) {
      n += d.duplicates();
    }
    return n;
  }

  /** Closes the data sessions, then the primary, then the transport if it is ours. */
  void close(Duration grace) {
    List<SessionDriver> sessions = all();
    for (int i = sessions.size() - 1; i >= 0; i--) {
      sessions.get(i).close(grace);
    }
    if (owned != null) {
      owned.close();
    }
  }
}
