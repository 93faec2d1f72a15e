package io.idem.keys.redis;

import io.lettuce.core.RedisURI;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * The store's {@code WAIT numreplicas timeout} after each script ({@link
 * RedisKeyStore.Builder#waitForReplicas}). WAIT counts the replicas that acknowledged every write
 * the client sent before it on the same connection, so it must go where the script went: the
 * store's own connection on a single node, and on Redis Cluster the connection to the node that ran
 * the script (which the script names, {@code CLUSTER MYID}: after a MOVED or ASK that is not the
 * node the topology named when the script left). Fewer replicas than asked fails the stage with
 * {@link ReplicasBehindException}. Thread-safe.
 */
final class ReplicaWait implements ScriptBatcher.AfterScript {

  /** Fewer replicas acknowledged the script's writes than asked, in time. */
  static final class ReplicasBehindException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    ReplicasBehindException(String message) {
      super(message);
    }
  }

  private final int replicas;
  private final long timeoutMs;
  private final @Nullable RedisAsyncCommands<byte[], byte[]> single;
  private final @Nullable StatefulRedisClusterConnection<byte[], byte[]> cluster;

  private ReplicaWait(
      int replicas,
      Duration timeout,
      @Nullable RedisAsyncCommands<byte[], byte[]> single,
      @Nullable StatefulRedisClusterConnection<byte[], byte[]> cluster) {
    this.replicas = replicas;
    this.timeoutMs = timeout.toMillis();
    this.single = single;
    this.cluster = cluster;
  }

  /** WAIT on the store's one connection (a single node, or the primary Sentinel named). */
  static ReplicaWait single(
      int replicas, Duration timeout, RedisAsyncCommands<byte[], byte[]> connection) {
    return new ReplicaWait(replicas, timeout, connection, null);
  }

  /** WAIT on the cluster connection's connection to the node that ran each script. */
  static ReplicaWait cluster(
      int replicas, Duration timeout, StatefulRedisClusterConnection<byte[], byte[]> connection) {
    return new ReplicaWait(replicas, timeout, null, connection);
  }

  @Override
  public boolean identify() {
    return cluster != null;
  }

  @Override
  public CompletableFuture<Void> await(byte @Nullable [] nodeId) {
    CompletableFuture<Long> acked;
    if (single != null) {
      acked = single.waitForReplication(replicas, timeoutMs).toCompletableFuture();
    } else {
      StatefulRedisClusterConnection<byte[], byte[]> c = cluster;
      String id = nodeId == null ? "" : new String(nodeId, StandardCharsets.US_ASCII);
      RedisClusterNode node = c == null ? null : c.getPartitions().getPartitionByNodeId(id);
      if (c == null || node == null) {
        return CompletableFuture.failedFuture(
            new ReplicasBehindException(
                "the script ran on node " + id + ", which the client's topology does not know"));
      }
      RedisURI uri = node.getUri();
      acked =
          c.getConnectionAsync(uri.getHost(), uri.getPort())
              .thenCompose(
                  n -> n.async().waitForReplication(replicas, timeoutMs).toCompletableFuture());
    }
    return acked.thenApply(
        n -> {
          if (n == null || n < replicas) {
            throw new ReplicasBehindException(
                "WAIT "
                    + replicas
                    + " "
                    + timeoutMs
                    + ": "
                    + n
                    + " replica(s) acknowledged the script's writes");
          }
          return null;
        });
  }
}
