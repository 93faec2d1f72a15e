package io.idem.core;

/** The outcome of {@link SessionTable#register} or {@link SessionTable#resume}. */
public sealed interface Registration permits Registration.Granted, Registration.Refused {

  /**
   * The caller now owns the session.
   *
   * @param clientId the session's id
   * @param epoch the epoch to send with every command; older epochs are {@link RejectCode#FENCED}
   * @param nextSeq the lowest request number the session has not applied yet (1 for a new session)
   */
  record Granted(long clientId, long epoch, long nextSeq) implements Registration {}

  /**
   * Nothing changed.
   *
   * @param code why
   */
  record Refused(RejectCode code) implements Registration {}
}
