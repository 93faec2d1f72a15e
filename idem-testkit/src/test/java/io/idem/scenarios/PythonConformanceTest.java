package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import io.idem.testkit.LocalCluster;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A client in another language, written from docs/PROTOCOL.md and the .proto files only ({@code
 * src/test/python/conformance.py}), against a real 3-node cluster: registration, pipelining,
 * duplicates with their saved answers, half-close draining, resume on a new stream. Needs Debian's
 * python3-grpcio, python3-protobuf and protoc, which {@code ./run-tests} installs; without them
 * this test fails (it must not pass by skipping).
 */
@Timeout(240)
class PythonConformanceTest {
  private static final String PYTHON = "/usr/bin/python3";
  private static final Path SCRIPT = Path.of("src/test/python/conformance.py");
  private static final Path PROTOS = Path.of("../idem-proto/src/main/proto");

  /** How long the script may run before it is stopped. */
  private static final Duration SCRIPT_LIMIT = Duration.ofSeconds(120);

  @TempDir Path dir;

  @Test
  void aPythonClientWrittenFromTheDocsGetsWhatTheProtocolPromises() throws Exception {
    requirePackages();
    try (LocalCluster cluster = LocalCluster.start(3, dir.resolve("cluster"))) {
      cluster.waitForLeader(Duration.ofSeconds(60));
      Path output = dir.resolve("python.out");
      Process p =
          new ProcessBuilder(
                  PYTHON,
                  SCRIPT.toString(),
                  PROTOS.toString(),
                  String.join(",", cluster.clientAddresses()))
              .redirectErrorStream(true)
              .redirectOutput(output.toFile())
              .start();
      int exit;
      try {
        if (!p.waitFor(SCRIPT_LIMIT.toSeconds(), TimeUnit.SECONDS)) {
          fail("the Python client overran " + SCRIPT_LIMIT + "; its output:\n" + read(output));
        }
        exit = p.exitValue();
      } finally {
        stop(p);
      }
      String out = read(output);
      System.out.println("Python client output:\n" + out);
      assertThat(exit).as("exit status; output:\n%s", out).isZero();
      assertThat(out)
          .contains("ok: Register at the leader")
          .contains("are answered duplicate = true")
          .contains("duplicates carry the saved answers, unchanged")
          .contains("after the half-close all 20 answers owed arrived")
          .contains("then the server ended the stream")
          .contains("request 41 continues the numbering: counter 41")
          .contains("a linearizable Get reads 41")
          .contains("PASS: Python client conformance")
          .doesNotContain("FAIL");
      cluster.awaitEqualDigests(Duration.ofSeconds(30));
    }
  }

  /** Fails, naming the fix, unless python3 with grpc and protobuf, and protoc, are installed. */
  private void requirePackages() throws Exception {
    String missing = "";
    if (run(List.of(PYTHON, "-c", "import grpc, google.protobuf")) != 0) {
      missing += " python3-grpcio python3-protobuf";
    }
    if (run(List.of("protoc", "--version")) != 0) {
      missing += " protobuf-compiler";
    }
    if (!missing.isEmpty()) {
      fail(
          "the Python conformance test needs the Debian packages"
              + missing
              + ": run ./run-tests at the repository root (it installs them, then runs the build)");
    }
  }

  private int run(List<String> command) throws InterruptedException {
    Process p;
    try {
      p =
          new ProcessBuilder(command)
              .redirectErrorStream(true)
              .redirectOutput(ProcessBuilder.Redirect.DISCARD)
              .start();
    } catch (IOException notFound) {
      return -1;
    }
    try {
      return p.waitFor(30, TimeUnit.SECONDS) ? p.exitValue() : -1;
    } finally {
      stop(p);
    }
  }

  /** Stops {@code p} by its PID, and its children, if it still runs. */
  private static void stop(Process p) throws InterruptedException {
    ProcessHandle.of(p.pid())
        .ifPresent(
            h -> {
              h.descendants().forEach(ProcessHandle::destroyForcibly);
              h.destroyForcibly();
            });
    p.waitFor(10, TimeUnit.SECONDS);
  }

  private static String read(Path file) throws IOException {
    return Files.exists(file) ? Files.readString(file, StandardCharsets.UTF_8) : "";
  }
}
