package io.idem.client;

/**
 * A write to apply in the same step as a key's completion ({@link IdemClient#completeKey(String,
 * String, long, byte[], Write)}): the business step's write and its confirmation then land together
 * or not at all, so a crash between them cannot leave a write without its completion, for a second
 * owner to repeat.
 */
public sealed interface Write {

  /** Writes {@code value} at {@code key}. */
  static Write put(String key, byte[] value) {
    return new Put(key, value.clone());
  }

  /** Deletes {@code key}. */
  static Write delete(String key) {
    return new Delete(key);
  }

  /** Writes {@code value} if the key's version is {@code expectedVersion} (0: absent). */
  static Write compareAndSet(String key, long expectedVersion, byte[] value) {
    return new CompareAndSet(key, expectedVersion, value.clone());
  }

  /** Adds {@code delta} to the counter at {@code key}. */
  static Write increment(String key, long delta) {
    return new Increment(key, delta);
  }

  /** Appends {@code value} to the list at {@code key}. */
  static Write append(String key, byte[] value) {
    return new Append(key, value.clone());
  }

  /** See {@link #put}. */
  record Put(String key, byte[] value) implements Write {}

  /** See {@link #delete}. */
  record Delete(String key) implements Write {}

  /** See {@link #compareAndSet}. */
  record CompareAndSet(String key, long expectedVersion, byte[] value) implements Write {}

  /** See {@link #increment}. */
  record Increment(String key, long delta) implements Write {}

  /** See {@link #append}. */
  record Append(String key, byte[] value) implements Write {}
}
