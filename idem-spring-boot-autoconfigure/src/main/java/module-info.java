/**
 * The Spring Boot auto-configuration of the Idempotency-Key filter. Its one package, {@code
 * io.idem.spring}, is API ({@code @Idempotent}, {@code @IdempotencyKey}, the properties) and is
 * opened to Spring, which reads the configuration classes and their annotations reflectively. The
 * Redis and PostgreSQL stores are optional: their beans exist only when the application has them.
 */
// requires-automatic: Spring's jars ship no module-info, only an Automatic-Module-Name, and the
// auto-configuration cannot do without them; javac's warning about each such requires would fail
// the build under -Werror.
@SuppressWarnings({"requires-automatic", "requires-transitive-automatic"})
module io.idem.spring {
  requires transitive io.idem.http;
  requires transitive io.idem.keys;
  requires static io.idem.keys.idem;
  requires static io.idem.keys.redis;
  requires static io.idem.keys.postgres;
  requires static java.sql;
  requires spring.beans;
  requires transitive spring.boot;
  requires spring.boot.autoconfigure;
  requires static spring.boot.servlet;
  requires spring.context;
  requires spring.core;
  requires spring.web;
  requires static spring.webmvc;
  requires static spring.boot.webmvc;

  exports io.idem.spring;

  opens io.idem.spring to
      spring.core,
      spring.beans,
      spring.context;
}
