package io.idem.hostile;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.idem.core.SessionSecret;
import io.idem.proto.Code;
import io.idem.proto.Operation;
import io.idem.proto.Put;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.testkit.Eventually;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a process that reads a node's data directory (a backup, a disk) learns of the sessions'
 * secrets: nothing. The Raft log and the snapshots hold each secret's SHA-256 only, for the secret
 * of a new session and for the one a resume presents.
 */
@Timeout(120)
class SecretsAtRestTest {
  @TempDir Path dir;

  @Test
  void noSessionSecretIsInTheLogOrTheSnapshots() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(1, dir, b -> b.snapshotEveryEntries(8))) {
      cluster.waitForLeader(Duration.ofSeconds(60));
      List<long[]> secrets = new java.util.ArrayList<>();
      try (RawSession s = new RawSession(cluster.clientAddress(0))) {
        RegisterReply named =
            s.register(
                RegisterRequest.newBuilder()
                    .setName("orders")
                    .setTtlMs(60_000)
                    .setNonce(1)
                    .setSecretHi(0x5EC12E7000000001L)
                    .setSecretLo(0x5EC12E7000000002L)
                    .build());
        assertThat(named.getCode()).isEqualTo(Code.OK);
        secrets.add(new long[] {named.getSecretHi(), named.getSecretLo()});
        RegisterReply anonymous = s.registerSession(2); // the leader chooses its secret
        secrets.add(new long[] {anonymous.getSecretHi(), anonymous.getSecretLo()});
        RegisterReply resumed =
            s.register(
                RegisterRequest.newBuilder()
                    .setName("orders")
                    .setTtlMs(60_000)
                    .setNonce(3)
                    .setResume(true)
                    .setSecretHi(named.getSecretHi())
                    .setSecretLo(named.getSecretLo())
                    .build());
        assertThat(resumed.getCode()).isEqualTo(Code.OK);
        s.open(resumed);
        for (int seq = 1; seq <= 20; seq++) {
          s.send(
              seq,
              seq,
              Operation.newBuilder()
                  .setPut(Put.newBuilder().setKey("k" + seq).setValue(ByteString.copyFromUtf8("v")))
                  .build());
          assertThat(s.answerTo(seq).getResult().getCode()).isEqualTo(Code.OK);
        }
      }
      Path data = cluster.node(0).config().dataDir();
      Eventually.until("a snapshot on disk", Duration.ofSeconds(30), () -> hasSnapshot(data));
      Eventually.until("no snapshot being written", Duration.ofSeconds(30), () -> !writing(data));
      byte[] everything = concat(files(data));
      for (long[] secret : secrets) {
        // Each half alone, in either byte order (protobuf's fixed64 is little-endian).
        for (long half : secret) {
          for (ByteOrder order : List.of(ByteOrder.BIG_ENDIAN, ByteOrder.LITTLE_ENDIAN)) {
            byte[] clear = ByteBuffer.allocate(8).order(order).putLong(half).array();
            assertThat(indexOf(everything, clear))
                .as("%016x (%s) of a secret in the data directory", half, order)
                .isEqualTo(-1);
          }
        }
        assertThat(indexOf(everything, SessionSecret.hash(secret[0], secret[1])))
            .as("its hash")
            .isNotNegative();
      }
    }
  }

  private static boolean hasSnapshot(Path data) {
    try {
      return files(data).stream()
          .map(f -> f.getFileName().toString())
          .anyMatch(f -> f.startsWith("snapshot.") && f.endsWith(".md5"));
    } catch (IOException | java.io.UncheckedIOException e) {
      return false; // a file went away while listed: look again
    }
  }

  private static boolean writing(Path data) {
    try {
      return files(data).stream().anyMatch(f -> f.getFileName().toString().endsWith(".tmp"));
    } catch (IOException | java.io.UncheckedIOException e) {
      return true;
    }
  }

  private static List<Path> files(Path dir) throws IOException {
    try (Stream<Path> all = Files.walk(dir)) {
      return all.filter(Files::isRegularFile).toList();
    }
  }

  private static byte[] concat(List<Path> files) throws IOException {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    for (Path f : files) {
      out.write(Files.readAllBytes(f));
    }
    return out.toByteArray();
  }

  private static int indexOf(byte[] haystack, byte[] needle) {
    outer:
    for (int i = 0; i + needle.length <= haystack.length; i++) {
      for (int j = 0; j < needle.length; j++) {
        if (haystack[i + j] != needle[j]) {
          continue outer;
        }
      }
      return i;
    }
    return -1;
  }
}
