package io.idem.cli;

import java.time.Duration;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.TypeConversionException;

/**
 * Parses {@code 500ms}, {@code 5s}, {@code 2m}, {@code 24h}: a positive duration. Public for the
 * lab's commands.
 */
public class DurationConverter implements ITypeConverter<Duration> {
  @Override
  public Duration convert(String value) {
    Duration d = parse(value);
    if (d.isZero() || d.isNegative()) {
      throw new TypeConversionException("'" + value + "' must be positive");
    }
    return d;
  }

  /** The same, zero allowed ({@code 0s}). */
  public static final class OrZero extends DurationConverter {
    @Override
    public Duration convert(String value) {
      Duration d = parse(value);
      if (d.isNegative()) {
        throw new TypeConversionException("'" + value + "' must not be negative");
      }
      return d;
    }
  }

  private static Duration parse(String value) {
    String v = value.trim().toLowerCase(java.util.Locale.ROOT);
    Duration d = null;
    try {
      if (v.endsWith("ms")) {
        d = Duration.ofMillis(Long.parseLong(v.substring(0, v.length() - 2)));
      } else if (v.endsWith("s")) {
        d = Duration.ofSeconds(Long.parseLong(v.substring(0, v.length() - 1)));
      } else if (v.endsWith("m")) {
        d = Duration.ofMinutes(Long.parseLong(v.substring(0, v.length() - 1)));
      } else if (v.endsWith("h")) {
        d = Duration.ofHours(Long.parseLong(v.substring(0, v.length() - 1)));
      }
    } catch (NumberFormatException e) {
      // the message below
    }
    if (d == null) {
      throw new TypeConversionException(
          "'" + value + "' is not a duration like 500ms, 5s, 2m or 24h");
    }
    return d;
  }
}
