package io.idem.spring;

import static org.assertj.core.api.Assertions.assertThat;

import java.beans.IntrospectionException;
import java.beans.Introspector;
import java.beans.PropertyDescriptor;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The jar carries {@code META-INF/spring-configuration-metadata.json}, which IDEs read to complete
 * and describe {@code idem.keys.*}: every settable property of {@link IdemKeysProperties} and its
 * nested groups is in it, with a description.
 */
class ConfigurationMetadataTest {
  private static final Pattern ENTRY =
      Pattern.compile(
          "\\{\\s*\"name\": \"([^\"]+)\",\\s*\"type\": \"[^\"]+\",\\s*\"description\": \"([^\"]*)\"");

  @Test
  void everyPropertyIsDescribedInTheMetadata() throws Exception {
    String metadata;
    try (InputStream in =
        getClass()
            .getClassLoader()
            .getResourceAsStream("META-INF/spring-configuration-metadata.json")) {
      assertThat(in).as("spring-configuration-metadata.json on the class path").isNotNull();
      metadata = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
    List<String> described = new ArrayList<>();
    Matcher m = ENTRY.matcher(metadata);
    while (m.find()) {
      if (!m.group(2).isBlank()) {
        described.add(m.group(1));
      }
    }
    List<String> expected = new ArrayList<>();
    settable("idem.keys", IdemKeysProperties.class, expected);
    settable("idem.keys.redis", IdemKeysProperties.Redis.class, expected);
    settable("idem.keys.postgres", IdemKeysProperties.Postgres.class, expected);
    settable("idem.keys.problem-types", IdemKeysProperties.ProblemTypes.class, expected);
    assertThat(expected).as("properties found by reflection").hasSizeGreaterThan(20);
    assertThat(described).containsAll(expected);
  }

  /** The kebab-case names of {@code type}'s properties that have a setter, under {@code prefix}. */
  private static void settable(String prefix, Class<?> type, List<String> into)
      throws IntrospectionException, IOException {
    for (PropertyDescriptor p :
        Introspector.getBeanInfo(type, Object.class).getPropertyDescriptors()) {
      if (p.getWriteMethod() != null) {
        into.add(
            prefix
                + "."
                + p.getName().replaceAll("([a-z0-9])([A-Z])", "$1-$2").toLowerCase(Locale.ROOT));
      }
    }
  }
}
