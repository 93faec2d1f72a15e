package io.idem.server;

import io.idem.proto.Code;
import io.idem.proto.Result;

/**
 * Who pays for a command's growth of the replicated state, and what it may hold (log format 7 and
 * later): the principal of the session the command came on, its {@link Quotas}, and whether the
 * backend was full when the command began ({@link QuotaState#full}). A domain that adds to the
 * state charges the payer and refuses what it may not hold. Null where a command has no payer: log
 * formats before 7, whose entries are judged without quotas.
 *
 * @param principal the session's principal; "" for the anonymous one
 * @param quotas its quotas
 * @param full whether a command that grows the state must be refused with {@code NO_SPACE}
 * @param backendUsed the state's estimated size when the command began
 * @param backendBytes the backend budget
 */
record Payer(String principal, Quotas quotas, boolean full, long backendUsed, long backendBytes) {

  /**
   * This payer for a write that settles what the principal already holds (a completion's effect, a
   * cursor's advance): charged to it, but refused by neither its quotas nor the backend budget.
   */
  Payer settling() {
    return new Payer(principal, Quotas.UNLIMITED, false, backendUsed, backendBytes);
  }

  /** The principal as a refusal names it. */
  String describe() {
    return principal.isEmpty() ? "the anonymous principal" : "principal \"" + principal + "\"";
  }

  /** The {@code NO_SPACE} refusal of a command of entry {@code revision}. */
  Result noSpace(long revision) {
    return Results.of(revision, Code.NO_SPACE, noSpaceMessage(backendUsed, backendBytes));
  }

  static String noSpaceMessage(long used, long budget) {
    return "the replicated state is at its backend budget ("
        + used
        + " of "
        + budget
        + " bytes, estimated): writes that grow it are refused until it shrinks below "
        + QuotaState.CLEAR_PERCENT
        + "% (delete, complete or release to free space; idem config set --backend-bytes)";
  }

  /**
   * The {@code QUOTA_EXCEEDED} refusal of a command of entry {@code revision}: quota {@code name}
   * of {@code limit}, with what the principal holds.
   */
  Result overQuota(long revision, String name, String holds, long limit) {
    return Results.of(revision, Code.QUOTA_EXCEEDED, overQuotaMessage(name, holds, limit));
  }

  String overQuotaMessage(String name, String holds, long limit) {
    return "quota "
        + name
        + " of "
        + describe()
        + " is "
        + limit
        + ": it holds "
        + holds
        + " (idem config set --quota "
        + name
        + "=N sets the default; a role's quotas raise it for its principals)";
  }
}
