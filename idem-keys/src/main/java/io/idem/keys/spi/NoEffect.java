package io.idem.keys.spi;

/**
 * The effect type of a store that applies no effect with a completion ({@code KeyStore<NoEffect>}):
 * it has no instances, so an operation over such a store cannot hand one back.
 */
public final class NoEffect {
  private NoEffect() {}
}
