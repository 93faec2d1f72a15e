package io.idem.keys.redis;

import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.async.RedisScriptingAsyncCommands;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * One of the store's Lua scripts (the shared prelude, then its body): run with EVALSHA, and with
 * EVAL when the server answers NOSCRIPT (its script cache was flushed, or it restarted). A NOSCRIPT
 * answer ran nothing, so the fallback never runs a transition twice. Immutable.
 */
final class KeyScript {
  private static final String DIR = "/io/idem/keys/redis/";

  /** Every transition, one or a batch of them per call ({@link ScriptBatcher}). */
  static final KeyScript TRANSITIONS = load("transitions.lua");

  private final String name;
  private final byte[] body;
  private final String sha1;

  private KeyScript(String name, byte[] body) {
    this.name = name;
    this.body = body;
    try {
      this.sha1 = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-1").digest(body));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JDK has SHA-1", e);
    }
  }

  private static KeyScript load(String file) {
    String text = read("prelude.lua") + "\n" + read(file);
    return new KeyScript(file, text.getBytes(StandardCharsets.UTF_8));
  }

  private static String read(String file) {
    try (InputStream in = KeyScript.class.getResourceAsStream(DIR + file)) {
      if (in == null) {
        throw new IllegalStateException("missing script resource " + DIR + file);
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The script's file name, for messages. */
  String name() {
    return name;
  }

  /** The SHA-1 the server caches the script under. */
  String sha1() {
    return sha1;
  }

  /** Runs the script: one round trip, or two when the server had to be sent the body. */
  CompletableFuture<List<Object>> run(
      RedisScriptingAsyncCommands<byte[], byte[]> redis, byte[][] keys, byte[]... args) {
    CompletableFuture<List<Object>> bySha =
        redis.<List<Object>>evalsha(sha1, ScriptOutputType.MULTI, keys, args).toCompletableFuture();
    return bySha.exceptionallyCompose(
        e -> {
          if (isNoScript(e)) {
            return redis
                .<List<Object>>eval(body, ScriptOutputType.MULTI, keys, args)
                .toCompletableFuture();
          }
          return CompletableFuture.failedFuture(e);
        });
  }

  private static boolean isNoScript(Throwable e) {
    Throwable t = e;
    while (t instanceof CompletionException && t.getCause() != null) {
      t = t.getCause();
    }
    return t instanceof RedisNoScriptException
        || (t.getMessage() != null && t.getMessage().startsWith("NOSCRIPT"));
  }
}
