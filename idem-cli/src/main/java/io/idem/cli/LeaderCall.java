package io.idem.cli;

import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.idem.client.ClientTls;
import io.idem.proto.Code;
import io.idem.proto.IdemGrpc;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import java.util.function.Function;
import javax.net.ssl.SSLException;

/**
 * One unary call that only the leader answers (a configuration or access-control change): sent to
 * the listed servers in turn until one leads, within {@code --timeout}, over TLS when the options
 * give it. A NOT_LEADER's hint is followed at once (at most {@link #MAX_REDIRECTS} times); without
 * a hint, or when a server does not answer, the next one is tried after {@link #RETRY_PAUSE}.
 *
 * @param <R> the reply
 */
final class LeaderCall<R> {
  /** Leader hints followed in one invocation; more means the cluster is changing leaders. */
  static final int MAX_REDIRECTS = 5;

  /**
   * The pause before the next server when one did not answer or knew no leader (an election may be
   * under way).
   */
  static final Duration RETRY_PAUSE = Duration.ofMillis(200);

  private final BiFunction<IdemGrpc.IdemBlockingStub, Long, R> call;
  private final Function<R, Code> code;
  private final Function<R, String> hint;

  /**
   * @param call sends the request on a stub with the time left (ns) as its deadline
   * @param code the reply's code
   * @param hint the reply's leader hint
   */
  LeaderCall(
      BiFunction<IdemGrpc.IdemBlockingStub, Long, R> call,
      Function<R, Code> code,
      Function<R, String> hint) {
    this.call = call;
    this.code = code;
    this.hint = hint;
  }

  /**
   * The first reply that is not NOT_LEADER.
   *
   * @throws IllegalStateException if no leader answered within the timeout
   */
  R send(ClientOptions options) throws InterruptedException {
    return send(options, -1);
  }

  /**
   * Sends the call to every Raft group of the cluster, the metadata group first, each to its
   * leader: a configuration or access-control change is replicated state of every group, which each
   * applies at its own log position. Stops at the first group that does not answer OK, and says
   * which groups took the change (run the command again: a change set twice is the same change). In
   * a cluster of one group, {@link #send(ClientOptions)}.
   *
   * @return the reply of group 1 (the only one, or the first data group), or the first that was not
   *     OK
   */
  R sendToEveryGroup(ClientOptions options) throws InterruptedException {
    int groups = groupCount(options);
    if (groups <= 1) {
      return send(options);
    }
    R first = null;
    for (int g = 0; g <= groups; g++) {
      R reply = send(options, g);
      if (code.apply(reply) != Code.OK) {
        if (g > 0) {
          System.err.println(
              "idem: the change was applied in groups 0 to "
                  + (g - 1)
                  + " and refused in group "
                  + g
                  + "; groups "
                  + g
                  + " to "
                  + groups
                  + " do not have it");
        }
        return reply;
      }
      if (g == 1) {
        first = reply;
      }
    }
    return first;
  }

  /** The Status of {@code address} (as group 1 sees it, with every hosted group's line). */
  static io.idem.proto.StatusReply status(ClientOptions options, String address) {
    ManagedChannel channel = open(address, options.tls());
    try {
      return IdemGrpc.newBlockingStub(channel)
          .withDeadlineAfter(options.timeout.toNanos(), TimeUnit.NANOSECONDS)
          .status(io.idem.proto.StatusRequest.getDefaultInstance());
    } finally {
      channel.shutdownNow();
    }
  }

  /** The number of data groups, from the first server that answers a Status; 1 if none does. */
  private static int groupCount(ClientOptions options) {
    for (String address : servers(options)) {
      ManagedChannel channel = open(address, options.tls());
      try {
        return Math.max(
            1,
            IdemGrpc.newBlockingStub(channel)
                .withDeadlineAfter(options.timeout.toNanos(), TimeUnit.NANOSECONDS)
                .status(io.idem.proto.StatusRequest.getDefaultInstance())
                .getMap()
                .getGroupCount());
      } catch (StatusRuntimeException e) {
        // the next server
      } finally {
        channel.shutdownNow();
      }
    }
    return 1;
  }

  /** {@link #send(ClientOptions)} to group {@code group}'s leader (-1: no group named). */
  R send(ClientOptions options, int group) throws InterruptedException {
    List<String> servers = servers(options);
    long deadline = System.nanoTime() + options.timeout.toNanos();
    int next = 0;
    int redirects = 0;
    String follow = "";
    String lastFailure = "no attempt";
    for (long left = options.timeout.toNanos(); left > 0; left = deadline - System.nanoTime()) {
      String address = follow.isEmpty() ? servers.get(next++ % servers.size()) : follow;
      follow = "";
      R reply = null;
      ManagedChannel channel = open(address, options.tls());
      try {
        reply =
            call.apply(
                inGroup(IdemGrpc.newBlockingStub(channel), group)
                    .withDeadlineAfter(left, TimeUnit.NANOSECONDS),
                left);
      } catch (StatusRuntimeException e) {
        lastFailure = address + ": " + Errors.oneLine(e);
      } finally {
        channel.shutdownNow();
      }
      if (reply != null && code.apply(reply) != Code.NOT_LEADER) {
        return reply;
      }
      if (reply != null) {
        lastFailure = address + " is not the leader";
        String h = hint.apply(reply);
        if (!h.isEmpty() && !h.equals(address) && redirects < MAX_REDIRECTS) {
          redirects++;
          follow = h;
          continue;
        }
      }
      long pause = Math.min(RETRY_PAUSE.toNanos(), deadline - System.nanoTime());
      if (pause > 0) {
        TimeUnit.NANOSECONDS.sleep(pause);
      }
    }
    throw new IllegalStateException(
        "no leader answered within " + options.timeout + " (" + lastFailure + ")");
  }

  private static IdemGrpc.IdemBlockingStub inGroup(IdemGrpc.IdemBlockingStub stub, int group) {
    if (group < 0) {
      return stub;
    }
    return stub.withInterceptors(io.idem.proto.GroupHeader.naming(group));
  }

  static List<String> servers(ClientOptions options) {
    List<String> out = new ArrayList<>();
    for (String s : options.servers.split(",")) {
      if (!s.isBlank()) {
        out.add(s.trim());
      }
    }
    if (out.isEmpty()) {
      throw new IllegalArgumentException("--servers must name at least one host:port");
    }
    return out;
  }

  private static ManagedChannel open(String address, ClientTls tls) {
    int colon = address.lastIndexOf(':');
    if (colon <= 0) {
      throw new IllegalArgumentException("server must be host:port, got \"" + address + "\"");
    }
    int port;
    try {
      port = Integer.parseInt(address.substring(colon + 1));
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("server must be host:port, got \"" + address + "\"");
    }
    NettyChannelBuilder b = NettyChannelBuilder.forAddress(address.substring(0, colon), port);
    if (tls == null) {
      return b.usePlaintext().build();
    }
    try {
      var ssl = GrpcSslContexts.forClient().trustManager(tls.trustedCertificates().toFile());
      if (tls.certificateChain() != null) {
        ssl.keyManager(tls.certificateChain().toFile(), tls.privateKey().toFile());
      }
      return b.sslContext(ssl.build()).build();
    } catch (SSLException e) {
      throw new IllegalArgumentException("cannot use the TLS files: " + e.getMessage(), e);
    }
  }
}
