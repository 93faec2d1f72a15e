package io.idem.spring;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.http.IdempotencyFilter;
import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.idem.IdemKeyStore;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.KeyStore;
import io.idem.keys.spi.NoEffect;
import io.idem.keys.spi.Settlement;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.mock.web.MockFilterChain;
import org.springframework.mock.web.MockHttpServletRequest;
import org.springframework.mock.web.MockHttpServletResponse;

/**
 * The auto-configuration's conditions, without a server: every bean it makes backs off when the
 * application defines its own, and the filter runs over whichever key store the context holds.
 */
class IdemKeysAutoConfigurationTest {
  /** Nothing listens here: a client is built without connecting, a Redis store is not. */
  static final String NOWHERE = "127.0.0.1:1";

  final WebApplicationContextRunner runner =
      new WebApplicationContextRunner()
          .withConfiguration(AutoConfigurations.of(IdemKeysAutoConfiguration.class));

  /** A store that answers every acquire with a mismatch and records the key it was asked. */
  static final class RecordingStore implements KeyStore<NoEffect> {
    final List<IdempotencyKey> asked = new CopyOnWriteArrayList<>();

    @Override
    public CompletionStage<Acquisition> acquire(
        IdempotencyKey key, Fingerprint fingerprint, Duration timeout, Duration retention) {
      asked.add(key);
      return CompletableFuture.completedFuture(new Acquisition.Mismatch());
    }

    @Override
    public CompletionStage<Settlement> complete(IdempotencyKey key, long token, byte[] response) {
      throw new UnsupportedOperationException();
    }

    @Override
    public CompletionStage<Settlement> release(IdempotencyKey key, long token) {
      throw new UnsupportedOperationException();
    }

    @Override
    public CompletionStage<Settlement> renew(IdempotencyKey key, long token, Duration extension) {
      throw new UnsupportedOperationException();
    }
  }

  /** A POST with key "k1" from caller t9 (header X-Tenant) through {@code filter}. */
  static MockHttpServletResponse postThrough(IdempotencyFilter filter) throws Exception {
    MockHttpServletRequest request = new MockHttpServletRequest("POST", "/anything");
    request.addHeader("Idempotency-Key", "\"k1\"");
    request.addHeader("X-Tenant", "t9");
    request.setContentType("application/json");
    request.setContent("{}".getBytes(StandardCharsets.UTF_8));
    MockHttpServletResponse response = new MockHttpServletResponse();
    filter.doFilter(request, response, new MockFilterChain());
    return response;
  }

  @Test
  void withServersTheStarterMakesTheClientTheIdemStoreAndTheFilter() {
    runner
        .withPropertyValues("idem.keys.servers=" + NOWHERE)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context).hasSingleBean(IdemClient.class).hasBean("idemKeysClient");
              assertThat(context.getBean(KeyStore.class)).isInstanceOf(IdemKeyStore.class);
              assertThat(context).hasSingleBean(IdempotencyFilter.class);
              assertThat(context.getBean("idempotencyFilterRegistration"))
                  .isInstanceOfSatisfying(
                      FilterRegistrationBean.class,
                      r ->
                          assertThat(r.getFilter())
                              .isSameAs(context.getBean(IdempotencyFilter.class)));
            });
  }

  @Test
  void withoutAStoreThereIsNoFilter() {
    runner.run(
        context -> {
          assertThat(context).hasNotFailed();
          assertThat(context).doesNotHaveBean(KeyStore.class);
          assertThat(context).doesNotHaveBean(IdempotencyFilter.class);
          assertThat(context).doesNotHaveBean("idempotencyFilterRegistration");
        });
  }

  @Test
  void aUsersClientReplacesTheStartersAndTheIdemStoreRunsOverIt() {
    IdemClient own = IdemClient.builder().servers(List.of(NOWHERE)).build();
    try {
      runner
          .withPropertyValues("idem.keys.servers=" + NOWHERE)
          .withBean("ownClient", IdemClient.class, () -> own, d -> d.setDestroyMethodName(""))
          .run(
              context -> {
                assertThat(context).hasNotFailed();
                assertThat(context)
                    .hasSingleBean(IdemClient.class)
                    .doesNotHaveBean("idemKeysClient");
                assertThat(context.getBean(IdemClient.class)).isSameAs(own);
                assertThat(context.getBean(KeyStore.class)).isInstanceOf(IdemKeyStore.class);
              });
    } finally {
      own.close();
    }
  }

  @Test
  void aUsersKeyStoreReplacesTheIdemStoreAndTheFilterRunsOverIt() {
    RecordingStore own = new RecordingStore();
    runner
        .withPropertyValues(
            "idem.keys.servers=" + NOWHERE,
            "idem.keys.scope-header=X-Tenant",
            "idem.keys.all-endpoints=true")
        .withBean("ownStore", KeyStore.class, () -> own)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context).hasSingleBean(KeyStore.class);
              assertThat(context.getBean(KeyStore.class)).isSameAs(own);
              MockHttpServletResponse response =
                  postThrough(context.getBean(IdempotencyFilter.class));
              assertThat(response.getStatus()).isEqualTo(422);
              assertThat(own.asked).containsExactly(new IdempotencyKey("header:v:t9", "k1"));
            });
  }

  @Test
  void aUsersKeyStoreReplacesTheRedisStore() {
    WebApplicationContextRunner redis =
        runner.withPropertyValues("idem.keys.redis.uri=redis://" + NOWHERE);
    // The control: without the user's store, the starter's Redis store is made, and cannot connect.
    redis.run(
        context ->
            assertThat(context)
                .hasFailed()
                .getFailure()
                .hasMessageContaining("redisKeyStore")
                .hasRootCauseInstanceOf(java.net.ConnectException.class));
    RecordingStore own = new RecordingStore();
    redis
        .withBean("ownStore", KeyStore.class, () -> own)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context.getBean(KeyStore.class)).isSameAs(own);
              assertThat(context).hasSingleBean(IdempotencyFilter.class);
            });
  }

  @Test
  void aUsersKeyStoreReplacesThePostgresStore() {
    WebApplicationContextRunner postgres =
        runner.withPropertyValues("idem.keys.postgres.enabled=true");
    // The control: without the user's store, the starter's PostgreSQL store is made, and needs a
    // DataSource this context lacks.
    postgres.run(
        context ->
            assertThat(context)
                .hasFailed()
                .getFailure()
                .hasMessageContaining("postgresKeyStore")
                .hasMessageContaining("DataSource"));
    RecordingStore own = new RecordingStore();
    postgres
        .withBean("ownStore", KeyStore.class, () -> own)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context.getBean(KeyStore.class)).isSameAs(own);
              assertThat(context).hasSingleBean(IdempotencyFilter.class);
            });
  }

  @Test
  void aUsersFilterReplacesTheStartersAndIsTheOneRegistered() {
    RecordingStore store = new RecordingStore();
    IdempotencyFilter own = IdempotencyFilter.builder(store).build();
    runner
        .withBean("ownStore", KeyStore.class, () -> store)
        .withBean("ownFilter", IdempotencyFilter.class, () -> own)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context).hasSingleBean(IdempotencyFilter.class);
              assertThat(context.getBean(IdempotencyFilter.class)).isSameAs(own);
              assertThat(context.getBean("idempotencyFilterRegistration"))
                  .isInstanceOfSatisfying(
                      FilterRegistrationBean.class, r -> assertThat(r.getFilter()).isSameAs(own));
            });
  }

  @Test
  void aUsersRegistrationReplacesTheStarters() {
    RecordingStore store = new RecordingStore();
    FilterRegistrationBean<IdempotencyFilter> own = new FilterRegistrationBean<>();
    runner
        .withBean("ownStore", KeyStore.class, () -> store)
        .withBean("idempotencyFilterRegistration", FilterRegistrationBean.class, () -> own)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context.getBean("idempotencyFilterRegistration")).isSameAs(own);
              assertThat(context).hasSingleBean(FilterRegistrationBean.class);
            });
  }
}
