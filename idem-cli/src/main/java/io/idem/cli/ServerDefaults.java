package io.idem.cli;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import picocli.CommandLine.IDefaultValueProvider;
import picocli.CommandLine.Model.ArgSpec;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.ParameterException;

/**
 * The defaults of {@code idem server}'s flags: the environment, then the configuration file.
 * Picocli asks it for every flag not given on the command line, so that a flag wins over the
 * environment, which wins over the file, which wins over the flag's built-in default.
 *
 * <p>A flag's key is its name without the dashes ({@code --data-dir}: {@code data-dir}); its
 * environment variable is {@code IDEM_} and the key in upper snake case ({@code IDEM_DATA_DIR}).
 * The file is a {@link Properties} file ({@code key = value}, {@code #} comments); a list flag
 * takes its values separated as on the command line ({@code quota = kv_keys=1000,leases=100},
 * {@code peer-allow = CN=n1;CN=n2}), a switch takes {@code true} or {@code false}. A key the server
 * does not know is an error naming the key and the file, and so is a value of the wrong type.
 *
 * <p>Which file: {@code --config}, else the variable {@code IDEM_CONFIG}, else {@value
 * #DEFAULT_FILE} under the installation directory (the system property {@value #HOME_PROPERTY},
 * which {@code bin/idem} sets) when that file exists; else none.
 */
public final class ServerDefaults implements IDefaultValueProvider {
  /** The prefix of the environment variables. */
  public static final String ENV_PREFIX = "IDEM_";

  /** The variable that names the configuration file when {@code --config} does not. */
  public static final String CONFIG_VARIABLE = "IDEM_CONFIG";

  /** The system property naming the installation directory. */
  public static final String HOME_PROPERTY = "idem.home";

  /** The configuration file of an installation, under its directory. */
  public static final String DEFAULT_FILE = "conf/idem.conf";

  /** Keys that name no setting of the node: they never come from the environment or a file. */
  private static final Set<String> NOT_SETTINGS = Set.of("help", "version", "config");

  private Path loadedFrom;
  private Properties loaded;

  /** Picocli makes one per command line. */
  public ServerDefaults() {}

  @Override
  public String defaultValue(ArgSpec arg) {
    if (!(arg instanceof OptionSpec option)) {
      return null;
    }
    String key = key(option);
    if (NOT_SETTINGS.contains(key)) {
      return null;
    }
    ServerCommand command = (ServerCommand) arg.command().userObject();
    String variable = variable(key);
    String value = command.environment.get(variable);
    if (value != null) {
      return checked(option, value, "the environment variable " + variable);
    }
    Path file = file(command);
    if (file == null) {
      return null;
    }
    value = load(file, arg.command()).getProperty(key);
    return value == null ? null : checked(option, value.trim(), file + ": " + key);
  }

  /** The key of {@code option} in a configuration file: its longest name without the dashes. */
  static String key(OptionSpec option) {
    return option.longestName().replaceFirst("^-+", "");
  }

  /** The environment variable of {@code key}: {@code data-dir} is {@code IDEM_DATA_DIR}. */
  static String variable(String key) {
    return ENV_PREFIX + key.replace('-', '_').toUpperCase(Locale.ROOT);
  }

  /** The keys a configuration file may hold, in order. */
  public static Set<String> keys(CommandSpec spec) {
    Set<String> keys = new TreeSet<>();
    for (OptionSpec o : spec.options()) {
      if (!NOT_SETTINGS.contains(key(o))) {
        keys.add(key(o));
      }
    }
    return keys;
  }

  /** The configuration file of {@code command}, or null when it has none. */
  static Path file(ServerCommand command) {
    if (command.config != null) {
      return command.config;
    }
    String named = command.environment.get(CONFIG_VARIABLE);
    if (named != null && !named.isBlank()) {
      return Path.of(named);
    }
    String home = System.getProperty(HOME_PROPERTY);
    if (home != null) {
      Path file = Path.of(home).resolve(DEFAULT_FILE);
      if (Files.isRegularFile(file)) {
        return file;
      }
    }
    return null;
  }

  /**
   * Reads {@code file} once, and refuses it if it holds a key the server does not know.
   *
   * @throws ParameterException naming the file and the unknown key
   */
  Properties load(Path file, CommandSpec spec) {
    if (file.equals(loadedFrom)) {
      return loaded;
    }
    Properties p = new Properties();
    try (Reader in = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
      p.load(in);
    } catch (NoSuchFileException e) {
      throw new ParameterException(
          spec.commandLine(), "the configuration file " + file + " does not exist", e);
    } catch (IOException | IllegalArgumentException e) {
      throw new ParameterException(
          spec.commandLine(), "cannot read the configuration file " + file + ": " + e, e);
    }
    Set<String> known = keys(spec);
    for (String key : new TreeSet<>(p.stringPropertyNames())) {
      if (!known.contains(key)) {
        String near = nearest(key, known);
        throw new ParameterException(
            spec.commandLine(),
            file
                + ": unknown key '"
                + key
                + "'"
                + (near == null ? "" : " (did you mean '" + near + "'?)"));
      }
    }
    loadedFrom = file;
    loaded = p;
    return p;
  }

  /**
   * {@code value}, if it has the type of {@code option}: picocli's own message would name neither
   * the file nor the key.
   */
  private static String checked(OptionSpec option, String value, String where) {
    Class<?> type = option.type();
    String problem = null;
    try {
      if (type == long.class || type == int.class) {
        long n = Long.parseLong(value);
        if (type == int.class && n != (int) n) {
          problem = "out of range";
        }
      } else if (type == boolean.class
          && !List.of("true", "false").contains(value.toLowerCase(Locale.ROOT))) {
        problem = "not true or false";
      }
    } catch (NumberFormatException e) {
      problem = "not a whole number";
    }
    if (problem != null) {
      throw new ParameterException(
          option.command().commandLine(),
          where + ": bad value '" + value + "' (" + problem + ")",
          option,
          value);
    }
    return value;
  }

  /** The known key at the smallest edit distance from {@code key}, if it is close; else null. */
  static String nearest(String key, Set<String> known) {
    String best = null;
    int bestDistance = Integer.MAX_VALUE;
    for (String k : known) {
      int d = distance(key, k);
      if (d < bestDistance) {
        best = k;
        bestDistance = d;
      }
    }
    return bestDistance <= Math.max(2, key.length() / 4) ? best : null;
  }

  /** Levenshtein distance. */
  private static int distance(String a, String b) {
    int[] row = new int[b.length() + 1];
    for (int j = 0; j <= b.length(); j++) {
      row[j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      int diagonal = row[0];
      row[0] = i;
      for (int j = 1; j <= b.length(); j++) {
        int above = row[j];
        int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
        row[j] = Math.min(Math.min(row[j] + 1, row[j - 1] + 1), diagonal + cost);
        diagonal = above;
      }
    }
    return row[b.length()];
  }
}
