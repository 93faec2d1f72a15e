package io.idem.scenarios;

import io.idem.proto.Code;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.time.Duration;

/** Registration by hand at whichever node leads, retrying while leadership settles. */
final class Sessions {
  private Sessions() {}

  /** Registers {@code request} at the leader; returns the leader's index and the grant. */
  static Registered register(LocalCluster cluster, RegisterRequest request) throws Exception {
    RegisterReply grant = null;
    int leader = -1;
    for (int attempt = 0; attempt < 20; attempt++) {
      leader = cluster.waitForLeader(Duration.ofSeconds(30));
      try (RawSession probe = new RawSession(cluster.clientAddress(leader))) {
        grant = probe.register(request);
      }
      if (grant.getCode() == Code.OK) {
        return new Registered(leader, grant);
      }
      Thread.sleep(100);
    }
    throw new AssertionError("no leader took the registration: " + grant);
  }

  record Registered(int leader, RegisterReply grant) {}
}
