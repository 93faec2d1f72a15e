package io.idem.hostile;

import io.idem.server.IdemServer;
import io.idem.server.ServerConfig;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

/**
 * The main class of a single node that a test runs in a JVM of its own (the testkit cannot see
 * {@code idem server}, whose module tests against the testkit). Takes {@code --id=}, {@code
 * --data-dir=}, {@code --client-address=}, {@code --raft-address=}, {@code --admin-address=} and
 * {@code --stream-stall-timeout-ms=}; runs until SIGTERM.
 */
public final class NodeProcess {
  private NodeProcess() {}

  /** Starts the node the flags describe and waits for SIGTERM. */
  public static void main(String[] args) throws Exception {
    Map<String, String> flags = new HashMap<>();
    for (String arg : args) {
      int eq = arg.indexOf('=');
      if (!arg.startsWith("--") || eq < 0) {
        throw new IllegalArgumentException("expected --name=value, got " + arg);
      }
      flags.put(arg.substring(2, eq), arg.substring(eq + 1));
    }
    String id = flags.remove("id");
    ServerConfig config =
        ServerConfig.builder()
            .id(id)
            .dataDir(Path.of(flags.remove("data-dir")))
            .peers(
                List.of(
                    new ServerConfig.Peer(
                        id, flags.remove("raft-address"), flags.remove("client-address"))))
            .adminAddress(flags.remove("admin-address"))
            .streamStallTimeoutMs(Long.parseLong(flags.remove("stream-stall-timeout-ms")))
            .build();
    if (!flags.isEmpty()) {
      throw new IllegalArgumentException("unknown flags " + flags.keySet());
    }
    IdemServer server = IdemServer.start(config);
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  try {
                    server.close();
                  } catch (Exception e) {
                    System.err.println("stopping: " + e);
                  }
                  stopped.countDown();
                }));
    System.out.println("node " + id + " serving clients on " + config.clientListenAddress());
    stopped.await();
  }
}
