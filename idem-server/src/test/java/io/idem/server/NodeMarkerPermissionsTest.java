package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A node's data directory is 0700 and its marker 0600: Ratis's log and snapshots inside hold every
 * session's secret. The tests run as root in CI, who reads any file, so they look at the mode bits.
 */
class NodeMarkerPermissionsTest {
  @TempDir Path dir;

  @BeforeEach
  void posixOnly() {
    assumeTrue(
        dir.getFileSystem().supportedFileAttributeViews().contains("posix"),
        "the file system has no POSIX permissions");
  }

  private static String mode(Path p) throws IOException {
    return PosixFilePermissions.toString(Files.getPosixFilePermissions(p));
  }

  @Test
  void newDataDirectoryIsOwnerOnly() throws Exception {
    Path data = dir.resolve("data").resolve("n1");
    NodeMarker.claim(data, "n1");
    assertThat(mode(data)).isEqualTo("rwx------");
    assertThat(mode(data.resolve(NodeMarker.NAME))).isEqualTo("rw-------");
  }

  @Test
  void existingOpenDataDirectoryIsTightened() throws Exception {
    Path data = dir.resolve("n1");
    Files.createDirectory(data);
    Files.setPosixFilePermissions(data, PosixFilePermissions.fromString("rwxr-xr-x"));
    NodeMarker.claim(data, "n1");
    assertThat(mode(data)).isEqualTo("rwx------");
    assertThat(mode(data.resolve(NodeMarker.NAME))).isEqualTo("rw-------");
  }

  @Test
  void openDataDirectoryOfARestartedNodeIsTightened() throws Exception {
    Path data = dir.resolve("n1");
    NodeMarker.claim(data, "n1");
    Files.setPosixFilePermissions(data, PosixFilePermissions.fromString("rwxr-xr-x"));
    NodeMarker.claim(data, "n1");
    assertThat(mode(data)).isEqualTo("rwx------");
  }
}
