package io.idem.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.testkit.LocalCluster;
import io.idem.testkit.TestCertificates;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code idem auth}, {@code idem config set} and {@code idem status} against a TLS node with access
 * control, as an admin ({@code CN=admin}) and as a tenant.
 */
@Timeout(120)
class AuthCommandTest {
  @TempDir static Path certsDir;
  @TempDir static Path dataDir;
  static TestCertificates certs;
  static LocalCluster cluster;
  static String servers;

  @BeforeAll
  static void start() throws Exception {
    certs = TestCertificates.create(certsDir);
    cluster = LocalCluster.start(1, dataDir, certs.securedNode("CN=admin"));
    cluster.waitForLeader(Duration.ofSeconds(60));
    servers = cluster.clientAddress(0);
  }

  @AfterAll
  static void stop() {
    if (cluster != null) {
      cluster.close();
    }
  }

  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  /** Runs {@code idem args...} as {@code who} (a certificate of the test CA). */
  private int as(String who, String... args) {
    List<String> all = new ArrayList<>(List.of(args));
    all.addAll(
        List.of(
            "--servers",
            servers,
            "--timeout",
            "20s",
            "--tls-ca",
            certs.certificate("ca").toString(),
            "--tls-cert",
            certs.certificate(who).toString(),
            "--tls-key",
            certs.key(who).toString()));
    return Idem.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
        .execute(all.toArray(String[]::new));
  }

  @Test
  void anAdminGrantsRolesAndChangesTheConfigurationATenantCannot() {
    assertThat(
            as(
                "admin",
                "auth",
                "role",
                "put",
                "tenant-a",
                "--kv-write",
                "tenant-a/",
                "--key-scope",
                "tenant-a",
                "--lease",
                "tenant-a/"))
        .as(err.toString())
        .isZero();
    assertThat(as("admin", "auth", "grant", "CN=tenant-a", "tenant-a")).as(err.toString()).isZero();
    out.getBuffer().setLength(0);
    assertThat(as("admin", "auth", "show")).isZero();
    assertThat(out.toString())
        .contains("auth on")
        .contains("role admin admin")
        .contains("role tenant-a kv-read-write=tenant-a/ key-scope=tenant-a lease=tenant-a/")
        .contains("principal CN=admin roles admin")
        .contains("principal CN=tenant-a roles tenant-a");

    assertThat(as("tenant-a", "auth", "show")).isEqualTo(1);
    assertThat(err.toString()).contains("PERMISSION_DENIED").contains("CN=tenant-a may not");
    err.getBuffer().setLength(0);
    assertThat(as("tenant-a", "config", "set", "--max-value-bytes", "16")).isEqualTo(1);
    assertThat(err.toString()).contains("PERMISSION_DENIED");
    assertThat(as("admin", "config", "set", "--max-value-bytes", "64KiB"))
        .as(err.toString())
        .isZero();
    assertThat(cluster.node(0).status().getLimits().getMaxValueBytes()).isEqualTo(64 << 10);

    assertThat(as("tenant-a", "kv", "put", "tenant-a/x", "1")).as(err.toString()).isZero();
    err.getBuffer().setLength(0);
    assertThat(as("tenant-a", "kv", "put", "tenant-b/x", "1")).isEqualTo(1);
    assertThat(err.toString()).contains("has no KV_READ_WRITE permission for \"tenant-b/x\"");
  }

  @Test
  void statusSaysWhetherAuthIsOnAndTheLogFormats() {
    assertThat(as("admin", "status")).isZero();
    assertThat(out.toString()).contains("auth: on").contains("log-format: 9; max-log-format: n1=9");
  }
}
