package io.idem.spring;

import io.idem.client.IdemClient;
import io.idem.client.Write;
import io.idem.http.IdempotencyFilter;
import io.idem.keys.idem.IdemKeyStore;
import io.idem.keys.spi.KeyStore;
import jakarta.servlet.DispatcherType;
import java.util.List;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.web.method.support.HandlerMethodArgumentResolver;
import org.springframework.web.servlet.DispatcherServlet;
import org.springframework.web.servlet.config.annotation.WebMvcConfigurer;
import org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerMapping;

/**
 * Auto-configuration of the {@code Idempotency-Key} filter in a Spring MVC application: a key store
 * bean (unless the application has one), the filter with {@code idem.keys.*} settings and each
 * endpoint's {@link Idempotent} policy, and the {@link IdempotencyKey} and {@code
 * IdempotentRequest} handler arguments. Every bean backs off when the application defines its own.
 *
 * <p>Stores, whichever is configured: the Idem store when idem-keys-idem is on the class path and
 * {@code idem.keys.servers} is set (or the application has an {@code IdemClient} bean); the Redis
 * store with idem-keys-redis and {@code idem.keys.redis.uri}; the PostgreSQL store with
 * idem-keys-postgres, {@code idem.keys.postgres.enabled=true} and the application's DataSource.
 */
@AutoConfiguration(
    afterName = "org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration")
@ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
@ConditionalOnClass({IdempotencyFilter.class, DispatcherServlet.class})
@ConditionalOnProperty(prefix = "idem.keys", name = "enabled", matchIfMissing = true)
@EnableConfigurationProperties(IdemKeysProperties.class)
public class IdemKeysAutoConfiguration {

  /*
   * The stores: Idem (idem.keys.servers, or an IdemClient bean), Redis (idem.keys.redis.uri) and
   * PostgreSQL (idem.keys.postgres.enabled=true, over the application's DataSource), each when its
   * module is on the class path (optional dependencies of this one). Configure one; with several,
   * the application names its own KeyStore bean, and every one of these backs off.
   */

  /** The Redis store, when idem-keys-redis is present and {@code idem.keys.redis.uri} is set. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "io.idem.keys.redis.RedisKeyStore")
  @ConditionalOnProperty(prefix = "idem.keys.redis", name = "uri")
  static class RedisStoreConfiguration {

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean(KeyStore.class)
    io.idem.keys.redis.RedisKeyStore redisKeyStore(IdemKeysProperties properties) {
      return io.idem.keys.redis.RedisKeyStore.builder()
          .uri(properties.getRedis().getUri())
          .prefix(properties.getRedis().getPrefix())
          .build();
    }
  }

  /**
   * The PostgreSQL store over the application's DataSource, when idem-keys-postgres is present and
   * {@code idem.keys.postgres.enabled=true}; it migrates the schema at startup unless told not to.
   */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "io.idem.keys.postgres.PostgresKeyStore")
  @ConditionalOnProperty(prefix = "idem.keys.postgres", name = "enabled", havingValue = "true")
  static class PostgresStoreConfiguration {

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean(KeyStore.class)
    io.idem.keys.postgres.PostgresKeyStore postgresKeyStore(
        javax.sql.DataSource dataSource, IdemKeysProperties properties) {
      io.idem.keys.postgres.PostgresKeyStore store =
          io.idem.keys.postgres.PostgresKeyStore.builder(dataSource).build();
      if (properties.getPostgres().isMigrate()) {
        store.migrate();
      }
      return store;
    }
  }

  /** The Idem store, when idem-keys-idem is present. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass({IdemClient.class, IdemKeyStore.class})
  static class IdemStoreConfiguration {

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    @ConditionalOnProperty(prefix = "idem.keys", name = "servers")
    IdemClient idemKeysClient(IdemKeysProperties properties) {
      return IdemClient.builder().servers(properties.getServers()).build();
    }

    @Bean
    @ConditionalOnMissingBean(KeyStore.class)
    @ConditionalOnBean(IdemClient.class)
    KeyStore<Write> idemKeyStore(IdemClient client) {
      return IdemKeyStore.over(client);
    }
  }

  @Bean(destroyMethod = "close")
  @ConditionalOnMissingBean
  @ConditionalOnBean(KeyStore.class)
  IdempotencyFilter idempotencyFilter(
      KeyStore<?> store,
      IdemKeysProperties properties,
      ObjectProvider<RequestMappingHandlerMapping> mappings) {
    return IdempotencyFilter.builder(store)
        .methods(properties.getMethods())
        .policyResolver(new HandlerPolicies(mappings, properties))
        .scopeHeader(properties.getScopeHeader())
        .anonymousScope(properties.getAnonymousScope())
        .replayedHeaders(properties.getReplayedHeaders())
        .maxBodyBytes(Math.toIntExact(properties.getMaxBodySize().toBytes()))
        .maxResponseBytes(Math.toIntExact(properties.getMaxResponseSize().toBytes()))
        .inProgressTimeout(properties.getInProgressTimeout())
        .retention(properties.getRetention())
        .storeTimeout(properties.getStoreTimeout())
        .problemTypes(properties.getProblemTypes().toFilterSetting())
        .build();
  }

  @Bean
  @ConditionalOnBean(IdempotencyFilter.class)
  @ConditionalOnMissingBean(name = "idempotencyFilterRegistration")
  FilterRegistrationBean<IdempotencyFilter> idempotencyFilterRegistration(
      IdempotencyFilter filter, IdemKeysProperties properties) {
    FilterRegistrationBean<IdempotencyFilter> registration = new FilterRegistrationBean<>(filter);
    registration.setOrder(properties.getFilterOrder());
    // A waiting duplicate holds its thread; an async handler would leave nothing to store.
    registration.setAsyncSupported(false);
    registration.setDispatcherTypes(DispatcherType.REQUEST);
    return registration;
  }

  @Bean
  WebMvcConfigurer idempotencyArguments() {
    return new WebMvcConfigurer() {
      @Override
      public void addArgumentResolvers(List<HandlerMethodArgumentResolver> resolvers) {
        resolvers.add(new IdempotencyArguments());
      }
    };
  }
}
