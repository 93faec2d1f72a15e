/**
 * The HTTP {@code Idempotency-Key} filter on any key store. Only {@code io.idem.http} is exported;
 * its problem pages are resources of that package, which the filter serves itself. Servlet 6.0's
 * API jar is a real module ({@code jakarta.servlet}), and the filter's API names its types, as it
 * names the key API's, so a reader of this module reads both.
 */
module io.idem.http {
  requires transitive io.idem.keys;
  requires transitive jakarta.servlet;

  exports io.idem.http;
}
