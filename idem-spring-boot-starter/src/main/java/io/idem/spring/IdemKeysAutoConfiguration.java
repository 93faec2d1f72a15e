package io.idem.spring;

import io.idem.client.IdemClient;
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
 * <p>Stores, whichever is present: the Idem store when idem-keys-idem is on the class path and
 * {@code idem.keys.servers} is set (or the application has an {@code IdemClient} bean).
 */
@AutoConfiguration
@ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
@ConditionalOnClass({IdempotencyFilter.class, DispatcherServlet.class})
@ConditionalOnProperty(prefix = "idem.keys", name = "enabled", matchIfMissing = true)
@EnableConfigurationProperties(IdemKeysProperties.class)
public class IdemKeysAutoConfiguration {

  /*
   * Where the other stores go (issue 13, modules idem-keys-redis and idem-keys-postgres): one
   * nested configuration each, beside IdemStoreConfiguration below, of the same shape:
   *
   *   @Configuration(proxyBeanMethods = false)
   *   @ConditionalOnClass(RedisKeyStore.class)            // or PostgresKeyStore.class
   *   @ConditionalOnBean(<its client: a Lettuce connection / a DataSource>)
   *   static class RedisStoreConfiguration {
   *     @Bean @ConditionalOnMissingBean(KeyStore.class)
   *     KeyStore redisKeyStore(...) { return RedisKeyStore.over(...); }
   *   }
   *
   * with each store module an <optional> dependency of this one (as idem-keys-idem is), its
   * properties under idem.keys.redis.* / idem.keys.postgres.*, and a test that starts the
   * application with that store. The first KeyStore bean wins (@ConditionalOnMissingBean), so
   * with several stores present the application names one with its own KeyStore bean.
   */

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
    KeyStore idemKeyStore(IdemClient client) {
      return IdemKeyStore.over(client);
    }
  }

  @Bean(destroyMethod = "close")
  @ConditionalOnMissingBean
  @ConditionalOnBean(KeyStore.class)
  IdempotencyFilter idempotencyFilter(
      KeyStore store,
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
