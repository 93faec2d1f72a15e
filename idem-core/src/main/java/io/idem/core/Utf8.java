package io.idem.core;

/** UTF-8 lengths, for snapshot writers that state a section's length before writing it. */
public final class Utf8 {
  private Utf8() {}

  /**
   * The length of {@code s} in UTF-8 as {@link String#getBytes} encodes it, without encoding it: a
   * lone surrogate becomes one byte ({@code '?'}).
   */
  public static int encodedLength(String s) {
    int n = s.length();
    int bytes = n;
    for (int i = 0; i < n; i++) {
      char c = s.charAt(i);
      if (c < 0x80) {
        continue;
      }
      if (c < 0x800) {
        bytes += 1;
      } else if (!Character.isSurrogate(c)) {
        bytes += 2;
      } else if (Character.isHighSurrogate(c)
          && i + 1 < n
          && Character.isLowSurrogate(s.charAt(i + 1))) {
        bytes += 2; // two chars, four bytes
        i++;
      }
    }
    return bytes;
  }
}
