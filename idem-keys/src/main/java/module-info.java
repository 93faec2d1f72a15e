/**
 * Application idempotency keys: the API in {@code io.idem.keys} (the executor, keys, fingerprints,
 * stored outcomes and the sealed {@code KeyException}s) and the store SPI in {@code
 * io.idem.keys.spi}, which the store modules implement. Both are exported; the module needs the JDK
 * only.
 */
module io.idem.keys {
  // @Nullable in the API's signatures: annotations only, not needed at run time.
  requires static transitive org.jspecify;

  exports io.idem.keys;
  exports io.idem.keys.spi;
}
