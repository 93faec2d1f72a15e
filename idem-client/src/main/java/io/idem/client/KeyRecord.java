package io.idem.client;

/**
 * An idempotency key's record as a linearizable read ({@link IdemClient#getKey}) saw it.
 *
 * @param scope the key's scope
 * @param key the key
 * @param completed whether it was completed; else an owner holds it (or held it until {@code
 *     deadlineMs}, if that has passed and nobody took it over yet)
 * @param token the owner's token, or the token it was completed under
 * @param deadlineMs the owner's deadline (log ms)
 * @param completedAtMs when it was completed (log ms), 0 if not
 * @param expiresAtMs when the record will be dropped (log ms)
 * @param fingerprint the fingerprint it was acquired with (do not modify)
 * @param response the stored response, empty if not completed (do not modify)
 * @param logTimeMs the log time of the read
 */
public record KeyRecord(
    String scope,
    String key,
    boolean completed,
    long token,
    long deadlineMs,
    long completedAtMs,
    long expiresAtMs,
    byte[] fingerprint,
    byte[] response,
    long logTimeMs) {}
