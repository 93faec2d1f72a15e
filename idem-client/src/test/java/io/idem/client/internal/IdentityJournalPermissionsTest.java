package io.idem.client.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The identity file holds the session's secret: it and its temporary copy are 0600 from their
 * creation, and a directory made for them 0700. The tests run as root in CI, who reads any file, so
 * they look at the mode bits.
 */
class IdentityJournalPermissionsTest {
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
  void identityFileAndItsNewDirectoryAreOwnerOnly() throws Exception {
    Path file = dir.resolve("ids").resolve("w.id");
    try (IdentityJournal j = IdentityJournal.open(file)) {
      assertThat(mode(file)).isEqualTo("rw-------");
      j.identity(new IdentityJournal.Identity("w", 1, 2, 3, 60_000));
      assertThat(mode(file)).isEqualTo("rw-------");
    }
    assertThat(mode(file.getParent())).isEqualTo("rwx------");
  }

  @Test
  void temporaryFileIsOwnerOnlyWhenCreated() throws Exception {
    Path file = dir.resolve("w.id");
    Path tmp = dir.resolve("w.id.tmp");
    IdentityJournal j = IdentityJournal.open(file);
    // A non-empty directory where the file was makes the rename fail: the temporary file stays,
    // with the mode it was created with and the secret written into it.
    Files.delete(file);
    Files.createDirectories(file.resolve("in-the-way"));
    assertThatThrownBy(() -> j.identity(new IdentityJournal.Identity("w", 1, 2, 3, 60_000)))
        .isInstanceOf(IOException.class);
    assertThat(Files.size(tmp)).isPositive();
    assertThat(mode(tmp)).isEqualTo("rw-------");
  }

  @Test
  void temporaryFileLeftByACrashIsNotReused() throws Exception {
    Path file = dir.resolve("w.id");
    Path tmp = dir.resolve("w.id.tmp");
    Files.createFile(
        tmp, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-r--r--")));
    try (IdentityJournal j = IdentityJournal.open(file)) {
      j.identity(new IdentityJournal.Identity("w", 1, 2, 3, 60_000));
    }
    assertThat(mode(file)).isEqualTo("rw-------");
  }

  @Test
  void readableIdentityFileIsTightenedWhenRewritten() throws Exception {
    Path file = dir.resolve("w.id");
    IdentityJournal.Identity id = new IdentityJournal.Identity("w", 1, 2, 3, 60_000);
    try (IdentityJournal j = IdentityJournal.open(file)) {
      j.identity(id);
    }
    Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-r--r--"));
    try (IdentityJournal j = IdentityJournal.open(file)) {
      assertThat(j.identity()).isEqualTo(id);
      assertThat(mode(file)).isEqualTo("rw-------");
    }
  }
}
