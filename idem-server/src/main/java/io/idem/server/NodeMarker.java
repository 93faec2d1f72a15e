package io.idem.server;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The file {@value #NAME} in a node's data directory, written at its first start: the node id the
 * directory belongs to. A Raft node must never come back under its id with less than it had (an
 * empty log could vote twice in a term and forget entries it acknowledged), and a directory must
 * never serve under another id. So a start refuses a directory whose marker names another node.
 * What a marker cannot show, a node that lost its whole directory, is the operator's part
 * (docs/OPERATIONS.md, "A node lost its disk"): such a node rejoins with a new id.
 *
 * <p>Claiming a directory also makes it the node's own: 0700, and the marker 0600, on a file system
 * with POSIX permissions. Ratis's files inside are then protected by the directory's mode.
 */
final class NodeMarker {
  private static final Logger LOG = LoggerFactory.getLogger(NodeMarker.class);
  static final String NAME = "idem-node";

  private NodeMarker() {}

  /**
   * Checks the marker of {@code dataDir} against {@code id}, and writes one if there is none.
   *
   * @throws IOException if the directory belongs to another node (the message says what to do), or
   *     if the marker cannot be read or written
   */
  static void claim(Path dataDir, String id) throws IOException {
    Path marker = dataDir.resolve(NAME);
    boolean marked = Files.exists(marker);
    if (marked) {
      String owner = owner(marker);
      if (!owner.equals(id)) {
        throw new IOException(
            "the data directory "
                + dataDir.toAbsolutePath()
                + " belongs to node "
                + owner
                + ", not "
                + id
                + ": start "
                + owner
                + " on it, or give "
                + id
                + " its own directory (a node that lost its disk joins as a new member with a new"
                + " id: docs/OPERATIONS.md)");
      }
    }
    ownDirectory(dataDir);
    if (marked) {
      return;
    }
    Path tmp = dataDir.resolve(NAME + ".tmp");
    try (FileChannel c = OwnerOnly.createFile(tmp)) {
      c.write(ByteBuffer.wrap(("id=" + id + "\n").getBytes(StandardCharsets.UTF_8)));
    }
    Files.move(tmp, marker, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
  }

  /**
   * Creates {@code dataDir} 0700, or makes an existing one 0700 if others may use it: Ratis's log
   * and the snapshots inside hold every client's data and session secrets. A directory whose mode
   * cannot be changed (its owner is another user) is left as it is, with a warning.
   */
  private static void ownDirectory(Path dataDir) throws IOException {
    if (!Files.isDirectory(dataDir)) {
      OwnerOnly.createDirectories(dataDir);
      return;
    }
    try {
      OwnerOnly.tightenDirectory(dataDir)
          .ifPresent(
              was ->
                  LOG.info(
                      "the data directory {} was {}: made rwx------ (owner only)",
                      dataDir.toAbsolutePath(),
                      was));
    } catch (IOException e) {
      LOG.warn(
          "the data directory {} may be open to other users: its mode cannot be made rwx------"
              + " ({})",
          dataDir.toAbsolutePath(),
          e.toString());
    }
  }

  /** Whether {@code dataDir} holds anything besides a marker: Raft storage from earlier runs. */
  static boolean hasState(Path dataDir) throws IOException {
    if (!Files.isDirectory(dataDir)) {
      return false;
    }
    try (Stream<Path> files = Files.list(dataDir)) {
      return files.anyMatch(p -> !p.getFileName().toString().startsWith(NAME));
    }
  }

  private static String owner(Path marker) throws IOException {
    for (String line : Files.readAllLines(marker, StandardCharsets.UTF_8)) {
      if (line.startsWith("id=")) {
        return line.substring(3).trim();
      }
    }
    throw new IOException(marker + " names no node id: it is not an Idem node marker");
  }
}
