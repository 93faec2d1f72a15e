package io.idem.keys;

import io.idem.keys.contract.KeyStoreContract;
import io.idem.keys.spi.KeyStore;

/**
 * The store contract against the reference: idem-core's {@code KeyTable} in this JVM on the wall
 * clock. A case that fails here is a wrong case, not a wrong store.
 */
class CoreKeyStoreContractTest extends KeyStoreContract {
  private final CoreKeyStore store = new CoreKeyStore(System::currentTimeMillis);
  private final CoreKeyStore lost = new CoreKeyStore(System::currentTimeMillis);

  CoreKeyStoreContractTest() {
    lost.failing.set(true);
  }

  @Override
  protected KeyStore<?> store() {
    return store;
  }

  @Override
  protected KeyStore<?> unreachableStore() {
    return lost;
  }
}
