package io.idem.client;

import java.util.List;

/**
 * What one server reported about itself and the cluster ({@link IdemClient#status()}).
 *
 * @param id the server's id
 * @param role its Raft role: LEADER, FOLLOWER, CANDIDATE, ...
 * @param leaderId the leader's id as this server knows it; empty if none
 * @param leaderAddress the leader's client address; empty if none
 * @param term the Raft term
 * @param appliedIndex the last log index this server applied
 * @param logTimeMs log time: the leaders' clocks as stamped into the log
 * @param liveSessions sessions in the replicated table
 * @param duplicatesSuppressed retried requests answered from saved answers, never re-applied
 * @param keys keys in the KV store
 * @param leases live leases
 * @param members the cluster's members
 * @param digest a digest of the replicated state at {@code digestIndex}; empty before the server's
 *     first snapshot
 * @param digestIndex the log index of the server's last snapshot, where {@code digest} was taken:
 *     servers snapshot at the same indexes, so equal indexes must show equal digests (0: none yet)
 * @param entriesAppended log entries this server's batcher appended since it started
 * @param commandsAppended commands in those entries
 * @param logStartIndex the first index still in this server's log
 * @param config the replicated configuration this server applied
 * @param keyRecords idempotency-key records in the replicated key table, in progress or completed
 * @param logFormat the log format in force, the version leaders write (0: not configured yet)
 * @param maxLogFormat the newest log format this server's code applies
 * @param authEnabled whether access control is on; off, anyone who reaches the client port may do
 *     anything
 * @param entriesSkipped log entries this server applied as no-ops because it could not decode them
 *     (0 from servers older than the field)
 * @param backendUsedBytes the replicated state's estimated size, which {@link
 *     ClusterConfig#backendBytes()} bounds
 * @param noSpaceAlarm whether the NO_SPACE alarm is raised: writes that grow the state are refused
 */
public record ClusterStatus(
    String id,
    String role,
    String leaderId,
    String leaderAddress,
    long term,
    long appliedIndex,
    long logTimeMs,
    long liveSessions,
    long duplicatesSuppressed,
    long keys,
    long leases,
    List<Member> members,
    String digest,
    long digestIndex,
    long entriesAppended,
    long commandsAppended,
    long logStartIndex,
    ClusterConfig config,
    long keyRecords,
    int logFormat,
    int maxLogFormat,
    boolean authEnabled,
    long entriesSkipped,
    long backendUsedBytes,
    boolean noSpaceAlarm) {

  /**
   * A member of the cluster.
   *
   * @param id its id
   * @param raftAddress where its peers reach it
   * @param clientAddress where clients reach it
   * @param voter whether it votes; false for a member still leaving during a change (and for every
   *     member reported by servers older than membership changes)
   */
  public record Member(String id, String raftAddress, String clientAddress, boolean voter) {
    /** A voting member. */
    public Member(String id, String raftAddress, String clientAddress) {
      this(id, raftAddress, clientAddress, true);
    }
  }
}
