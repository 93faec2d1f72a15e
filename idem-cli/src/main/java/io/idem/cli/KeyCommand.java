package io.idem.cli;

import io.idem.client.IdemClient;
import io.idem.client.KeyAcquisition;
import io.idem.client.KeyRecord;
import io.idem.client.KeySettlement;
import io.idem.client.Write;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code idem key acquire|complete|release|renew|show}: application idempotency keys, one
 * exactly-once operation each. Times printed are log time in ms, the cluster's clock.
 */
@Command(
    name = "key",
    mixinStandardHelpOptions = true,
    description =
        "Application idempotency keys: acquire one for a business step, then complete (storing its"
            + " response for retries to replay) or release it. Times are log time in ms.",
    subcommands = {
      KeyCommand.Acquire.class,
      KeyCommand.Complete.class,
      KeyCommand.Release.class,
      KeyCommand.Renew.class,
      KeyCommand.Show.class
    })
final class KeyCommand {

  /** How much of a fingerprint {@code show} prints, in hex: enough to tell two apart by eye. */
  static final int SHOWN_FINGERPRINT_BYTES = 8;

  /** Why {@code value} is no valid scope or key, or null: the client's bounds, checked early. */
  static String keyPartProblem(String what, String value, boolean mayBeEmpty) {
    if (value.isEmpty() && !mayBeEmpty) {
      return what + " must not be empty";
    }
    if (value.length() > IdemClient.MAX_KEY_CHARS) {
      return what
          + " must have at most "
          + IdemClient.MAX_KEY_CHARS
          + " characters, got "
          + value.length();
    }
    return null;
  }

  /** Why {@code token} is no token, or null. Tokens are log positions: positive. */
  static String tokenProblem(long token) {
    return token < 1 ? "a token is positive, got " + token : null;
  }

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  private static String text(byte[] b) {
    return new String(b, StandardCharsets.UTF_8);
  }

  /** Prints a refused complete, release or renew; the exit code. */
  private static int fenced(CommandSpec spec, KeySettlement.Fenced f) {
    spec.commandLine()
        .getErr()
        .println(
            f.currentToken() == 0
                ? "idem: fenced: the key has no owner (completed, released, expired or never"
                    + " acquired)"
                : "idem: fenced: the key's current token is " + f.currentToken());
    return 1;
  }

  /** The scope and the key, every subcommand's. */
  static final class KeyId {
    @Spec(Spec.Target.MIXEE)
    CommandSpec spec;

    @Option(
        names = "--scope",
        paramLabel = "SCOPE",
        defaultValue = "",
        description = "The key's scope (a tenant, say), at most 255 characters. Default: empty.")
    String scope;

    @Parameters(index = "0", paramLabel = "KEY", description = "The key, 1 to 255 characters.")
    String key;

    /** Checks both before any connection is made: a usage error, exit 2. */
    void check() {
      String problem = keyPartProblem("--scope", scope, true);
      problem = problem != null ? problem : keyPartProblem("KEY", key, false);
      if (problem != null) {
        throw new ParameterException(spec.commandLine(), problem);
      }
    }
  }

  /** {@code --token}, for the owner's operations. */
  static final class Token {
    @Spec(Spec.Target.MIXEE)
    CommandSpec spec;

    @Option(
        names = "--token",
        required = true,
        paramLabel = "N",
        description = "The token `idem key acquire` printed.")
    long token;

    /** The token, checked: a usage error, exit 2. */
    long get() {
      String problem = tokenProblem(token);
      if (problem != null) {
        throw new ParameterException(spec.commandLine(), problem);
      }
      return token;
    }
  }

  @Command(
      name = "acquire",
      mixinStandardHelpOptions = true,
      description = {
        "Acquires a key for a business step, or says what holds it.",
        "Prints one line:",
        "  acquired token=N deadline=MS takeover=true|false",
        "  completed response=TEXT      (replay it: the step was done)",
        "  in-progress deadline=MS      (another owner holds it until then)",
        "A key used with another --fingerprint is an error (exit 1). The token fences writes:"
            + " see `idem kv put --help`, --fence."
      })
  static final class Acquire implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Mixin KeyId id;
    @Spec CommandSpec spec;

    @Option(
        names = "--fingerprint",
        paramLabel = "TEXT",
        description =
            "What the request carried; the SHA-256 of its UTF-8 is stored, and an acquire with"
                + " another is refused. Default: none.")
    String fingerprint;

    @Option(
        names = "--in-progress",
        paramLabel = "DURATION",
        defaultValue = "30s",
        converter = DurationConverter.class,
        description =
            "How long the owner holds the key; after that another acquire takes it over."
                + " Default: ${DEFAULT-VALUE}.")
    Duration inProgress;

    @Option(
        names = "--retention",
        paramLabel = "DURATION",
        defaultValue = "24h",
        converter = DurationConverter.class,
        description =
            "How long the record is kept after its completion (or its owner's deadline)."
                + " Default: ${DEFAULT-VALUE}.")
    Duration retention;

    @Override
    public Integer call() {
      id.check();
      byte[] fp = fingerprint == null ? new byte[0] : sha256(utf8(fingerprint));
      try (IdemClient c = options.client()) {
        KeyAcquisition a = c.acquireKey(id.scope, id.key, fp, inProgress, retention);
        PrintWriter out = spec.commandLine().getOut();
        if (a instanceof KeyAcquisition.Acquired x) {
          out.println(
              "acquired token="
                  + x.token()
                  + " deadline="
                  + x.deadlineMs()
                  + " takeover="
                  + x.takeover());
        } else if (a instanceof KeyAcquisition.Completed x) {
          out.println("completed response=" + text(x.response()));
        } else if (a instanceof KeyAcquisition.InProgress x) {
          out.println("in-progress deadline=" + x.deadlineMs());
        } else {
          spec.commandLine()
              .getErr()
              .println("idem: mismatch: the key was acquired with another fingerprint");
          return 1;
        }
      }
      return 0;
    }

    private static byte[] sha256(byte[] b) {
      try {
        return MessageDigest.getInstance("SHA-256").digest(b);
      } catch (NoSuchAlgorithmException e) {
        throw new IllegalStateException("every JDK has SHA-256", e);
      }
    }
  }

  @Command(
      name = "complete",
      mixinStandardHelpOptions = true,
      description = {
        "Completes the key --token owns, storing --response for later acquires to replay.",
        "At most one --effect-* write is applied in the same step: both or neither.",
        "Prints `settled` (`settled number=N` after an increment or append effect: the counter's"
            + " value or the list's length). A token that no longer owns the key is an error"
            + " (exit 1) and nothing is applied."
      })
  static final class Complete implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Mixin KeyId id;
    @Mixin Token token;
    @Spec CommandSpec spec;

    @Option(
        names = "--response",
        paramLabel = "TEXT",
        defaultValue = "",
        description = "The response to store (UTF-8, at most 64 KiB). Default: empty.")
    String response;

    @ArgGroup(exclusive = true, multiplicity = "0..1")
    Effect effect;

    /** The write applied with the completion: one of three. */
    static final class Effect {
      @Option(
          names = "--effect-put",
          paramLabel = "KEY=VALUE",
          description = "Write VALUE (UTF-8) at KEY; KEY ends at the first '='.")
      String put;

      @Option(
          names = "--effect-increment",
          paramLabel = "KEY=DELTA",
          description = "Add DELTA to the counter at KEY; DELTA follows the last '='.")
      String increment;

      @Option(
          names = "--effect-append",
          paramLabel = "KEY=VALUE",
          description = "Append VALUE (UTF-8) to the list at KEY; KEY ends at the first '='.")
      String append;

      Write write(CommandSpec spec) {
        if (increment != null) {
          int eq = increment.lastIndexOf('=');
          String key = eq < 0 ? "" : increment.substring(0, eq);
          try {
            long delta = Long.parseLong(increment.substring(eq + 1));
            return Write.increment(nonEmpty(spec, "--effect-increment", key), delta);
          } catch (NumberFormatException e) {
            throw new ParameterException(
                spec.commandLine(), "--effect-increment '" + increment + "' is not KEY=DELTA");
          }
        }
        String kv = put != null ? put : append;
        String option = put != null ? "--effect-put" : "--effect-append";
        int eq = kv.indexOf('=');
        if (eq < 0) {
          throw new ParameterException(
              spec.commandLine(), option + " '" + kv + "' is not KEY=VALUE");
        }
        String key = nonEmpty(spec, option, kv.substring(0, eq));
        byte[] value = utf8(kv.substring(eq + 1));
        return put != null ? Write.put(key, value) : Write.append(key, value);
      }

      private static String nonEmpty(CommandSpec spec, String option, String key) {
        if (key.isEmpty()) {
          throw new ParameterException(spec.commandLine(), option + " needs a KEY before '='");
        }
        return key;
      }
    }

    @Override
    public Integer call() {
      id.check();
      long t = token.get();
      Write w = effect == null ? null : effect.write(spec);
      try (IdemClient c = options.client()) {
        KeySettlement s = c.completeKey(id.scope, id.key, t, utf8(response), w);
        if (s instanceof KeySettlement.Fenced f) {
          return fenced(spec, f);
        }
        boolean counted = w instanceof Write.Increment || w instanceof Write.Append;
        spec.commandLine()
            .getOut()
            .println(
                counted
                    ? "settled number=" + ((KeySettlement.Settled) s).effectNumber()
                    : "settled");
      }
      return 0;
    }
  }

  @Command(
      name = "release",
      mixinStandardHelpOptions = true,
      description =
          "Drops the key --token owns (the step failed and did nothing), so that a retry may run"
              + " it again. Prints `settled`; a token that no longer owns the key is an error"
              + " (exit 1).")
  static final class Release implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Mixin KeyId id;
    @Mixin Token token;
    @Spec CommandSpec spec;

    @Override
    public Integer call() {
      id.check();
      long t = token.get();
      try (IdemClient c = options.client()) {
        KeySettlement s = c.releaseKey(id.scope, id.key, t);
        if (s instanceof KeySettlement.Fenced f) {
          return fenced(spec, f);
        }
        spec.commandLine().getOut().println("settled");
      }
      return 0;
    }
  }

  @Command(
      name = "renew",
      mixinStandardHelpOptions = true,
      description =
          "Moves the owner's deadline to now + --extension if --token still owns the key (a"
              + " heartbeat for long work). Prints `settled deadline=MS`; a token that no longer"
              + " owns the key is an error (exit 1).")
  static final class Renew implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Mixin KeyId id;
    @Mixin Token token;
    @Spec CommandSpec spec;

    @Option(
        names = "--extension",
        paramLabel = "DURATION",
        defaultValue = "30s",
        converter = DurationConverter.class,
        description = "The new deadline, from now. Default: ${DEFAULT-VALUE}.")
    Duration extension;

    @Override
    public Integer call() {
      id.check();
      long t = token.get();
      try (IdemClient c = options.client()) {
        KeySettlement s = c.renewKey(id.scope, id.key, t, extension);
        if (s instanceof KeySettlement.Fenced f) {
          return fenced(spec, f);
        }
        spec.commandLine()
            .getOut()
            .println("settled deadline=" + ((KeySettlement.Settled) s).deadlineMs());
      }
      return 0;
    }
  }

  @Command(
      name = "show",
      mixinStandardHelpOptions = true,
      description = {
        "Reads a key's record (linearizable).",
        "Prints one line: in-progress|completed token=N deadline=MS completed-at=MS",
        "  expires-at=MS log-time=MS fingerprint=HEX|none response=TEXT",
        "completed-at is 0 while in progress; fingerprint shows its first 8 bytes.",
        "Prints (not found) and exits 3 if the key has no record, like kv get."
      })
  static final class Show implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Mixin KeyId id;
    @Spec CommandSpec spec;

    @Override
    public Integer call() {
      id.check();
      try (IdemClient c = options.client()) {
        Optional<KeyRecord> found = c.getKey(id.scope, id.key);
        if (found.isEmpty()) {
          spec.commandLine().getOut().println("(not found)");
          return 3;
        }
        spec.commandLine().getOut().println(line(found.get()));
      }
      return 0;
    }

    static String line(KeyRecord r) {
      byte[] fp = r.fingerprint();
      String shown =
          fp.length == 0
              ? "none"
              : HexFormat.of().formatHex(fp, 0, Math.min(fp.length, SHOWN_FINGERPRINT_BYTES));
      return (r.completed() ? "completed" : "in-progress")
          + " token="
          + r.token()
          + " deadline="
          + r.deadlineMs()
          + " completed-at="
          + r.completedAtMs()
          + " expires-at="
          + r.expiresAtMs()
          + " log-time="
          + r.logTimeMs()
          + " fingerprint="
          + shown
          + " response="
          + text(r.response());
    }
  }
}
