/**
 * The deterministic core of Idem: the session table and the idempotency key table, with their
 * snapshot formats. It requires the JDK's base module alone (no clock, no randomness, no library:
 * docs/ARCHITECTURE.md, "Determinism rules").
 */
module io.idem.core {
  // The one package, and all of it API: idem-server's replicated state machine applies commands
  // to SessionTable and KeyTable, reads their Admission, Registration, RejectCode, SessionInfo and
  // SessionTableConfig, and writes and reads their snapshots (SnapshotFormatException); the
  // verification models and the lab use the same types. What is not API (the indexes, codecs and
  // record types behind the tables) is package-private, so exporting the package exports only API.
  exports io.idem.core;
}
