package io.idem.hostile;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.idem.client.IdemClient;
import io.idem.client.KeyAcquisition;
import io.idem.client.KeySettlement;
import io.idem.client.NoSpaceException;
import io.idem.proto.Code;
import io.idem.proto.ConfigureRequest;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The backend budget's {@code NO_SPACE} alarm on a real node: writes that grow the state past the
 * budget are refused for every client, the alarm shows on {@code Status}, the status page's JSON
 * and {@code /metrics}; reads, deletes, completions and releases go on; and the alarm clears once
 * deletes bring the state below 90% of the budget.
 */
@Timeout(120)
class BackendAlarmTest {
  static final long BUDGET = 2L << 20;

  @TempDir static Path dir;
  static LocalCluster cluster;
  static final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  @BeforeAll
  static void start() {
    cluster = LocalCluster.start(1, dir, b -> b.adminAddress("127.0.0.1:0"));
    cluster.waitForLeader(Duration.ofSeconds(30));
  }

  @AfterAll
  static void stop() {
    if (cluster != null) {
      cluster.close();
    }
  }

  static String get(String path) throws Exception {
    HttpResponse<String> r =
        http.send(
            HttpRequest.newBuilder(
                    URI.create("http://127.0.0.1:" + cluster.node(0).adminPort() + path))
                .timeout(Duration.ofSeconds(10))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).as(path).isEqualTo(200);
    return r.body();
  }

  static double alarmMetric() throws Exception {
    for (String line : get("/metrics").split("\n")) {
      if (line.startsWith("idem_backend_alarm ") || line.startsWith("idem_backend_alarm{")) {
        return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
      }
    }
    throw new AssertionError("no idem_backend_alarm in /metrics");
  }

  static boolean alarmOnStatusPage() throws Exception {
    JsonNode status = new ObjectMapper().readTree(get("/api/status"));
    return status.get("nodes").get(0).get("noSpaceAlarm").asBoolean();
  }

  @Test
  void theAlarmIsRaisedAtTheBudgetAndClearedOnceTheStateShrinks() throws Exception {
    try (RawSession operator = new RawSession(cluster.clientAddress(0))) {
      assertThat(
              operator
                  .configure(ConfigureRequest.newBuilder().setBackendBytes(BUDGET).build())
                  .getCode())
          .isEqualTo(Code.OK);
    }
    assertThat(alarmMetric()).isZero();
    byte[] value = new byte[64 << 10];
    try (IdemClient writer = IdemClient.builder().servers(cluster.clientAddresses()).build();
        IdemClient other = IdemClient.builder().servers(cluster.clientAddresses()).build()) {
      KeyAcquisition.Acquired held =
          (KeyAcquisition.Acquired)
              other.acquireKey(
                  "t",
                  "held",
                  "f".getBytes(StandardCharsets.UTF_8),
                  Duration.ofMinutes(1),
                  Duration.ofHours(1));
      KeyAcquisition.Acquired toRelease =
          (KeyAcquisition.Acquired)
              other.acquireKey(
                  "t",
                  "released",
                  "f".getBytes(StandardCharsets.UTF_8),
                  Duration.ofMinutes(1),
                  Duration.ofHours(1));
      int written = 0;
      NoSpaceException refused = null;
      while (refused == null && written < 100) {
        try {
          writer.put("big/" + written, value);
          written++;
        } catch (NoSpaceException e) {
          refused = e;
        }
      }
      assertThat(refused).as("refused within 100 writes of 64 KiB").isNotNull();
      assertThat(refused.getMessage()).contains("backend budget", "of " + BUDGET + " bytes");
      assertThat(written).isBetween(20, 40);
      assertThat(cluster.node(0).status().getNoSpaceAlarm()).isTrue();
      assertThat(cluster.node(0).status().getBackendUsedBytes()).isGreaterThanOrEqualTo(BUDGET);
      assertThat(alarmMetric()).isEqualTo(1.0);
      assertThat(alarmOnStatusPage()).isTrue();

      // Every client is refused growth; reads, completions, releases and deletes go on.
      assertThatThrownBy(() -> other.put("small", "x")).isInstanceOf(NoSpaceException.class);
      assertThat(other.get("big/0")).isPresent();
      assertThat(other.completeKey("t", "held", held.token(), new byte[16]))
          .isInstanceOf(KeySettlement.Settled.class);
      assertThat(other.releaseKey("t", "released", toRelease.token()))
          .isInstanceOf(KeySettlement.Settled.class);
      int deleted = 0;
      while (cluster.node(0).status().getNoSpaceAlarm() && deleted < written) {
        assertThat(writer.delete("big/" + deleted).existed()).isTrue();
        deleted++;
      }
      assertThat(cluster.node(0).status().getNoSpaceAlarm()).isFalse();
      assertThat(cluster.node(0).status().getBackendUsedBytes()).isLessThan(BUDGET * 9 / 10);
      assertThat(deleted).isGreaterThan(1);
      assertThat(alarmMetric()).isZero();
      assertThat(alarmOnStatusPage()).isFalse();
      assertThat(other.put("small", "x").version()).isEqualTo(1);
    }
  }
}
