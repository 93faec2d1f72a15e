package io.idem.client;

/**
 * Guards a write with an application idempotency key's fencing token: the server applies the write
 * only while the key's record (in progress or completed) carries exactly this token. A stale owner
 * (someone took the key over), a released or expired key, or a token never handed out gets {@link
 * FencedWriteException} and the write is not applied. See {@link IdemClient#fenced}.
 *
 * @param scope the key's scope (a tenant or a principal), at most 255 characters
 * @param key the key within its scope, 1 to 255 characters
 * @param token the token the writer's acquire returned ({@link KeyAcquisition.Acquired#token})
 */
public record Fence(String scope, String key, long token) {

  /**
   * Validates the parts.
   *
   * @throws InvalidArgumentException naming the bad part
   */
  public Fence {
    Operations.checkKeyId(scope, key);
    if (token < 1) {
      throw new InvalidArgumentException("a fence token is positive, got " + token, 0, 0);
    }
  }
}
