package io.idem.client;

import org.jspecify.annotations.Nullable;

/**
 * Root of the client's exceptions. Its four kinds say what the caller should do:
 *
 * <table>
 *   <caption>What each kind means and what to do</caption>
 *   <tr><th>kind</th><th>what happened</th><th>what to do</th></tr>
 *   <tr><td>{@link NotSentException}</td><td>the call never reached a server; nothing was
 *       applied</td><td>retry (on this client, or another if this one is closed)</td></tr>
 *   <tr><td>{@link OutcomeUnknownException}</td><td>the call was sent; it was applied at most once,
 *       and this client may still be resending it in its session</td><td>read to find out, or
 *       make the operation safe to repeat</td></tr>
 *   <tr><td>{@link RejectedException}</td><td>the server answered: the call was refused or was a
 *       business failure; that answer is saved and a retry gets it again</td><td>fix the input or
 *       handle the business case</td></tr>
 *   <tr><td>{@link SessionLostException}</td><td>the session ended with the call in flight: applied
 *       at most once, never resent</td><td>see the subtype: register anew (automatic), or stop
 *       ({@link SessionLostException#isFatal()})</td></tr>
 * </table>
 *
 * <p>Every exception carries the session id, the request number and the leader hint where they
 * apply (0, 0 and empty where they do not).
 */
public abstract sealed class IdemException extends RuntimeException
    permits NotSentException, OutcomeUnknownException, RejectedException, SessionLostException {
  private static final long serialVersionUID = 1L;

  private final long sessionId;
  private final long requestNumber;
  private final String leaderHint;

  IdemException(
      @Nullable String message,
      long sessionId,
      long requestNumber,
      @Nullable String leaderHint,
      @Nullable Throwable cause) {
    super(message, cause);
    this.sessionId = sessionId;
    this.requestNumber = requestNumber;
    this.leaderHint = leaderHint == null ? "" : leaderHint;
  }

  /** The session the call belonged to; 0 if it had none yet. */
  public long sessionId() {
    return sessionId;
  }

  /**
   * The call's number in its session; 0 if it was never numbered (or the error is not a call's).
   */
  public long requestNumber() {
    return requestNumber;
  }

  /** The address of the leader as last known, host:port; empty if unknown. */
  public String leaderHint() {
    return leaderHint;
  }

  @Override
  public @Nullable String getMessage() {
    String m = super.getMessage();
    if (sessionId == 0 && requestNumber == 0 && leaderHint.isEmpty()) {
      return m;
    }
    StringBuilder b = new StringBuilder(m).append(" [");
    String sep = "";
    if (sessionId != 0) {
      b.append("session ").append(sessionId);
      sep = ", ";
    }
    if (requestNumber != 0) {
      b.append(sep).append("request ").append(requestNumber);
      sep = ", ";
    }
    if (!leaderHint.isEmpty()) {
      b.append(sep).append("leader ").append(leaderHint);
    }
    return b.append(']').toString();
  }
}
