package io.idem.client;

import java.util.List;

/**
 * How a membership change ended ({@link IdemClient#changeMembers}).
 *
 * @param committed whether the new configuration committed; if not, {@code message} says why (the
 *     change may still commit when it timed out: read the members again)
 * @param message why it failed, or a note on a committed change; empty if none
 * @param members the members after the change (or in force, if it failed), as the leader answered
 */
public record MembershipChange(
    boolean committed, String message, List<ClusterStatus.Member> members) {
  public MembershipChange {
    members = List.copyOf(members);
  }
}
