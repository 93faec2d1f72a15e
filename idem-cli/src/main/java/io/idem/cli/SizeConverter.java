package io.idem.cli;

import java.util.Locale;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.TypeConversionException;

/**
 * Parses a size in bytes: {@code 2000}, {@code 64KiB}, {@code 2MiB}. The sign is kept, so that the
 * server, not the command line, says which values are out of range.
 */
final class SizeConverter implements ITypeConverter<Integer> {
  @Override
  public Integer convert(String value) {
    String v = value.trim().toLowerCase(Locale.ROOT);
    long unit = 1;
    if (v.endsWith("kib")) {
      unit = 1L << 10;
    } else if (v.endsWith("mib")) {
      unit = 1L << 20;
    }
    String digits = unit == 1 ? v : v.substring(0, v.length() - 3);
    try {
      return Math.toIntExact(Math.multiplyExact(Long.parseLong(digits), unit));
    } catch (NumberFormatException | ArithmeticException e) {
      throw new TypeConversionException("'" + value + "' is not a size like 2000, 64KiB or 2MiB");
    }
  }
}
