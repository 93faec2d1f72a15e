package io.idem.client;

import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.idem.client.internal.Effect;
import io.idem.client.internal.SessionMachine;
import io.idem.proto.ClientFrame;
import io.idem.proto.RegisterReply;
import io.idem.proto.ServerFrame;
import io.idem.proto.StatusReply;
import io.idem.proto.StatusRequest;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The network side of a {@link SessionDriver}'s effects: Register RPCs, probe rounds, and the one
 * session stream, whose frames and endings go back to the machine as events. None of it blocks.
 * Used by the driver's runner alone, one at a time (its stream fields need no lock).
 */
final class SessionWire {
  private static final Logger LOG = LoggerFactory.getLogger(SessionDriver.class);

  private final IdemTransport transport;
  private final int group;
  private final long rpcTimeoutMs;
  private final long probeMs;
  private final Consumer<Consumer<SessionMachine>> events;
  private final BooleanSupplier stopped;

  private int streamId;
  private @Nullable StreamObserver<ClientFrame> stream;

  /**
   * @param events takes an event for the machine (the driver's {@code apply})
   * @param stopped whether nothing may leave any more (the journal failed)
   */
  SessionWire(
      IdemTransport transport,
      int group,
      long rpcTimeoutMs,
      long probeMs,
      Consumer<Consumer<SessionMachine>> events,
      BooleanSupplier stopped) {
    this.transport = transport;
    this.group = group;
    this.rpcTimeoutMs = rpcTimeoutMs;
    this.probeMs = probeMs;
    this.events = events;
    this.stopped = stopped;
  }

  private static long now() {
    return System.nanoTime();
  }

  void register(Effect.Register r) {
    if (stopped.getAsBoolean()) {
      return;
    }
    IdemTransport.Connection c = connection(r.address());
    if (c == null) {
      return;
    }
    long nonce = r.nonce();
    Groups.stub(c.channel, group)
        .withDeadlineAfter(rpcTimeoutMs, TimeUnit.MILLISECONDS)
        .register(
            r.request(),
            new StreamObserver<>() {
              @Override
              public void onNext(RegisterReply reply) {
                events.accept(m -> m.registerReplied(nonce, reply, now()));
              }

              @Override
              public void onError(Throwable t) {
                LOG.debug("register via {} failed: {}", r.address(), t.toString());
                String why = r.address() + ": " + describe(t);
                events.accept(m -> m.registerFailed(nonce, why, now()));
              }

              @Override
              public void onCompleted() {}
            });
  }

  /**
   * Asks each address for its Status with the probe interval as deadline; reports the answers that
   * came, together, once every RPC has ended.
   */
  void probe(Effect.Probe p) {
    List<String> addresses = p.addresses();
    ConcurrentLinkedQueue<SessionMachine.ProbeAnswer> answers = new ConcurrentLinkedQueue<>();
    AtomicInteger left = new AtomicInteger(addresses.size());
    Runnable oneDone =
        () -> {
          if (left.decrementAndGet() == 0) {
            List<SessionMachine.ProbeAnswer> all = List.copyOf(answers);
            events.accept(m -> m.probed(p.round(), all, now()));
          }
        };
    if (addresses.isEmpty()) {
      events.accept(m -> m.probed(p.round(), List.of(), now()));
      return;
    }
    for (String a : addresses) {
      IdemTransport.Connection c = connection(a);
      if (c == null) {
        oneDone.run();
        continue;
      }
      Groups.stub(c.channel, group)
          .withDeadlineAfter(probeMs, TimeUnit.MILLISECONDS)
          .status(
              StatusRequest.getDefaultInstance(),
              new StreamObserver<>() {
                @Override
                public void onNext(StatusReply r) {
                  answers.add(new SessionMachine.ProbeAnswer(a, r.getTerm(), r.getLeaderAddress()));
                }

                @Override
                public void onError(Throwable t) {
                  LOG.debug("probe of {} failed: {}", a, t.toString());
                  oneDone.run();
                }

                @Override
                public void onCompleted() {
                  oneDone.run();
                }
              });
    }
  }

  void openStream(Effect.OpenStream o) {
    endStream(streamId, true);
    if (stopped.getAsBoolean()) {
      return;
    }
    IdemTransport.Connection c = connection(o.address());
    if (c == null) {
      return;
    }
    int id = o.stream();
    StreamObserver<ClientFrame> s =
        Groups.stub(c.channel, group)
            .session(
                new StreamObserver<>() {
                  @Override
                  public void onNext(ServerFrame f) {
                    events.accept(m -> m.frame(id, f, now()));
                  }

                  @Override
                  public void onError(Throwable t) {
                    LOG.debug("stream to {} failed: {}", o.address(), t.toString());
                    events.accept(m -> m.streamEnded(id, now()));
                  }

                  @Override
                  public void onCompleted() {
                    events.accept(m -> m.streamEnded(id, now()));
                  }
                });
    streamId = id;
    stream = s;
    send(new Effect.Send(id, ClientFrame.newBuilder().setHello(o.hello()).build()));
  }

  void send(Effect.Send s) {
    if (s.stream() != streamId || stream == null || stopped.getAsBoolean()) {
      return;
    }
    try {
      stream.onNext(s.frame());
    } catch (RuntimeException e) {
      LOG.debug("write on stream {} failed: {}", s.stream(), e.toString());
      stream = null;
      int id = s.stream();
      events.accept(m -> m.streamEnded(id, now()));
    }
  }

  void endStream(int id, boolean cancel) {
    if (id != streamId || stream == null) {
      return;
    }
    StreamObserver<ClientFrame> s = stream;
    stream = null;
    try {
      if (cancel) {
        s.onError(Status.CANCELLED.withDescription("stream replaced").asRuntimeException());
      } else {
        s.onCompleted();
      }
    } catch (RuntimeException e) {
      LOG.debug("ending stream {}: {}", id, e.toString());
    }
  }

  private IdemTransport.@Nullable Connection connection(String address) {
    try {
      return transport.connection(address);
    } catch (IllegalStateException e) {
      events.accept(SessionMachine::transportClosed);
      return null;
    }
  }

  /**
   * A failed RPC in one line: its gRPC status and the innermost cause's message, which names what a
   * handshake refused ("Received fatal alert: certificate_required", "PKIX path building failed").
   */
  static String describe(Throwable t) {
    Status status = Status.fromThrowable(t);
    StringBuilder b = new StringBuilder(status.getCode().toString());
    if (status.getDescription() != null) {
      b.append(": ").append(status.getDescription());
    }
    Throwable root = t;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    if (root != t && root.getMessage() != null) {
      b.append(" (").append(root.getMessage()).append(')');
    }
    return b.toString().replace('\n', ' ');
  }
}
