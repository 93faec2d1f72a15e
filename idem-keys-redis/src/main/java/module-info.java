/**
 * The key store on Redis ({@code io.idem.keys.redis.RedisKeyStore}), with Lettuce. Only {@code
 * io.idem.keys.redis} is exported; its script, batcher and codec are package-private in it.
 */
// requires-automatic, requires-transitive-automatic: Lettuce ships no module-info, only the
// Automatic-Module-Name lettuce.core, and the builder's API names its RedisClient and RedisURI, so
// a reader of this module must read it too; javac's warnings about that requires would fail the
// build under -Werror.
@SuppressWarnings({"requires-automatic", "requires-transitive-automatic"})
module io.idem.keys.redis {
  requires transitive io.idem.keys;
  requires transitive lettuce.core;

  exports io.idem.keys.redis;
}
