package io.idem.lab;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.testkit.LocalCluster;
import io.idem.testkit.TestCertificates;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code idem bench} over mutual TLS against a 3-node cluster that requires client certificates,
 * and the one-line refusal of a client without a valid one.
 */
@Timeout(180)
class BenchTlsTest {
  /**
   * The bench's --timeout for a client the cluster refuses: a refused TLS handshake is retried like
   * any failed connection until the first write's deadline, and then reported with its cause.
   */
  static final String REFUSED_WITHIN = "3s";

  @TempDir static Path certsDir;
  @TempDir static Path dataDir;
  static TestCertificates certs;
  static LocalCluster cluster;
  static String servers;

  @BeforeAll
  static void start() throws Exception {
    certs = TestCertificates.create(certsDir);
    cluster = LocalCluster.start(3, dataDir, certs.securedNode("CN=client"));
    cluster.waitForLeader(Duration.ofSeconds(60));
    servers = String.join(",", cluster.clientAddresses());
  }

  @AfterAll
  static void stop() {
    if (cluster != null) {
      cluster.close();
    }
  }

  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  private int run(String... args) {
    return IdemLab.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
        .execute(args);
  }

  @Test
  void theBenchRunsOverMutualTls() {
    int exit =
        run(
            "bench",
            "--servers",
            servers,
            "--tls-ca",
            certs.certificate("ca").toString(),
            "--tls-cert",
            certs.certificate("client").toString(),
            "--tls-key",
            certs.key("client").toString(),
            "--timeout",
            "60s",
            "--sessions",
            "4",
            "--window",
            "8",
            "--warmup",
            "1s",
            "--duration",
            "3s");
    assertThat(exit).as(err.toString()).isZero();
    String[] lines = out.toString().strip().split("[\\r\\n]+");
    String json = lines[lines.length - 1];
    assertThat(json).contains("\"workload\":\"put\"").containsPattern("\"errors\":0[,}]");
    Matcher ops = Pattern.compile("\"ops\":(\\d+),").matcher(json);
    assertThat(ops.find()).as(json).isTrue();
    assertThat(Long.parseLong(ops.group(1))).isPositive();
  }

  @Test
  void aClientWithoutACertificateIsRefusedInOneLine() {
    int exit =
        run(
            "bench",
            "--servers",
            servers,
            "--tls-ca",
            certs.certificate("ca").toString(),
            "--timeout",
            REFUSED_WITHIN,
            "--duration",
            "1s");
    assertThat(exit).isEqualTo(1);
    String e = err.toString().strip();
    System.out.println("refused: " + e);
    assertThat(e.lines().count()).as(e).isEqualTo(1);
    assertThat(e).as("names the refused handshake").containsIgnoringCase("ssl");
    assertThat(e).startsWith("idem: ").doesNotContain("\tat ");
  }

  @Test
  void aClientCertificateFromAnotherCaIsRefusedInOneLine() {
    int exit =
        run(
            "bench",
            "--servers",
            servers,
            "--tls-ca",
            certs.certificate("ca").toString(),
            "--tls-cert",
            certs.certificate("stranger").toString(),
            "--tls-key",
            certs.key("stranger").toString(),
            "--timeout",
            REFUSED_WITHIN,
            "--duration",
            "1s");
    assertThat(exit).isEqualTo(1);
    String e = err.toString().strip();
    System.out.println("refused: " + e);
    assertThat(e.lines().count()).as(e).isEqualTo(1);
    assertThat(e).as("names the refused handshake").containsIgnoringCase("ssl");
    assertThat(e).startsWith("idem: ");
  }

  @Test
  void tlsOptionsWithALocalClusterAreAUsageError() {
    assertThat(run("bench", "--local", "1", "--tls-ca", certs.certificate("ca").toString()))
        .isEqualTo(2);
    assertThat(err.toString()).contains("--tls-* apply to an Idem cluster at --servers");
  }
}
