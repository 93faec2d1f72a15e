package io.idem.testkit.stores;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

/**
 * One Redis command over a socket of its own (RESP2), for {@link RedisCluster}'s polls and faults:
 * cheaper than a {@code redis-cli} process, which a loaded 2-core machine takes tens of
 * milliseconds to fork. Stateless.
 */
final class RespCommand {
  private static final byte[] CRLF = {'\r', '\n'};

  private RespCommand() {}

  /**
   * Sends {@code args} as one command to the node on {@code port} and returns its reply as {@code
   * redis-cli} prints it, trimmed: a bulk or simple string as its text, an integer as its digits,
   * an error as its message (such as {@code ERR ...} or {@code MOVED ...}), nil as "", an array as
   * its elements one per line.
   *
   * @throws UncheckedIOException if the node cannot be reached or does not answer in 10 s
   */
  static String send(int port, String... args) {
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 2_000);
      socket.setSoTimeout(10_000);
      OutputStream out = new BufferedOutputStream(socket.getOutputStream());
      out.write(("*" + args.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
      for (String a : args) {
        byte[] b = a.getBytes(StandardCharsets.UTF_8);
        out.write(("$" + b.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
        out.write(b);
        out.write(CRLF);
      }
      out.flush();
      StringBuilder reply = new StringBuilder();
      readReply(new BufferedInputStream(socket.getInputStream()), reply);
      return reply.toString().trim();
    } catch (IOException e) {
      throw new UncheckedIOException("node " + port + ": " + String.join(" ", args), e);
    }
  }

  private static void readReply(InputStream in, StringBuilder into) throws IOException {
    String line = readLine(in);
    if (line.isEmpty()) {
      throw new IOException("empty reply line");
    }
    char type = line.charAt(0);
    String rest = line.substring(1);
    switch (type) {
      case '+', '-', ':' -> into.append(rest).append('\n');
      case '$' -> {
        int n = Integer.parseInt(rest);
        if (n >= 0) {
          byte[] b = in.readNBytes(n + 2);
          if (b.length != n + 2) {
            throw new IOException("short bulk reply");
          }
          into.append(new String(b, 0, n, StandardCharsets.UTF_8)).append('\n');
        } else {
          into.append('\n');
        }
      }
      case '*' -> {
        int n = Integer.parseInt(rest);
        for (int i = 0; i < n; i++) {
          readReply(in, into);
        }
      }
      default -> throw new IOException("unexpected reply: " + line);
    }
  }

  private static String readLine(InputStream in) throws IOException {
    StringBuilder b = new StringBuilder();
    while (true) {
      int c = in.read();
      if (c < 0) {
        throw new IOException("connection closed mid-reply");
      }
      if (c == '\r') {
        if (in.read() != '\n') {
          throw new IOException("malformed reply line: " + b);
        }
        return b.toString();
      }
      b.append((char) c);
    }
  }
}
