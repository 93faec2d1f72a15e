package io.idem.verify;

import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.idem.client.ClusterStatus;
import io.idem.testkit.FaultProxy;
import io.idem.testkit.TestCertificates;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * One slot of a {@link ProcessCluster}: a node's identity (its id, its own client and Raft ports,
 * the {@link FaultProxy} clients reach it through) and its state (member or joiner, removed, its
 * process, paused, the channel its status is asked on). A replaced node's slot takes a new {@code
 * Node}. Not thread-safe: the cluster guards its nodes with its own lock.
 */
final class Node {
  final String id;
  final String listenAddress;
  final String raftAddress;
  final FaultProxy proxy;

  /** Started with {@code --join}, until a membership change adds it. */
  final boolean joiner;

  boolean member;
  boolean removed;
  Process process;
  boolean paused;
  ManagedChannel statusChannel;

  /** Flags added to the node's command line from its next start on. */
  List<String> extraArgs;

  /** A node {@code id} on new free loopback ports, with its client proxy started. */
  Node(String id, boolean joiner, List<String> extraArgs) {
    this.id = id;
    this.listenAddress = "127.0.0.1:" + freePort();
    this.raftAddress = "127.0.0.1:" + freePort();
    this.proxy = FaultProxy.start(listenAddress);
    this.joiner = joiner;
    this.member = !joiner;
    this.extraArgs = extraArgs;
  }

  /** The node as a member: its id, Raft address and advertised (proxy) client address. */
  ClusterStatus.Member asMember() {
    return new ClusterStatus.Member(id, raftAddress, proxy.address());
  }

  boolean isRunning() {
    return process != null && process.isAlive() && !paused;
  }

  /** SIGKILL: the process dies at once, its data directory stays. */
  void kill() {
    Process p = process;
    if (p == null) {
      return;
    }
    if (paused) {
      ProcessCluster.signal(p, "CONT"); // a stopped process still dies of SIGKILL; resume it too
    }
    p.destroyForcibly();
    try {
      if (!p.waitFor(10, TimeUnit.SECONDS)) {
        throw new IllegalStateException(id + " did not die of SIGKILL in 10 s");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    process = null;
    paused = false;
  }

  /** SIGSTOP: the process freezes (no heartbeats, no answers) until {@link #resume}. */
  void pause() {
    if (process != null && !paused) {
      ProcessCluster.signal(process, "STOP");
      paused = true;
    }
  }

  /** SIGCONT. */
  void resume() {
    if (process != null && paused) {
      ProcessCluster.signal(process, "CONT");
      paused = false;
    }
  }

  Optional<Long> pid() {
    return process == null ? Optional.empty() : Optional.of(process.pid());
  }

  /**
   * The channel to the node's own client port (not its proxy), made on first use; TLS as the admin
   * when {@code certs} is not null.
   */
  ManagedChannel statusChannel(TestCertificates certs) {
    if (statusChannel == null) {
      int colon = listenAddress.lastIndexOf(':');
      NettyChannelBuilder b =
          NettyChannelBuilder.forAddress(
              listenAddress.substring(0, colon),
              Integer.parseInt(listenAddress.substring(colon + 1)));
      if (certs == null) {
        b.usePlaintext();
      } else {
        try {
          b.sslContext(
              GrpcSslContexts.forClient()
                  .trustManager(certs.certificate("ca").toFile())
                  .keyManager(certs.certificate("admin").toFile(), certs.key("admin").toFile())
                  .build());
        } catch (javax.net.ssl.SSLException e) {
          throw new IllegalStateException("cannot use the test certificates", e);
        }
      }
      statusChannel = b.build();
    }
    return statusChannel;
  }

  /** Closes {@code ch}, and forgets it if it is still this node's status channel. */
  void dropStatusChannel(ManagedChannel ch) {
    if (statusChannel == ch) {
      statusChannel = null;
    }
    ch.shutdownNow();
  }

  /** Closes the status channel, if any. */
  void dropStatusChannel() {
    if (statusChannel != null) {
      dropStatusChannel(statusChannel);
    }
  }

  /** A free loopback port below the ephemeral range, so that a node restarts on it after a kill. */
  private static int freePort() {
    return io.idem.testkit.LocalCluster.freePort();
  }
}
