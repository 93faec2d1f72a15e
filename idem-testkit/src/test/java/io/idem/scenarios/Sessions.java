package io.idem.scenarios;

import io.idem.proto.Code;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.testkit.Eventually;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;

/** Registration by hand at whichever node leads, retrying while leadership settles. */
final class Sessions {
  private Sessions() {}

  /** Registers {@code request} at the leader; returns the leader's index and the grant. */
  static Registered register(LocalCluster cluster, RegisterRequest request) {
    AtomicReference<RegisterReply> last = new AtomicReference<>();
    return Eventually.get(
        "a leader that takes the registration",
        Duration.ofSeconds(60),
        () -> {
          int leader = cluster.waitForLeader(Duration.ofSeconds(30));
          RegisterReply grant;
          try (RawSession probe = new RawSession(cluster.clientAddress(leader))) {
            grant = probe.register(request);
          } catch (RuntimeException e) {
            // Not retried: an attempt whose answer was lost may have registered a session.
            throw new AssertionError("registration failed at node " + leader, e);
          }
          last.set(grant);
          // A refusal (the node lost its leadership meanwhile) registered nothing: ask again.
          return grant.getCode() == Code.OK ? new Registered(leader, grant) : null;
        },
        () -> "last answer " + last.get());
  }

  record Registered(int leader, RegisterReply grant) {}
}
