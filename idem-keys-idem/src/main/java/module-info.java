/**
 * The key store on Idem itself ({@code io.idem.keys.idem.IdemKeyStore}), over an {@code
 * IdemClient}. Both modules it reads are named in its API (a store of {@code KeyStore<Write>} built
 * over an {@code IdemClient}), so a reader of this module reads them too.
 */
module io.idem.keys.idem {
  requires transitive io.idem.keys;
  requires transitive io.idem.client;

  exports io.idem.keys.idem;
}
