package io.idem.spring;

import io.idem.http.IdempotencyFilter;
import io.idem.http.IdempotencyPolicy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.util.unit.DataSize;

/** The {@code idem.keys.*} properties. Defaults are the filter's own. */
@ConfigurationProperties("idem.keys")
public class IdemKeysProperties {
  /** Whether the filter is configured at all. Default true. */
  private boolean enabled = true;

  /**
   * The Idem cluster's client addresses (host:port). When set and idem-keys-idem is on the class
   * path, the starter makes an {@code IdemClient} and the Idem key store. Default none.
   */
  private List<String> servers = new ArrayList<>();

  /**
   * How long a completed key is replayed; the store enforces it. Default 24h (Idem: at most 7d).
   */
  private Duration retention = IdempotencyFilter.DEFAULT_RETENTION;

  /** How long a request owns its key without renewing it (renewed every third). Default 30s. */
  private Duration inProgressTimeout = IdempotencyFilter.DEFAULT_IN_PROGRESS_TIMEOUT;

  /** How long a duplicate of a request in progress waits for its response; 0 answers 409. */
  private Duration waitForResult = IdempotencyPolicy.DEFAULT_WAIT_FOR_RESULT;

  /** How long one store call may take before the request gets 503. Default 10s. */
  private Duration storeTimeout = Duration.ofSeconds(10);

  /** The HTTP methods covered. Default POST, PATCH. */
  private List<String> methods = new ArrayList<>(IdempotencyFilter.DEFAULT_METHODS);

  /**
   * Whether a request without a key gets 400 (per endpoint: {@code @Idempotent}). Default false.
   */
  private boolean keyRequired = false;

  /** Whether 5xx responses are stored and replayed rather than released. Default false. */
  private boolean storeServerErrors = false;

  /**
   * Whether every request with a covered method is covered, not only {@code @Idempotent} handlers.
   * Default false.
   */
  private boolean allEndpoints = false;

  /** A header naming the caller when there is no principal (an API key, a gateway's user id). */
  private String scopeHeader;

  /** The scope of requests with neither a principal nor the scope header; none: they get 400. */
  private String anonymousScope;

  /** Longest request body of a request with a key; longer gets 413. Default 1MB. */
  private DataSize maxBodySize = DataSize.ofBytes(IdempotencyFilter.DEFAULT_MAX_BODY_BYTES);

  /** Longest stored response (status, headers, body). Default 60KB. */
  private DataSize maxResponseSize = DataSize.ofBytes(IdempotencyFilter.DEFAULT_MAX_RESPONSE_BYTES);

  /** The response headers stored and replayed with status and body. */
  private List<String> replayedHeaders =
      new ArrayList<>(IdempotencyFilter.DEFAULT_REPLAYED_HEADERS);

  /** The filter's order: after authentication (Spring Security's chain is at -100). Default 0. */
  private int filterOrder = 0;

  public boolean isEnabled() {
    return enabled;
  }

  public void setEnabled(boolean enabled) {
    this.enabled = enabled;
  }

  public List<String> getServers() {
    return servers;
  }

  public void setServers(List<String> servers) {
    this.servers = servers;
  }

  public Duration getRetention() {
    return retention;
  }

  public void setRetention(Duration retention) {
    this.retention = retention;
  }

  public Duration getInProgressTimeout() {
    return inProgressTimeout;
  }

  public void setInProgressTimeout(Duration inProgressTimeout) {
    this.inProgressTimeout = inProgressTimeout;
  }

  public Duration getWaitForResult() {
    return waitForResult;
  }

  public void setWaitForResult(Duration waitForResult) {
    this.waitForResult = waitForResult;
  }

  public Duration getStoreTimeout() {
    return storeTimeout;
  }

  public void setStoreTimeout(Duration storeTimeout) {
    this.storeTimeout = storeTimeout;
  }

  public List<String> getMethods() {
    return methods;
  }

  public void setMethods(List<String> methods) {
    this.methods = methods;
  }

  public boolean isKeyRequired() {
    return keyRequired;
  }

  public void setKeyRequired(boolean keyRequired) {
    this.keyRequired = keyRequired;
  }

  public boolean isStoreServerErrors() {
    return storeServerErrors;
  }

  public void setStoreServerErrors(boolean storeServerErrors) {
    this.storeServerErrors = storeServerErrors;
  }

  public boolean isAllEndpoints() {
    return allEndpoints;
  }

  public void setAllEndpoints(boolean allEndpoints) {
    this.allEndpoints = allEndpoints;
  }

  public String getScopeHeader() {
    return scopeHeader;
  }

  public void setScopeHeader(String scopeHeader) {
    this.scopeHeader = scopeHeader;
  }

  public String getAnonymousScope() {
    return anonymousScope;
  }

  public void setAnonymousScope(String anonymousScope) {
    this.anonymousScope = anonymousScope;
  }

  public DataSize getMaxBodySize() {
    return maxBodySize;
  }

  public void setMaxBodySize(DataSize maxBodySize) {
    this.maxBodySize = maxBodySize;
  }

  public DataSize getMaxResponseSize() {
    return maxResponseSize;
  }

  public void setMaxResponseSize(DataSize maxResponseSize) {
    this.maxResponseSize = maxResponseSize;
  }

  public List<String> getReplayedHeaders() {
    return replayedHeaders;
  }

  public void setReplayedHeaders(List<String> replayedHeaders) {
    this.replayedHeaders = replayedHeaders;
  }

  public int getFilterOrder() {
    return filterOrder;
  }

  public void setFilterOrder(int filterOrder) {
    this.filterOrder = filterOrder;
  }

  /** The policy of an endpoint without its own settings. */
  IdempotencyPolicy defaultPolicy() {
    return new IdempotencyPolicy(keyRequired, waitForResult, storeServerErrors);
  }

  private final Redis redis = new Redis();
  private final Postgres postgres = new Postgres();
  private final ProblemTypes problemTypes = new ProblemTypes();

  /** Where the problems' types point ({@code idem.keys.problem-types.*}). */
  public ProblemTypes getProblemTypes() {
    return problemTypes;
  }

  /** The Redis store's settings ({@code idem.keys.redis.*}). */
  public Redis getRedis() {
    return redis;
  }

  /** The PostgreSQL store's settings ({@code idem.keys.postgres.*}). */
  public Postgres getPostgres() {
    return postgres;
  }

  /** {@code idem.keys.redis.*}: the Redis store, when idem-keys-redis is present. */
  public static class Redis {
    /** The server, e.g. {@code redis://127.0.0.1:6379}. When set, the Redis store is the store. */
    private String uri;

    /** The namespace and hash tag of the records. */
    private String prefix = "idem-keys";

    public String getUri() {
      return uri;
    }

    public void setUri(String uri) {
      this.uri = uri;
    }

    public String getPrefix() {
      return prefix;
    }

    public void setPrefix(String prefix) {
      this.prefix = prefix;
    }
  }

  /**
   * {@code idem.keys.problem-types.*}: the {@code type} of the filter's problems links to a page
   * documenting it; by default the filter serves those pages at {@code path}.
   */
  public static class ProblemTypes {
    /**
     * Where the filter serves its pages, under the context path. Default /problems/idempotency/.
     */
    private String path = io.idem.http.ProblemTypes.DEFAULT_PATH;

    /**
     * The operator's own pages: each type is this base followed by the problem's name (e.g. {@code
     * https://docs.example.com/errors/}), and the filter serves none. Default none.
     */
    private String base;

    public String getPath() {
      return path;
    }

    public void setPath(String path) {
      this.path = path;
    }

    public String getBase() {
      return base;
    }

    public void setBase(String base) {
      this.base = base;
    }

    /** The filter's setting: the base if set, else the pages served at the path. */
    io.idem.http.ProblemTypes toFilterSetting() {
      if (base == null || base.isBlank()) {
        return io.idem.http.ProblemTypes.servedAt(path);
      }
      if (!io.idem.http.ProblemTypes.DEFAULT_PATH.equals(path)) {
        throw new IllegalArgumentException(
            "idem.keys.problem-types: set base ("
                + base
                + ") or path ("
                + path
                + "), not both: with a base the filter serves no pages");
      }
      return io.idem.http.ProblemTypes.documentedAt(java.net.URI.create(base.strip()));
    }
  }

  /** {@code idem.keys.postgres.*}: the PostgreSQL store over the application's DataSource. */
  public static class Postgres {
    /** Use the application's DataSource for the key records. */
    private boolean enabled = false;

    /** Create or check the schema (table idem_keys) at startup. */
    private boolean migrate = true;

    public boolean isEnabled() {
      return enabled;
    }

    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }

    public boolean isMigrate() {
      return migrate;
    }

    public void setMigrate(boolean migrate) {
      this.migrate = migrate;
    }
  }
}
