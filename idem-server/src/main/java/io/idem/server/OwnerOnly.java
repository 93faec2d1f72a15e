package io.idem.server;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileAttribute;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.EnumSet;
import java.util.Optional;
import java.util.Set;

/**
 * Creates files (0600) and directories (0700) that only their owner may read, with the mode given
 * at creation, so there is no moment when others can read what is written. On a file system without
 * POSIX permissions, files and directories get the file system's default.
 *
 * <p>idem-client has its own copy: the client and the server share no module that may hold it.
 */
final class OwnerOnly {
  private static final Set<PosixFilePermission> FILE = PosixFilePermissions.fromString("rw-------");
  private static final Set<PosixFilePermission> DIRECTORY =
      PosixFilePermissions.fromString("rwx------");

  private OwnerOnly() {}

  /** Creates {@code dir} and any missing parent: each directory created is 0700. */
  static void createDirectories(Path dir) throws IOException {
    Files.createDirectories(dir, attributes(dir, DIRECTORY));
  }

  /**
   * Makes the existing directory {@code dir} 0700 if its group or others have any permission on it.
   *
   * @return the mode it had, if it was changed
   */
  static Optional<String> tightenDirectory(Path dir) throws IOException {
    if (!posix(dir)) {
      return Optional.empty();
    }
    Set<PosixFilePermission> mode = Files.getPosixFilePermissions(dir);
    if (DIRECTORY.containsAll(mode)) {
      return Optional.empty();
    }
    Files.setPosixFilePermissions(dir, DIRECTORY);
    return Optional.of(PosixFilePermissions.toString(mode));
  }

  /**
   * Creates {@code file}, 0600, and opens it for writing. A file already there (one left by a
   * crash) is deleted first: its mode may let others read it.
   */
  static FileChannel createFile(Path file) throws IOException {
    Files.deleteIfExists(file);
    return FileChannel.open(
        file,
        EnumSet.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE),
        attributes(file, FILE));
  }

  private static boolean posix(Path path) {
    return path.getFileSystem().supportedFileAttributeViews().contains("posix");
  }

  private static FileAttribute<?>[] attributes(Path path, Set<PosixFilePermission> mode) {
    if (!posix(path)) {
      return new FileAttribute<?>[0];
    }
    return new FileAttribute<?>[] {PosixFilePermissions.asFileAttribute(mode)};
  }
}
