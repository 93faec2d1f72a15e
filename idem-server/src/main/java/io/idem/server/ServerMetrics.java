package io.idem.server;

import io.grpc.netty.shaded.io.netty.util.internal.PlatformDependent;
import io.idem.proto.Code;
import io.idem.proto.Command;
import io.idem.proto.CommandResult;
import io.idem.proto.EntryResult;
import io.idem.proto.LogEntry;
import io.idem.proto.Operation;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * One node's metrics, in Prometheus naming ({@code idem_*}), scraped from the admin port's {@code
 * /metrics}. They observe and decide nothing: the state machine's results are read after they are
 * made.
 *
 * <p>Writes and rejections are counted by the node that answered them: the leader that applied the
 * entry while leading (followers apply without building answers). Sum them over the nodes for the
 * cluster. Apply time, commands per entry and snapshots are per node. The gauges of the replicated
 * state (sessions, key records, leases) and of Raft are read when scraped.
 */
final class ServerMetrics {
  private final PrometheusMeterRegistry registry =
      new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
  private final Map<Operation.OpCase, Counter> writes = new EnumMap<>(Operation.OpCase.class);
  private final Map<Code, Counter> rejections = new EnumMap<>(Code.class);
  private final Timer apply;
  private final DistributionSummary commandsPerEntry;
  private final Timer snapshotFreeze;
  private final Timer snapshotWrite;
  private final DistributionSummary snapshotBytes;
  private final Counter requestBatches;
  private final Counter entriesSkipped;
  private final Counter proposalsRefused;
  private final Counter batchedRequests;
  private final Counter connectionsRefused;
  private final Counter streamsCutOff;

  ServerMetrics(String nodeId) {
    registry.config().commonTags("node", nodeId);
    for (Operation.OpCase kind : Operation.OpCase.values()) {
      if (kind != Operation.OpCase.OP_NOT_SET) {
        writes.put(
            kind,
            Counter.builder("idem.writes")
                .description("Operations applied and answered OK by this node, by kind")
                .tag("kind", kind.name().toLowerCase(Locale.ROOT))
                .register(registry));
      }
    }
    for (Code code : Code.values()) {
      if (code != Code.OK && code != Code.UNRECOGNIZED) {
        rejections.put(
            code,
            Counter.builder("idem.rejections")
                .description("Operations this node answered with an error code, by code")
                .tag("code", code.name())
                .register(registry));
      }
    }
    apply =
        Timer.builder("idem.apply")
            .description("Time to apply one log entry to the state machine")
            .publishPercentileHistogram()
            .register(registry);
    commandsPerEntry =
        DistributionSummary.builder("idem.entry.commands")
            .description("Commands per applied log entry")
            .publishPercentileHistogram()
            // An entry carries at most this many commands that apply: without the bound, Micrometer
            // published 276 buckets up to 2^62 per node.
            .minimumExpectedValue(1.0)
            .maximumExpectedValue((double) ReplicatedState.MAX_COMMANDS_PER_ENTRY)
            .register(registry);
    snapshotFreeze =
        Timer.builder("idem.snapshot.freeze")
            .description("Time the apply thread spent freezing the state for a snapshot")
            .register(registry);
    snapshotWrite =
        Timer.builder("idem.snapshot.write")
            .description("Time the writer thread spent writing, syncing and hashing a snapshot")
            .register(registry);
    snapshotBytes =
        DistributionSummary.builder("idem.snapshot.size")
            .description("Size of the snapshots written")
            .baseUnit("bytes")
            .register(registry);
    requestBatches =
        Counter.builder("idem.request.batches")
            .description(
                "Request batches (ClientFrame.requests) that came to this node's client port")
            .register(registry);
    batchedRequests =
        Counter.builder("idem.requests.batched")
            .description("Requests that came in request batches")
            .register(registry);
    entriesSkipped =
        Counter.builder("idem.entries.skipped")
            .description(
                "Log entries this node applied as no-ops because it cannot decode them (bytes that"
                    + " do not parse, or an unknown log format version)")
            .register(registry);
    streamsCutOff =
        Counter.builder("idem.streams.cut.off")
            .description(
                "Session streams this node ended with RESOURCE_EXHAUSTED because their client read"
                    + " none of the answers waiting for --stream-stall-timeout-ms")
            .register(registry);
    // The heap and buffer pools (jvm_memory_used_bytes, jvm_buffer_memory_used_bytes), and the
    // direct memory the transport's Netty allocates outside the JDK's buffer pools.
    new JvmMemoryMetrics().bindTo(registry);
    Gauge.builder("idem.netty.direct.memory.used", PlatformDependent::usedDirectMemory)
        .description(
            "Direct memory the gRPC transport (Netty) has allocated; -1 if Netty does not count it")
        .baseUnit("bytes")
        .register(registry);
    proposalsRefused =
        Counter.builder("idem.proposals.refused")
            .description(
                "Proposals this node refused to append as leader: not from its own front door, or"
                    + " stamped too far ahead of its clock")
            .register(registry);
    connectionsRefused =
        Counter.builder("idem.client.connections.refused")
            .description(
                "Client-port connections not served: their client already had"
                    + " --max-connections-per-client")
            .register(registry);
  }

  /** A client connection was refused: its client had as many as it may. */
  void connectionRefused() {
    connectionsRefused.increment();
  }

  /** A log entry was applied as a no-op: it could not be decoded. */
  void entrySkipped() {
    entriesSkipped.increment();
  }

  /** A proposal was refused before it reached the log. */
  void proposalRefused() {
    proposalsRefused.increment();
  }

  /** A session stream was ended because its client read none of its answers for the bound. */
  void streamCutOff() {
    streamsCutOff.increment();
  }

  /** Log entries applied as no-ops since this node started. */
  long entriesSkipped() {
    return (long) entriesSkipped.count();
  }

  /** A request batch brought {@code requests} requests. */
  void requestBatch(int requests) {
    requestBatches.increment();
    batchedRequests.increment(requests);
  }

  /** The registry, for the node's gauges and the admin port's scrape. */
  PrometheusMeterRegistry registry() {
    return registry;
  }

  /**
   * Counts an applied entry: its commands, and, if this node answered it, each session command's
   * outcome by kind (OK) or code (otherwise).
   */
  void applied(LogEntry entry, EntryResult result, long nanos) {
    apply.record(nanos, TimeUnit.NANOSECONDS);
    commandsPerEntry.record(entry.getCommandsCount());
    int answered = Math.min(entry.getCommandsCount(), result.getResultsCount());
    for (int i = 0; i < answered; i++) {
      Command c = entry.getCommands(i);
      CommandResult r = result.getResults(i);
      if (!c.hasSession() || !r.hasFrame() || r.getFrame().getDuplicate()) {
        continue;
      }
      Code code = r.getFrame().getResult().getCode();
      if (code == Code.OK) {
        Counter kind = writes.get(c.getSession().getOp().getOpCase());
        if (kind != null) {
          kind.increment();
        }
      } else {
        Counter rejected = rejections.get(code);
        if (rejected != null) {
          rejected.increment();
        }
      }
    }
  }

  /** Records a snapshot: the apply thread's freeze, the writer's time, and the file's size. */
  void snapshot(long freezeNanos, long writeNanos, long bytes) {
    snapshotFreeze.record(freezeNanos, TimeUnit.NANOSECONDS);
    snapshotWrite.record(writeNanos, TimeUnit.NANOSECONDS);
    snapshotBytes.record((double) bytes);
  }

  /** The Prometheus text exposition of every meter. */
  String scrape() {
    return registry.scrape();
  }
}
