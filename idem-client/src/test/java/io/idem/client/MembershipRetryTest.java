package io.idem.client;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import io.idem.proto.ChangeMembersReply;
import io.idem.proto.ChangeMembersRequest;
import io.idem.proto.Code;
import io.idem.proto.IdemGrpc;
import io.idem.proto.Member;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CopyOnWriteArraySet;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A membership change that meets a server which is not the leader waits before its next attempt on
 * the client's timer, as reads do, not in a sleep on the caller's thread; it still retries until
 * the leader answers, with the same pause between attempts.
 */
@Timeout(60)
class MembershipRetryTest {

  /** Answers NOT_LEADER (naming itself) to the first {@code refusals} attempts, then OK. */
  private static final class ReluctantLeader extends IdemGrpc.IdemImplBase {
    final int refusals;
    final List<Long> attemptNanos = new CopyOnWriteArrayList<>();
    volatile String self = "";

    ReluctantLeader(int refusals) {
      this.refusals = refusals;
    }

    /** The shape a client asks for first: a cluster of one group, as an Idem server says it. */
    @Override
    public void status(
        io.idem.proto.StatusRequest req, StreamObserver<io.idem.proto.StatusReply> reply) {
      reply.onNext(io.idem.proto.StatusReply.getDefaultInstance());
      reply.onCompleted();
    }

    @Override
    public void changeMembers(ChangeMembersRequest req, StreamObserver<ChangeMembersReply> reply) {
      attemptNanos.add(System.nanoTime());
      ChangeMembersReply.Builder r =
          ChangeMembersReply.newBuilder()
              .addMembers(
                  Member.newBuilder()
                      .setId("n1")
                      .setRaftAddress("127.0.0.1:1")
                      .setClientAddress(self)
                      .setVoter(true));
      if (attemptNanos.size() <= refusals) {
        r.setCode(Code.NOT_LEADER).setLeaderHint(self);
      } else {
        r.setCode(Code.OK);
      }
      reply.onNext(r.build());
      reply.onCompleted();
    }
  }

  @Test
  @SuppressWarnings("AddressSelection") // a literal loopback address, no name to resolve
  void aRefusedAttemptIsRetriedOnTheTimerWithoutSleepingOnTheCallersThread() throws Exception {
    ReluctantLeader service = new ReluctantLeader(3);
    Server server =
        NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
            .addService(service)
            .build()
            .start();
    service.self = "127.0.0.1:" + server.getPort();
    try (IdemClient client = IdemClient.builder().servers(service.self).build()) {
      Thread caller = Thread.currentThread();
      AtomicBoolean done = new AtomicBoolean();
      Set<String> sleeps = new CopyOnWriteArraySet<>();
      // Looks at the caller's stack while the change is under way: a pause taken on it shows as
      // Thread.sleep, for the 200 ms of each pause.
      Thread watcher =
          new Thread(
              () -> {
                while (!done.get()) {
                  for (StackTraceElement e : caller.getStackTrace()) {
                    if (e.getClassName().equals("java.lang.Thread")
                        && e.getMethodName().startsWith("sleep")) {
                      sleeps.add(e.toString());
                    }
                  }
                  Thread.onSpinWait();
                }
              },
              "caller-watcher");
      watcher.setDaemon(true);
      watcher.start();

      MembershipChange change;
      try {
        change = client.changeMembers(List.of(), List.of("n9"), Duration.ofSeconds(10));
      } finally {
        done.set(true);
        watcher.join();
      }

      assertThat(change.committed()).isTrue();
      assertThat(service.attemptNanos).as("three refusals, then the change").hasSize(4);
      for (int i = 1; i < service.attemptNanos.size(); i++) {
        assertThat(service.attemptNanos.get(i) - service.attemptNanos.get(i - 1))
            .as("the pause before attempt %d", i + 1)
            .isGreaterThanOrEqualTo(Duration.ofMillis(ClusterAdmin.MEMBERSHIP_RETRY_MS).toNanos());
      }
      assertThat(sleeps).as("sleeps seen on the caller's thread").isEmpty();
    } finally {
      server.shutdownNow();
    }
  }
}
