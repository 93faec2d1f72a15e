package io.idem.testkit.stores;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The redis-server launcher: its AOF settings, a kill and a restart on the same port and data. */
@Timeout(120)
class RedisServerTest {
  @TempDir Path dir;

  @Test
  void aKilledServerRestartsOnItsPortAndKeepsWhatItsAofFsynced() throws IOException {
    try (RedisServer redis = RedisServer.start(dir.resolve("always"), RedisServer.Aof.ALWAYS)) {
      long first = redis.pid();
      assertThat(call(redis.port(), "SET", "k", "v")).isEqualTo("+OK");
      assertThat(call(redis.port(), "CONFIG", "GET", "appendfsync")).contains("always");
      redis.kill();
      assertThat(redis.isRunning()).isFalse();
      redis.restart();
      assertThat(redis.pid()).isNotEqualTo(first);
      assertThat(call(redis.port(), "GET", "k")).isEqualTo("$1\r\nv");
      assertThat(Files.isDirectory(redis.dir().resolve("appendonlydir"))).isTrue();
    }
  }

  @Test
  void withoutAnAofNothingSurvivesAKillAndNoAofIsWritten() throws IOException {
    try (RedisServer redis = RedisServer.start(dir.resolve("off"), RedisServer.Aof.OFF)) {
      assertThat(call(redis.port(), "SET", "k", "v")).isEqualTo("+OK");
      redis.kill();
      redis.restart();
      assertThat(call(redis.port(), "GET", "k")).isEqualTo("$-1");
      assertThat(Files.exists(redis.dir().resolve("appendonlydir"))).isFalse();
    }
  }

  @Test
  void appendfsyncIsNamedAsRedisNamesIt() {
    assertThat(RedisServer.Aof.named("everysec")).isEqualTo(RedisServer.Aof.EVERYSEC);
    assertThat(RedisServer.Aof.named("no")).isEqualTo(RedisServer.Aof.NO);
    assertThat(RedisServer.Aof.named("off")).isEqualTo(RedisServer.Aof.OFF);
    assertThatThrownBy(() -> RedisServer.Aof.named("sometimes"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("sometimes");
    assertThatThrownBy(
            () -> RedisServer.start("/nonexistent/redis-server", dir, RedisServer.Aof.OFF))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("/nonexistent/redis-server");
  }

  /** One command in RESP; the reply's text without its last CRLF (enough for these replies). */
  private static String call(int port, String... args) throws IOException {
    StringBuilder b = new StringBuilder("*" + args.length + "\r\n");
    for (String a : args) {
      b.append('$').append(a.length()).append("\r\n").append(a).append("\r\n");
    }
    try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
      s.setSoTimeout(5_000);
      OutputStream out = s.getOutputStream();
      out.write(b.toString().getBytes(StandardCharsets.US_ASCII));
      out.flush();
      s.shutdownOutput();
      InputStream in = s.getInputStream();
      String reply = new String(in.readAllBytes(), StandardCharsets.US_ASCII);
      return reply.endsWith("\r\n") ? reply.substring(0, reply.length() - 2) : reply;
    }
  }
}
