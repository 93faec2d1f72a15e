package io.idem.verify;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The campaign on a cluster of eight data groups ({@code idem verify --groups 8}): three server
 * processes each hosting the metadata group and groups 1 to 8, the ci profile's clients spread over
 * the groups by their keys, and the ci profile's faults but the node replacement (which moves every
 * group in turn and takes most of a 60 s run: runs from 3 minutes have it): kill -9 and SIGSTOP of
 * leaders (of group 1, which each group's leader may share) and followers, wiped leaders rejoining
 * every group, lost responses, resets, delays, a client process killed and resumed from its
 * identity files, and partitions between the servers. The checkers judge per key, and so per
 * partition: exactly-once appends and increments in order, linearizable registers, leases; every
 * data group's replicas agree. It runs secured, as {@code CampaignTest} does: TLS on both ports and
 * the clients checked against a role granted in every group.
 */
@Tag("slow")
@Timeout(300)
class GroupsCampaignTest {
  // The first round of every fault kind must fit: the wipe restarts every node in turn (30-40 s of
  // a run on this machine), and 60 s once left "responses lost" out.
  static final Duration RUN = Duration.ofSeconds(90);

  @TempDir Path dir;

  @Test
  void exactlyOnceHoldsInEveryGroupUnderFaults() throws Exception {
    Campaign.Report r =
        Campaign.run(
            dir.resolve("groups"),
            Campaign.Settings.ci(CampaignTest.seed("campaign, 8 groups"), false)
                .withGroups(8)
                .secured(true)
                .lasting(RUN));
    System.out.println("campaign with 8 groups " + r);
    assertThat(r.violations()).isEmpty();
    assertThat(r.undecidedRegisters()).as("registers the search gave up on").isEmpty();
    assertThat(r.opsByKind().get(Op.Fn.APPEND)).isPositive();
    assertThat(r.opsByKind().get(Op.Fn.INCR)).isPositive();
    assertThat(r.opsByKind().get(Op.Fn.CAS)).isPositive();
    assertThat(r.opsByKind().get(Op.Fn.GRANT)).isPositive();
    assertThat(r.faults().keySet())
        .anyMatch(k -> k.startsWith("kill -9 ") && !k.contains("client"))
        .anyMatch(k -> k.startsWith("SIGSTOP"))
        .contains("responses lost")
        .noneMatch(k -> k.startsWith("replace node"));
    assertThat(r.faults().keySet().size()).as("kinds of fault: %s", r.faults()).isGreaterThan(6);
    // The client process, which journals a session per group, got answers: a client that took the
    // cluster for one of a single group would have had every registration refused.
    assertThat(History.read(r.history()))
        .as("acknowledged appends of the client process")
        .anyMatch(o -> o.process().startsWith("w") && o.outcome() == Op.Outcome.OK);
  }
}
