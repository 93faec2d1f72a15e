package io.idem.client;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleDescriptor.Exports;
import java.lang.module.ModuleDescriptor.Requires;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.Type;
import java.net.URISyntaxException;
import java.nio.file.FileSystem;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The module io.idem.client exports its API package and nothing else, and that API names no type of
 * the internal package, of the protocol or of gRPC and protobuf.
 *
 * <p>Both read the compiled output of the main source set, wherever IdemClient was loaded from (a
 * directory or a jar), so they hold whether the tests run on the module path or on the class path.
 */
class ModuleBoundaryTest {

  private static final String API = "io.idem.client";
  private static final String INTERNAL = "io.idem.client.internal";

  /** Prefixes of type names that must not appear in a public or protected signature of the API. */
  private static final List<String> FORBIDDEN =
      List.of(INTERNAL + ".", "io.idem.proto.", "io.grpc.", "com.google.protobuf.");

  /** Runs {@code body} on the root of the compiled main classes (the module's root). */
  private interface OnRoot<T> {
    T apply(Path root) throws IOException;
  }

  private static <T> T onMainClasses(OnRoot<T> body) throws IOException, URISyntaxException {
    Path location =
        Path.of(IdemClient.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    if (Files.isDirectory(location)) {
      return body.apply(location);
    }
    try (FileSystem jar = FileSystems.newFileSystem(location)) {
      return body.apply(jar.getPath("/"));
    }
  }

  private static ModuleDescriptor descriptor() throws Exception {
    return onMainClasses(
        root -> {
          // The class file names the exported packages only; the rest are found on disk.
          Set<String> packages;
          try (Stream<Path> files = Files.walk(root)) {
            packages =
                files
                    .filter(p -> p.getFileName() != null)
                    .filter(p -> p.getFileName().toString().endsWith(".class"))
                    .map(p -> root.relativize(p.getParent()).toString())
                    .filter(dir -> !dir.isEmpty() && !dir.startsWith("META-INF"))
                    .map(dir -> dir.replace(root.getFileSystem().getSeparator(), "."))
                    .collect(Collectors.toSet());
          }
          try (InputStream in = Files.newInputStream(root.resolve("module-info.class"))) {
            return ModuleDescriptor.read(in, () -> packages);
          }
        });
  }

  @Test
  void exportsOnlyTheApiPackage() throws Exception {
    ModuleDescriptor d = descriptor();

    assertThat(d.name()).isEqualTo(API);
    assertThat(d.isOpen()).isFalse();
    assertThat(d.opens()).isEmpty();
    // The internal package is in the module, and is not exported, not even to a friend module.
    assertThat(d.packages()).contains(API, INTERNAL);
    assertThat(d.exports()).hasSize(1);
    Exports only = d.exports().iterator().next();
    assertThat(only.source()).isEqualTo(API);
    assertThat(only.isQualified()).as("exported to every module, not to some").isFalse();
    // The API does not hand the protocol or gRPC to its readers: only Micrometer, optional, whose
    // MeterRegistry the builder takes, and JSpecify, whose @Nullable the signatures carry.
    assertThat(
            d.requires().stream()
                .filter(r -> r.modifiers().contains(Requires.Modifier.TRANSITIVE))
                .map(Requires::name))
        .containsExactlyInAnyOrder("micrometer.core", "org.jspecify");
    assertThat(
            d.requires().stream()
                .filter(r -> r.name().equals("micrometer.core"))
                .allMatch(r -> r.modifiers().contains(Requires.Modifier.STATIC)))
        .as("Micrometer is optional at run time")
        .isTrue();

    // On the module path the runtime enforces it too.
    Module m = IdemClient.class.getModule();
    if (m.isNamed()) {
      assertThat(m.isExported(API)).isTrue();
      assertThat(m.isExported(INTERNAL)).isFalse();
    }
  }

  @Test
  void apiSignaturesNameNoInternalProtocolOrGrpcType() throws Exception {
    List<String> classes =
        onMainClasses(
            root -> {
              try (Stream<Path> files = Files.list(root.resolve(API.replace('.', '/')))) {
                return files
                    .map(p -> p.getFileName().toString())
                    .filter(n -> n.endsWith(".class"))
                    .map(n -> API + "." + n.substring(0, n.length() - ".class".length()))
                    .sorted()
                    .collect(Collectors.toList());
              }
            });
    assertThat(classes).contains(IdemClient.class.getName(), IdemTransport.class.getName());

    List<String> leaks = new ArrayList<>();
    for (String name : classes) {
      Class<?> c = Class.forName(name, false, IdemClient.class.getClassLoader());
      if (!isApi(c)) {
        continue;
      }
      List<String> signatures = new ArrayList<>();
      signatures.add(c.toGenericString());
      if (c.getGenericSuperclass() != null) {
        signatures.add(c.getGenericSuperclass().getTypeName());
      }
      for (Type i : c.getGenericInterfaces()) {
        signatures.add(i.getTypeName());
      }
      for (Field f : c.getDeclaredFields()) {
        if (visible(f.getModifiers())) {
          signatures.add(f.toGenericString());
        }
      }
      for (Constructor<?> k : c.getDeclaredConstructors()) {
        if (visible(k.getModifiers())) {
          signatures.add(k.toGenericString());
        }
      }
      for (Method meth : c.getDeclaredMethods()) {
        if (visible(meth.getModifiers()) && !meth.isSynthetic()) {
          signatures.add(meth.toGenericString());
        }
      }
      for (String s : signatures) {
        for (String prefix : FORBIDDEN) {
          if (s.contains(prefix)) {
            leaks.add(name + ": " + s);
          }
        }
      }
    }
    assertThat(leaks).as("public or protected signatures that name a hidden type").isEmpty();
  }

  private static boolean visible(int modifiers) {
    return Modifier.isPublic(modifiers) || Modifier.isProtected(modifiers);
  }

  /**
   * Reachable from outside the package: public, or protected inside such a class, all the way up.
   */
  private static boolean isApi(Class<?> c) {
    if (c.isSynthetic() || c.isAnonymousClass() || c.isLocalClass()) {
      return false;
    }
    for (Class<?> k = c; k != null; k = k.getDeclaringClass()) {
      boolean nested = k.getDeclaringClass() != null;
      if (!(Modifier.isPublic(k.getModifiers())
          || (nested && Modifier.isProtected(k.getModifiers())))) {
        return false;
      }
    }
    return true;
  }
}
