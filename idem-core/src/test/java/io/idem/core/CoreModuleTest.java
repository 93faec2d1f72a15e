package io.idem.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleDescriptor.Exports;
import java.lang.module.ModuleDescriptor.Requires;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The module io.idem.core exports its one package to everyone, opens nothing, and requires nothing
 * but java.base: the module descriptor states the JDK-only rule that the enforcer and {@link
 * DeterminismRulesTest} check in the build.
 */
class CoreModuleTest {

  private static ModuleDescriptor descriptor() throws IOException, URISyntaxException {
    Path root =
        Path.of(SessionTable.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    Path info =
        Files.isDirectory(root)
            ? root.resolve("module-info.class")
            : java.nio.file.FileSystems.newFileSystem(root).getPath("/module-info.class");
    try (InputStream in = Files.newInputStream(info)) {
      return ModuleDescriptor.read(in, () -> Set.of("io.idem.core"));
    }
  }

  @Test
  void exportsItsOnePackageAndRequiresOnlyTheJdkBase() throws Exception {
    ModuleDescriptor d = descriptor();

    assertThat(d.name()).isEqualTo("io.idem.core");
    assertThat(d.isOpen()).isFalse();
    assertThat(d.opens()).isEmpty();
    assertThat(d.exports()).hasSize(1);
    Exports only = d.exports().iterator().next();
    assertThat(only.source()).isEqualTo("io.idem.core");
    assertThat(only.isQualified()).as("exported to every module, not to some").isFalse();
    assertThat(d.requires()).extracting(Requires::name).containsExactly("java.base");
  }
}
