package io.idem.client;

/**
 * The server answered the call with a refusal or a business failure. The answer is definite: the
 * server saved it, and a retry of this very call gets the same answer. Subtypes name the answer.
 */
public abstract sealed class RejectedException extends IdemException
    permits InvalidArgumentException,
        DuplicateLeaseException,
        LeaseNotFoundException,
        WrongTypeException,
        FencedWriteException,
        CasMismatchException,
        TooManyKeysException,
        PermissionDeniedException,
        QuotaExceededException,
        NoSpaceException,
        ProtocolException {
  private static final long serialVersionUID = 1L;

  RejectedException(String message, long sessionId, long requestNumber) {
    super(message, sessionId, requestNumber, "", null);
  }
}
