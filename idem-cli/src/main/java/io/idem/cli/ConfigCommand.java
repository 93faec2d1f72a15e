package io.idem.cli;

import io.idem.client.ClusterConfig;
import io.idem.client.ClusterStatus;
import io.idem.client.IdemClient;
import io.idem.proto.Code;
import io.idem.proto.ConfigureReply;
import io.idem.proto.ConfigureRequest;
import io.idem.proto.Limits;
import io.idem.proto.SessionBounds;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code idem config show|set}: the cluster's replicated configuration (limits and session bounds),
 * which only changes through the log (see the Configure RPC in docs/PROTOCOL.md).
 */
@Command(
    name = "config",
    mixinStandardHelpOptions = true,
    description =
        "The replicated configuration: limits and session bounds, changed through the log.",
    subcommands = {ConfigCommand.Show.class, ConfigCommand.Set.class})
final class ConfigCommand {

  /** Prints one {@code name value} line per setting, named like {@code set}'s options. */
  static void print(PrintWriter out, ClusterConfig c) {
    out.println("max-key-bytes " + c.maxKeyBytes());
    out.println("max-value-bytes " + c.maxValueBytes());
    out.println("max-lease-name-chars " + c.maxLeaseNameChars());
    out.println("max-lease-ttl " + duration(c.maxLeaseTtlMs()));
    out.println("window " + c.window());
    out.println("max-sessions " + c.maxSessions());
    out.println("max-session-ttl " + duration(c.maxSessionTtlMs()));
    out.println("max-session-name-chars " + c.maxSessionNameChars());
    c.quotas().forEach((name, value) -> out.println("quota " + name + "=" + value));
    if (c.backendBytes() != 0) {
      out.println("backend-bytes " + c.backendBytes());
    }
    out.println(
        "revision "
            + c.revision()
            + (c.revision() == 0 ? " (none applied yet: the defaults)" : ""));
  }

  /** In the largest unit that is exact, so that the value can be given back to {@code set}. */
  private static String duration(long ms) {
    if (ms % 60_000 == 0) {
      return ms / 60_000 + "m";
    }
    return ms % 1000 == 0 ? ms / 1000 + "s" : ms + "ms";
  }

  @Command(
      name = "show",
      mixinStandardHelpOptions = true,
      description =
          "Prints the configuration in force as the leader reports it (else the first server that"
              + " answers), one name and value a line, and the log index that set it.")
  static final class Show implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Override
    public Integer call() {
      ClusterStatus first = null;
      String lastFailure = "";
      for (String server : servers(options)) {
        try (IdemClient c =
            IdemClient.builder()
                .servers(server)
                .requestTimeout(options.timeout)
                .tls(options.tls())
                .build()) {
          ClusterStatus s = c.status();
          if (s.role().equals("LEADER")) {
            first = s;
            break;
          }
          first = first == null ? s : first;
        } catch (RuntimeException e) {
          lastFailure = server + ": " + Errors.oneLine(e);
        }
      }
      if (first == null) {
        spec.commandLine().getErr().println("idem: no server reachable (" + lastFailure + ")");
        return 1;
      }
      print(spec.commandLine().getOut(), first.config());
      return 0;
    }
  }

  @Command(
      name = "set",
      mixinStandardHelpOptions = true,
      description =
          "Changes the configuration through the log (leader only; NOT_LEADER is followed) and"
              + " prints the configuration in force after it. Settings not given keep their value."
              + " The server refuses the whole change if any value is out of range.")
  static final class Set implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Option(
        names = "--max-key-bytes",
        converter = SizeConverter.class,
        description = "Largest key, in UTF-8 bytes, e.g. 4096 or 4KiB.")
    Integer maxKeyBytes;

    @Option(
        names = "--max-value-bytes",
        converter = SizeConverter.class,
        description = "Largest value, in bytes, e.g. 2000 or 1MiB.")
    Integer maxValueBytes;

    @Option(names = "--max-lease-name-chars", description = "Longest lease name, in characters.")
    Integer maxLeaseNameChars;

    @Option(
        names = "--max-lease-ttl",
        converter = DurationConverter.class,
        description = "Longest lease TTL, e.g. 60m.")
    Duration maxLeaseTtl;

    @Option(names = "--window", description = "Most unacknowledged answers a session holds.")
    Integer window;

    @Option(names = "--max-sessions", description = "Most live sessions.")
    Integer maxSessions;

    @Option(
        names = "--max-session-ttl",
        converter = DurationConverter.class,
        description = "Longest session TTL a client may ask for, e.g. 60m.")
    Duration maxSessionTtl;

    @Option(
        names = "--max-session-name-chars",
        description = "Longest durable session name, in characters.")
    Integer maxSessionNameChars;

    @Option(
        names = "--log-format",
        description =
            "Raise the log format in force, the version leaders write, once every member runs"
                + " code that applies it (idem status shows each node's max-log-format). Never"
                + " lowered.")
    Integer logFormat;

    @Option(
        names = "--quota",
        description =
            "A default quota of every principal (a role's quotas replace it for its principals),"
                + " e.g. --quota key_records=100000 --quota kv_bytes=256MiB. Quotas: sessions,"
                + " saved_bytes, key_records, key_bytes, kv_keys, kv_bytes, leases, list_length."
                + " Log format 7.")
    java.util.Map<String, String> quotas = new java.util.LinkedHashMap<>();

    @Option(
        names = "--backend-bytes",
        description =
            "The backend budget, e.g. 1GiB: past this estimated size of the replicated state,"
                + " writes that grow it are refused with NO_SPACE until it shrinks below 90%."
                + " Log format 7.")
    String backendBytes;

    @Override
    public Integer call() throws InterruptedException {
      PrintWriter err = spec.commandLine().getErr();
      String problem = problem();
      if (problem != null) {
        err.println("idem: " + problem + " (see --help)");
        return 2;
      }
      ConfigureRequest request;
      try {
        request = request();
      } catch (IllegalArgumentException e) {
        err.println("idem: " + e.getMessage() + " (see --help)");
        return 2;
      }
      ConfigureReply reply = send(request);
      if (reply.getCode() != Code.OK) {
        err.println("idem: " + reply.getCode() + ": " + reply.getMessage());
        return 1;
      }
      print(
          spec.commandLine().getOut(),
          new ClusterConfig(
              reply.getLimits().getMaxKeyBytes(),
              reply.getLimits().getMaxValueBytes(),
              reply.getLimits().getMaxNameChars(),
              reply.getLimits().getMaxLeaseTtlMs(),
              reply.getSessions().getWindow(),
              reply.getSessions().getMaxSessions(),
              reply.getSessions().getMaxTtlMs(),
              reply.getSessions().getMaxNameChars(),
              reply.getConfigRevision(),
              io.idem.server.QuotaFlags.byName(reply.getQuotas()),
              reply.getBackendBytes()));
      return 0;
    }

    /** What is wrong with the options before anything is sent; null if nothing. */
    private String problem() {
      Integer[] numbers = {
        maxKeyBytes,
        maxValueBytes,
        maxLeaseNameChars,
        window,
        maxSessions,
        maxSessionNameChars,
        logFormat
      };
      boolean any =
          maxLeaseTtl != null || maxSessionTtl != null || !quotas.isEmpty() || backendBytes != null;
      for (Integer n : numbers) {
        any |= n != null;
        if (n != null && n == 0) {
          // On the wire 0 means "keep the current value": sent, it would change nothing.
          return "0 is not a setting (a field left out keeps its value)";
        }
      }
      return any
          ? null
          : "config set needs at least one of --max-key-bytes, --max-value-bytes,"
              + " --max-lease-name-chars, --max-lease-ttl, --window, --max-sessions,"
              + " --max-session-ttl, --max-session-name-chars, --log-format, --quota,"
              + " --backend-bytes";
    }

    private ConfigureRequest request() {
      Limits.Builder l = Limits.newBuilder();
      if (maxKeyBytes != null) {
        l.setMaxKeyBytes(maxKeyBytes);
      }
      if (maxValueBytes != null) {
        l.setMaxValueBytes(maxValueBytes);
      }
      if (maxLeaseNameChars != null) {
        l.setMaxNameChars(maxLeaseNameChars);
      }
      if (maxLeaseTtl != null) {
        l.setMaxLeaseTtlMs(maxLeaseTtl.toMillis());
      }
      SessionBounds.Builder s = SessionBounds.newBuilder();
      if (window != null) {
        s.setWindow(window);
      }
      if (maxSessions != null) {
        s.setMaxSessions(maxSessions);
      }
      if (maxSessionTtl != null) {
        s.setMaxTtlMs(maxSessionTtl.toMillis());
      }
      if (maxSessionNameChars != null) {
        s.setMaxNameChars(maxSessionNameChars);
      }
      ConfigureRequest.Builder r =
          ConfigureRequest.newBuilder()
              .setLimits(l)
              .setSessions(s)
              .setLogFormat(logFormat == null ? 0 : logFormat);
      if (!quotas.isEmpty()) {
        r.setQuotas(io.idem.server.QuotaFlags.parse(quotas));
      }
      if (backendBytes != null) {
        long b = io.idem.server.QuotaFlags.size(backendBytes);
        if (b == 0) {
          throw new IllegalArgumentException("--backend-bytes 0 is not a budget");
        }
        r.setBackendBytes(b);
      }
      return r.build();
    }

    /**
     * Sends the change to the leader of every group ({@link LeaderCall#sendToEveryGroup}). Trying
     * again after a lost reply is safe: the change sets values, so applying it twice leaves the
     * same configuration.
     */
    private ConfigureReply send(ConfigureRequest request) throws InterruptedException {
      return new LeaderCall<ConfigureReply>(
              (stub, left) -> stub.configure(request),
              ConfigureReply::getCode,
              ConfigureReply::getLeaderHint)
          .sendToEveryGroup(options);
    }
  }

  private static List<String> servers(ClientOptions options) {
    return LeaderCall.servers(options);
  }
}
