package io.idem.client.internal;

import io.idem.client.IdemException;
import io.idem.proto.ClientFrame;
import io.idem.proto.Hello;
import io.idem.proto.Operation;
import io.idem.proto.RegisterRequest;
import io.idem.proto.ServerFrame;
import java.util.List;
import java.util.SortedMap;

/**
 * What {@link SessionMachine} asks its driver to do, in order, outside the machine's lock: network
 * I/O, journal I/O and completing calls. The driver runs a session's effects one at a time, in the
 * order the machine emitted them, so that a request is journaled before it is sent and the journal
 * is synced before an ack that depends on it leaves.
 */
public sealed interface Effect {

  /** Send a Register RPC for the attempt {@code nonce}; report its answer with that nonce. */
  record Register(long nonce, String address, RegisterRequest request) implements Effect {}

  /** Open session stream number {@code stream} to {@code address} and send {@code hello} first. */
  record OpenStream(int stream, String address, Hello hello) implements Effect {}

  /**
   * Write {@code frame} on stream {@code stream}, if it is still the open one. A {@code batchable}
   * frame is a request on a stream that takes request batches: the driver may send it in one frame
   * with the batchable sends that follow it directly.
   */
  record Send(int stream, ClientFrame frame, boolean batchable) implements Effect {
    /** A frame that goes alone. */
    public Send(int stream, ClientFrame frame) {
      this(stream, frame, false);
    }
  }

  /** End stream {@code stream}: cancel it, or half-close it (a graceful end). */
  record EndStream(int stream, boolean cancel) implements Effect {}

  /**
   * The stream to {@code address} stalled: replace the connection under it if the connection as a
   * whole has been silent too (half-open, or silent one way), so that the next stream gets a new
   * one.
   */
  record ReplaceConnection(String address) implements Effect {}

  /**
   * Ask each of {@code addresses} who leads (a Status RPC, with a deadline of the probe interval);
   * report the answers that came in time together, with {@code round}, to {@link
   * SessionMachine#probed}.
   */
  record Probe(long round, List<String> addresses) implements Effect {}

  /** Complete {@code call} with the server's answer. */
  record Complete(SessionMachine.Call call, ServerFrame frame) implements Effect {}

  /** Fail {@code call}. */
  record Fail(SessionMachine.Call call, IdemException error) implements Effect {}

  /** Journal: a registration attempt, durable before its Register leaves. */
  record JournalPending(String name, long nonce, long ttlMs, long secretHi, long secretLo)
      implements Effect {}

  /** Journal: the granted identity (durable; forgets what an earlier session had). */
  record JournalIdentity(String name, long clientId, long secretHi, long secretLo, long ttlMs)
      implements Effect {}

  /** Journal: the session is gone; forget it (durable). */
  record JournalForget() implements Effect {}

  /** Journal: requests about to be sent, and everything appended before them, made durable. */
  record JournalSent(SortedMap<Long, Operation> requests) implements Effect {}

  /** Journal: an answered request (appended; durable with the next sync). */
  record JournalDone(long seq) implements Effect {}

  /** Journal: make everything appended durable (before an ack that depends on it). */
  record JournalSync() implements Effect {}

  /** The session is closed: stop its timer and release what it holds. Always the last effect. */
  record Stop() implements Effect {}
}
