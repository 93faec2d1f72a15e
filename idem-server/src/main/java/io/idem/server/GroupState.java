package io.idem.server;

import io.idem.core.SnapshotFormatException;
import io.idem.proto.Code;
import io.idem.proto.Operation;
import io.idem.proto.PartitionMap;
import io.idem.proto.Partitions;
import io.idem.proto.Result;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;

/**
 * Which Raft group this state machine is, in a cluster of several: its number (0: the metadata
 * group; 1 and up: a data group) and the number of data groups, set by the group's bootstrap
 * configuration and never changed. A data group applies only operations whose names all fall in its
 * partitions under the partition map ({@link Partitions}); the metadata group holds sessions only
 * (the clients' identities) and applies no operation. A cluster of one group has count 0 here and
 * decides nothing by it.
 *
 * <p>Replicated state: the bootstrap command in the log sets it, so every replica of a group
 * refuses the same commands. Snapshot section 10 (state snapshot version 9): {@code int group, int
 * count}. Older snapshots have none (a cluster of one group), and the digest leaves the section out
 * while the count is 0, so such a state keeps its digest.
 *
 * <p>Not thread-safe.
 */
final class GroupState implements StateSection {
  // Volatile: the front door judges reads by them without the state's lock (set once, at bootstrap
  // or when a snapshot is read).
  private volatile int group;
  private volatile int count;
  private volatile PartitionMap map = PartitionMap.getDefaultInstance();

  /** Whether this is a group of a cluster of several (else nothing here decides anything). */
  boolean multi() {
    return count > 0;
  }

  /** This group's number: 0 for the metadata group, 1 and up for data groups (0 if single). */
  int group() {
    return group;
  }

  /** The number of data groups; 0 for a cluster of one group. */
  int count() {
    return count;
  }

  /** The partition map in force; the default instance in a cluster of one group. */
  PartitionMap map() {
    return map;
  }

  /** Whether this is a data group of a cluster of several groups. */
  boolean dataGroup() {
    return count > 0 && group > 0;
  }

  /**
   * Sets the group at bootstrap (only {@link ConfigState} calls this, once).
   *
   * @throws IllegalArgumentException if the numbers are out of range
   */
  void set(int group, int count) {
    String bad = problem(group, count);
    if (bad != null) {
      throw new IllegalArgumentException(bad);
    }
    this.group = group;
    this.count = count;
    this.map = count == 0 ? PartitionMap.getDefaultInstance() : Partitions.firstMap(count);
  }

  /** What is wrong with a group number and count, or null. */
  static String problem(int group, int count) {
    if (count == 0 && group == 0) {
      return null;
    }
    if (count < 2 || count > Partitions.MAX_GROUPS) {
      return "a cluster of several groups has 2 to "
          + Partitions.MAX_GROUPS
          + " data groups, got "
          + count;
    }
    if (group < 0 || group > count) {
      return "group " + group + " out of [0, " + count + "]";
    }
    return null;
  }

  /**
   * The answer to {@code op} if it does not belong here (WRONG_GROUP, with the map), or null: in
   * the metadata group every operation, in a data group one that names a key of another group.
   */
  Result refusal(long revision, Operation op) {
    if (count == 0) {
      return null;
    }
    String why;
    if (group == 0) {
      why = "the metadata group (0) holds sessions only: send operations to a data group";
    } else {
      int home = Partitions.groupIn(map, Partitions.primary(op));
      if (home != group) {
        why =
            "partition "
                + Partitions.primary(op)
                + " is in group "
                + home
                + ", not in group "
                + group;
      } else {
        String stray = Partitions.strayName(op, map);
        if (stray == null) {
          return null;
        }
        why =
            "the "
                + stray
                + " is in another group than the operation's key (group "
                + group
                + "): one command touches one group; give related names a common hash tag {...}";
      }
    }
    return Result.newBuilder()
        .setCode(Code.WRONG_GROUP)
        .setMessage(why)
        .setRevision(revision)
        .setMap(map)
        .build();
  }

  /**
   * Why a read of {@code partition} does not belong here, or null: in the metadata group every
   * read, in a data group one of another group's partition.
   */
  String readRefusal(int partition) {
    int count = this.count;
    int group = this.group;
    PartitionMap map = this.map;
    if (count == 0) {
      return null;
    }
    if (group == 0) {
      return "the metadata group (0) holds sessions only: read from a data group";
    }
    int home = Partitions.groupIn(map, partition);
    return home == group
        ? null
        : "partition " + partition + " is in group " + home + ", not in group " + group;
  }

  @Override
  public void writeSection(DataOutputStream out) throws IOException {
    out.writeInt(group);
    out.writeInt(count);
  }

  @Override
  public void readSection(DataInputStream in, int formatVersion) throws IOException {
    int g = in.readInt();
    int c = in.readInt();
    String bad = problem(g, c);
    if (bad != null) {
      throw new SnapshotFormatException(bad);
    }
    set(g, c);
  }
}
