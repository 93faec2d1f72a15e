package io.idem.client;

/**
 * Where {@link ClusterAdmin}'s calls go: a server, moved on by leader hints and failures. A session
 * ({@link SessionDriver}) is one; a data group's admin calls use a {@link GroupRoute}, which opens
 * no session in the group.
 */
interface AdminRoute {
  /** The server to ask now: the last leader hint, else the servers in turn. */
  String address();

  /** A call was redirected ({@code hint}: the leader's client address) or failed (empty). */
  void redirect(String hint);

  /** The last leader hint, or empty. */
  String leaderHint();

  IdemTransport transport();

  /** A stub on {@code channel} whose calls go to this route's group. */
  io.idem.proto.IdemGrpc.IdemStub stub(io.grpc.Channel channel);

  /**
   * Runs {@code r} (a future's completion) on the transport's workers, or here if they are shut
   * down, so that a caller's callback never runs on a network or timer thread while they live.
   */
  default void onWorkers(Runnable r) {
    try {
      transport().workers().execute(r);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      r.run();
    }
  }
}
