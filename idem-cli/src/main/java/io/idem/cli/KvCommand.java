package io.idem.cli;

import io.idem.client.CasResult;
import io.idem.client.DeleteResult;
import io.idem.client.IdemClient;
import io.idem.client.KeyValue;
import io.idem.client.WriteResult;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code idem kv put|get|delete|incr|append|cas}: one exactly-once operation each. The writes take
 * {@code --fence KEY:TOKEN} ({@link FenceOptions}).
 */
@Command(
    name = "kv",
    mixinStandardHelpOptions = true,
    description = "Key-value operations, each applied exactly once.",
    subcommands = {
      KvCommand.Put.class,
      KvCommand.Get.class,
      KvCommand.Delete.class,
      KvCommand.Incr.class,
      KvCommand.Append.class,
      KvCommand.Cas.class
    })
final class KvCommand {

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Command(name = "put", mixinStandardHelpOptions = true, description = "Writes a value.")
  static final class Put implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;
    @Mixin FenceOptions fencing;

    @Parameters(index = "0", description = "The key.")
    String key;

    @Parameters(index = "1", description = "The value (UTF-8).")
    String value;

    @Option(names = "--lease", description = "Attach the key to this lease.")
    String lease;

    @Override
    public Integer call() {
      try (IdemClient c = fencing.client(options)) {
        WriteResult r = c.put(key, utf8(value), lease);
        spec.commandLine()
            .getOut()
            .println("OK revision=" + r.revision() + " version=" + r.version());
      }
      return 0;
    }
  }

  @Command(
      name = "get",
      mixinStandardHelpOptions = true,
      description = "Reads a key (linearizable).")
  static final class Get implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;

    @Parameters(index = "0", description = "The key.")
    String key;

    @Override
    public Integer call() {
      try (IdemClient c = options.client()) {
        Optional<KeyValue> kv = c.get(key);
        if (kv.isEmpty()) {
          spec.commandLine().getOut().println("(not found)");
          return 3;
        }
        KeyValue v = kv.get();
        if (v.value() != null) {
          spec.commandLine().getOut().println(v.valueAsString());
        } else {
          v.elements()
              .forEach(
                  e -> spec.commandLine().getOut().println(new String(e, StandardCharsets.UTF_8)));
        }
        spec.commandLine()
            .getErr()
            .println(
                "version="
                    + v.version()
                    + " modRevision="
                    + v.modRevision()
                    + (v.lease() == null ? "" : " lease=" + v.lease()));
      }
      return 0;
    }
  }

  @Command(name = "delete", mixinStandardHelpOptions = true, description = "Deletes a key.")
  static final class Delete implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;
    @Mixin FenceOptions fencing;

    @Parameters(index = "0", description = "The key.")
    String key;

    @Override
    public Integer call() {
      try (IdemClient c = fencing.client(options)) {
        DeleteResult d = c.delete(key);
        spec.commandLine()
            .getOut()
            .println(d.existed() ? "deleted at revision " + d.revision() : "(not found)");
      }
      return 0;
    }
  }

  @Command(
      name = "incr",
      mixinStandardHelpOptions = true,
      description = "Adds to a counter; prints the new value.")
  static final class Incr implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;
    @Mixin FenceOptions fencing;

    @Parameters(index = "0", description = "The key.")
    String key;

    @Parameters(
        index = "1",
        defaultValue = "1",
        description = "The delta. Default: ${DEFAULT-VALUE}.")
    long delta;

    @Override
    public Integer call() {
      try (IdemClient c = fencing.client(options)) {
        spec.commandLine().getOut().println(c.increment(key, delta));
      }
      return 0;
    }
  }

  @Command(
      name = "append",
      mixinStandardHelpOptions = true,
      description = "Appends to a list; prints its length.")
  static final class Append implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;
    @Mixin FenceOptions fencing;

    @Parameters(index = "0", description = "The key.")
    String key;

    @Parameters(index = "1", description = "The element (UTF-8).")
    String value;

    @Override
    public Integer call() {
      try (IdemClient c = fencing.client(options)) {
        spec.commandLine().getOut().println(c.append(key, utf8(value)));
      }
      return 0;
    }
  }

  @Command(
      name = "cas",
      mixinStandardHelpOptions = true,
      description = "Writes if the key's version matches (0: absent).")
  static final class Cas implements Callable<Integer> {
    @Mixin ClientOptions options;
    @Spec CommandSpec spec;
    @Mixin FenceOptions fencing;

    @Parameters(index = "0", description = "The key.")
    String key;

    @Parameters(index = "1", description = "The expected version.")
    long expected;

    @Parameters(index = "2", description = "The new value (UTF-8).")
    String value;

    @Override
    public Integer call() {
      try (IdemClient c = fencing.client(options)) {
        CasResult r = c.compareAndSet(key, expected, utf8(value));
        spec.commandLine()
            .getOut()
            .println(
                r.written()
                    ? "written: version " + r.version()
                    : "version mismatch: not written (the version is " + r.version() + ")");
        return r.written() ? 0 : 4;
      }
    }
  }
}
