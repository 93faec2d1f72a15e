package io.idem.dist;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.cli.ServerCommand;
import io.idem.cli.ServerDefaults;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;
import picocli.CommandLine.Model.OptionSpec;

/** What the archive holds: the operator's tool, its configuration, and no lab code. */
class ArchiveContentsTest {
  /**
   * Parts of class names that only the lab may hold: campaigns and checkers, seed 001, benchmarks,
   * examples, the etcd client (jetcd, and any class named for etcd), JMH and Jetty. Jetty by its
   * package: grpc-netty has a class JettyTlsUtil of its own.
   */
  static final List<String> LAB_ONLY =
      List.of(
          "seed001",
          "io/idem/verify",
          "io/idem/bench",
          "io/idem/lab",
          "io/idem/examples",
          "etcd",
          "jmh",
          "org/eclipse/jetty");

  /** Parts of jar names that only the lab's jars have. */
  static final List<String> LAB_JARS =
      List.of("idem-verify", "idem-bench", "idem-examples", "idem-lab", "jetcd", "jmh", "jetty");

  @TempDir static Path dir;
  static Path home;

  @BeforeAll
  static void unpack() throws Exception {
    home = Archive.unpack(dir);
  }

  private static List<Path> jars() throws IOException {
    try (Stream<Path> files = Files.list(home.resolve("lib"))) {
      return files.sorted().toList();
    }
  }

  @Test
  void libHoldsTheOperatorToolAsSeparateJars() throws Exception {
    List<String> names = jars().stream().map(p -> p.getFileName().toString()).toList();
    assertThat(names).allMatch(n -> n.endsWith(".jar"), "only jars");
    for (String module : List.of("idem-cli-", "idem-server-", "idem-client-", "idem-proto-")) {
      assertThat(names).as(module).anyMatch(n -> n.startsWith(module));
    }
    assertThat(names).anyMatch(n -> n.startsWith("picocli-")).anyMatch(n -> n.startsWith("ratis-"));
    // No fat jar: idem-cli's jar holds its own classes only.
    Path cli =
        jars().stream()
            .filter(p -> p.getFileName().toString().startsWith("idem-cli-"))
            .findFirst()
            .orElseThrow();
    try (JarFile jar = new JarFile(cli.toFile())) {
      assertThat(
              jar.stream()
                  .map(JarEntry::getName)
                  .filter(n -> n.endsWith(".class"))
                  .filter(n -> !n.startsWith("io/idem/cli/")))
          .isEmpty();
    }
  }

  @Test
  void noClassInLibIsLabCode() throws Exception {
    List<String> found = new ArrayList<>();
    for (Path jar : jars()) {
      String jarName = jar.getFileName().toString();
      for (String bad : LAB_JARS) {
        if (jarName.toLowerCase(Locale.ROOT).contains(bad)) {
          found.add(jarName);
        }
      }
      try (JarFile file = new JarFile(jar.toFile())) {
        file.stream()
            .map(JarEntry::getName)
            .filter(n -> n.endsWith(".class"))
            .filter(n -> LAB_ONLY.stream().anyMatch(n.toLowerCase(Locale.ROOT)::contains))
            .limit(3)
            .forEach(n -> found.add(jarName + "!" + n));
      }
    }
    assertThat(found).as("lab code in lib/").isEmpty();
  }

  @Test
  void theScriptsAndTheUnitAreThere() throws Exception {
    assertThat(Files.isExecutable(home.resolve("bin/idem"))).isTrue();
    assertThat(home.resolve("bin/idem.cmd")).exists();
    assertThat(home.resolve("README.md")).exists();
    String unit = Files.readString(home.resolve("systemd/idem.service"));
    assertThat(unit)
        .contains("User=idem")
        .contains("bin/idem server --config ")
        .contains("Restart=on-failure")
        .contains("KillSignal=SIGTERM")
        .contains("SuccessExitStatus=143");
  }

  /** conf/idem.conf lists every key of {@code idem server}, commented out at its default. */
  @Test
  void theConfigurationFileListsEveryKeyAtItsDefault() throws Exception {
    Map<String, String> listed = new LinkedHashMap<>();
    Matcher m =
        Pattern.compile("(?m)^(#? ?)([a-z-]+) =(.*)$")
            .matcher(Files.readString(home.resolve("conf/idem.conf")));
    while (m.find()) {
      assertThat(m.group(1)).as("%s is commented out", m.group(2)).isEqualTo("# ");
      listed.put(m.group(2), m.group(3).trim());
    }
    CommandLine cli = new CommandLine(new ServerCommand());
    assertThat(listed.keySet())
        .containsExactlyInAnyOrderElementsOf(ServerDefaults.keys(cli.getCommandSpec()));
    for (OptionSpec o : cli.getCommandSpec().options()) {
      String key = o.longestName().substring(2);
      if (listed.containsKey(key)) {
        String dflt = o.defaultValue() == null ? "" : o.defaultValue();
        if (o.type() == boolean.class && dflt.isEmpty()) {
          dflt = "false";
        }
        assertThat(listed.get(key)).as(key).isEqualTo(dflt);
      }
    }
  }
}
