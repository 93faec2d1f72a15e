package io.idem.client;

/**
 * The compare-and-set effect of a complete ({@link Write#compareAndSet}) found another version:
 * {@code CAS_MISMATCH}. Nothing was applied and the key is still the caller's (a plain {@link
 * IdemClient#compareAndSet} answers a {@link CasResult} instead).
 */
public final class CasMismatchException extends RejectedException {
  private static final long serialVersionUID = 1L;

  /** For the client and its tests; applications only catch it. */
  public CasMismatchException(String message, long sessionId, long requestNumber) {
    super(message, sessionId, requestNumber);
  }
}
