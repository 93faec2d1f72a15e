package io.idem.cli;

import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.TypeConversionException;

/**
 * Parses a size in bytes: {@code 2000}, {@code 64KiB}, {@code 2MiB}. The sign is kept, so that the
 * server, not the command line, says which values are out of range.
 */
final class SizeConverter implements ITypeConverter<Integer> {
  @Override
  public Integer convert(String value) {
    try {
      return Math.toIntExact(io.idem.server.QuotaFlags.size(value));
    } catch (IllegalArgumentException | ArithmeticException e) {
      throw new TypeConversionException("'" + value + "' is not a size like 2000, 64KiB or 2MiB");
    }
  }
}
