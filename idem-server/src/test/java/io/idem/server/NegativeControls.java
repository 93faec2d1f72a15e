package io.idem.server;

import java.io.IOException;

/**
 * Nodes that break a guarantee on purpose, for the verification's negative controls: a campaign
 * that must flag such a node shows that its checker can fail. This class ships in idem-server's
 * test jar only, which idem-verify (the lab) depends on; the server distribution, its flags,
 * configuration keys and environment variables have no way to start such a node.
 */
public final class NegativeControls {
  private NegativeControls() {}

  /**
   * Starts a node that answers reads from its local state machine as soon as it believes it leads,
   * without confirming its leadership: a deposed leader answers stale reads (see {@link
   * IdemServer#startWithUnsafeLocalReads}).
   */
  public static IdemServer startWithUnsafeLocalReads(ServerConfig config) throws IOException {
    return IdemServer.startWithUnsafeLocalReads(config);
  }
}
