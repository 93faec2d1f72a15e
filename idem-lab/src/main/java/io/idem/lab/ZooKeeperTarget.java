package io.idem.lab;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;

/**
 * ZooKeeper as a bench target, beside etcd: the same puts, as znode writes through the ZooKeeper
 * client's asynchronous calls. Like etcd's, session s writes its keys {@code s/(n mod 1000)}: a
 * key's first write creates its znode (or, if an earlier run left it, sets it), later ones set it.
 * A client handle keeps one connection to one server of the ensemble (it forwards writes to the
 * leader), so the sessions share up to {@link #HANDLES} handles, each connected where the client
 * library picks, to spread over the servers. Nothing is retried: a write whose answer is lost fails
 * the operation.
 *
 * <p>With the get workload, a read is ZooKeeper's recipe for an up-to-date read: a {@code sync} of
 * the znode, then its {@code getData} on the same handle, which the server answers only after the
 * sync (a handle's requests are processed in order).
 */
final class ZooKeeperTarget implements BenchTarget {
  /** The znode under which the bench writes. */
  static final String ROOT = "/idem-bench";

  /** Most client handles (connections) the sessions share. */
  static final int HANDLES = 8;

  private static final int KEYS_PER_SESSION = 1000;
  private static final long CALL_TIMEOUT_S = 30;
  private static final int SESSION_TIMEOUT_MS = 30_000;

  private final List<ZooKeeper> handles;
  private final byte[] value;
  private final boolean reads;

  private ZooKeeperTarget(List<ZooKeeper> handles, int valueSize, boolean reads) {
    this.handles = handles;
    this.value = new byte[valueSize];
    this.reads = reads;
  }

  /**
   * Handles for the comma-separated {@code host:port} client addresses of a ZooKeeper ensemble,
   * each connected within {@code timeoutMs}, and the root znode created.
   *
   * @throws IllegalStateException if a handle did not connect in time
   */
  static ZooKeeperTarget connect(
      String servers, int valueSize, BenchCommand.Workload workload, int sessions, long timeoutMs)
      throws IOException, InterruptedException {
    List<ZooKeeper> handles = new ArrayList<>();
    try {
      for (int i = 0; i < Math.min(HANDLES, Math.max(1, sessions)); i++) {
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk =
            new ZooKeeper(
                servers,
                SESSION_TIMEOUT_MS,
                e -> {
                  if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                    connected.countDown();
                  }
                });
        handles.add(zk);
        if (!connected.await(timeoutMs, TimeUnit.MILLISECONDS)) {
          throw new IllegalStateException(
              "ZooKeeper at " + servers + " did not accept a session within " + timeoutMs + " ms");
        }
      }
      try {
        handles
            .get(0)
            .create(ROOT, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
      } catch (KeeperException.NodeExistsException e) {
        // an earlier run's
      } catch (KeeperException e) {
        throw new IllegalStateException("ZooKeeper refused to create " + ROOT + ": " + e, e);
      }
    } catch (IOException | InterruptedException | RuntimeException e) {
      for (ZooKeeper zk : handles) {
        zk.close();
      }
      throw e;
    }
    return new ZooKeeperTarget(handles, valueSize, workload == BenchCommand.Workload.get);
  }

  @Override
  public String name() {
    return "zookeeper";
  }

  @Override
  public void prepare() throws InterruptedException, ExecutionException, TimeoutException {
    if (!reads) {
      return;
    }
    ZooKeeper zk = handles.get(0);
    for (int k = 0; k < READ_KEYS; k++) {
      CompletableFuture<String> f = new CompletableFuture<>();
      write(zk, readPath(k), true, f);
      f.get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
    }
  }

  private static String readPath(long n) {
    return ROOT + "/" + BenchTarget.readKey(n).replace('/', '-');
  }

  @Override
  public CompletableFuture<?> op(int session, long n) {
    ZooKeeper zk = handles.get(session % handles.size());
    if (reads) {
      return read(zk, readPath(n)).orTimeout(CALL_TIMEOUT_S, TimeUnit.SECONDS);
    }
    String path = ROOT + "/" + session + "-" + (n % KEYS_PER_SESSION);
    CompletableFuture<String> f = new CompletableFuture<>();
    write(zk, path, n < KEYS_PER_SESSION, f);
    return f.orTimeout(CALL_TIMEOUT_S, TimeUnit.SECONDS);
  }

  /** Writes the value at {@code path}: creates it first if {@code create} (or sets it if it is). */
  private void write(ZooKeeper zk, String path, boolean create, CompletableFuture<String> f) {
    if (create) {
      zk.create(
          path,
          value,
          ZooDefs.Ids.OPEN_ACL_UNSAFE,
          CreateMode.PERSISTENT,
          (rc, p, ctx, name) -> {
            if (rc == KeeperException.Code.NODEEXISTS.intValue()) {
              set(zk, path, f);
            } else {
              settle(f, rc, path);
            }
          },
          null);
    } else {
      set(zk, path, f);
    }
  }

  /** A sync of {@code path}, then its data, which must be there. */
  private static CompletableFuture<byte[]> read(ZooKeeper zk, String path) {
    CompletableFuture<byte[]> f = new CompletableFuture<>();
    zk.sync(
        path,
        (rc, p, ctx) -> {
          if (rc != KeeperException.Code.OK.intValue()) {
            f.completeExceptionally(KeeperException.create(KeeperException.Code.get(rc), p));
          }
        },
        null);
    zk.getData(
        path,
        false,
        (rc, p, ctx, data, stat) -> {
          if (rc == KeeperException.Code.OK.intValue()) {
            f.complete(data);
          } else {
            f.completeExceptionally(KeeperException.create(KeeperException.Code.get(rc), p));
          }
        },
        null);
    return f;
  }

  private void set(ZooKeeper zk, String path, CompletableFuture<String> f) {
    zk.setData(path, value, -1, (rc, p, ctx, stat) -> settle(f, rc, path), null);
  }

  private static void settle(CompletableFuture<String> f, int rc, String path) {
    if (rc == KeeperException.Code.OK.intValue()) {
      f.complete(path);
    } else {
      f.completeExceptionally(KeeperException.create(KeeperException.Code.get(rc), path));
    }
  }

  @Override
  public void close() {
    for (ZooKeeper zk : handles) {
      try {
        zk.close();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }
}
