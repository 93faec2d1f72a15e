package io.idem.cli;

import java.time.Duration;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.TypeConversionException;

/** Parses {@code 500ms}, {@code 5s}, {@code 2m}, {@code 24h}. */
final class DurationConverter implements ITypeConverter<Duration> {
  @Override
  public Duration convert(String value) {
    String v = value.trim().toLowerCase(java.util.Locale.ROOT);
    try {
      if (v.endsWith("ms")) {
        return positive(Duration.ofMillis(Long.parseLong(v.substring(0, v.length() - 2))), value);
      }
      if (v.endsWith("s")) {
        return positive(Duration.ofSeconds(Long.parseLong(v.substring(0, v.length() - 1))), value);
      }
      if (v.endsWith("m")) {
        return positive(Duration.ofMinutes(Long.parseLong(v.substring(0, v.length() - 1))), value);
      }
      if (v.endsWith("h")) {
        return positive(Duration.ofHours(Long.parseLong(v.substring(0, v.length() - 1))), value);
      }
    } catch (NumberFormatException e) {
      // fall through to the message below
    }
    throw new TypeConversionException(
        "'" + value + "' is not a duration like 500ms, 5s, 2m or 24h");
  }

  private static Duration positive(Duration d, String value) {
    if (d.isZero() || d.isNegative()) {
      throw new TypeConversionException("'" + value + "' must be positive");
    }
    return d;
  }
}
