package io.idem.core;

/**
 * Why the session table refused a command. The names are stable: they are the client-visible error
 * codes of ARCHITECTURE's error model, and the protocol maps them one to one.
 */
public enum RejectCode {
  /** No live session with this id (it expired, was closed, or never existed). */
  SESSION_EXPIRED,
  /** The session has a newer epoch: a newer instance of this client took it over. */
  FENCED,
  /** The request was applied and the client acknowledged it; this is a stale network duplicate. */
  RESPONSE_DISCARDED,
  /** A gap: the request's number is above the session's next expected number. */
  OUT_OF_ORDER,
  /** Accepting the request would keep more unacknowledged responses than the window allows. */
  WINDOW_EXCEEDED,
  /** The table holds its maximum number of sessions. */
  TOO_MANY_SESSIONS,
  /** A live session already holds the requested durable name. */
  NAME_IN_USE,
  /** The secret presented to resume a named session does not match. */
  UNAUTHENTICATED,
  /**
   * The command is malformed: a number out of range, an epoch from the future, a bad TTL or name.
   */
  INVALID_ARGUMENT
}
