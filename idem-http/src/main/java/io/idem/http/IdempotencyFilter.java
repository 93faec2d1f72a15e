package io.idem.http;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.IdempotentExecutor;
import io.idem.keys.KeyFencedException;
import io.idem.keys.KeyInProgressException;
import io.idem.keys.KeyMismatchException;
import io.idem.keys.KeyStoreException;
import io.idem.keys.KeyStoreFullException;
import io.idem.keys.spi.KeyStore;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.security.Principal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * The HTTP {@code Idempotency-Key} filter (draft-ietf-httpapi-idempotency-key-header-07) on any key
 * store: a retried {@code POST} runs once and every retry gets the first response again, with
 * {@code Idempotent-Replayed: true}.
 *
 * <p>For a request whose method is covered (POST and PATCH by default) and whose endpoint has a
 * policy, in this order:
 *
 * <ol>
 *   <li>No {@code Idempotency-Key}: 400 if the policy requires one, else the request runs as if
 *       there were no filter. A key that is not an RFC 8941 string of 1 to 255 characters: 400.
 *   <li>The key's scope is the caller: the request's principal, else the configured scope header,
 *       else the configured anonymous scope; with none of them, 400 (never a global key space). The
 *       scope is {@code principal:}, {@code header:} or {@code anonymous:}, then {@code v:} and the
 *       name as it is, or {@code h:} and the hex SHA-256 of the name if that would not fit 255
 *       characters (or the name has an unpaired surrogate). No name a caller sends can spell
 *       another caller's scope, whatever its length or content ({@code CallerScope} gives the
 *       argument). A key is found only under the scope string it was stored with: a filter that
 *       writes scopes otherwise does not see this one's keys, and their retries run again.
 *   <li>A {@code Content-Type} whose charset is not a legal charset name or not known to the JVM:
 *       415, before the body is read or any key taken.
 *   <li>A body longer than the bound: 413. The fingerprint is the SHA-256 of the method, the
 *       request target (path and query) and the body's SHA-256.
 *   <li>The store decides: a key used with another fingerprint, 422; a key still in progress, 409
 *       (with {@code Retry-After}) or, if the policy waits, the first request's response once it is
 *       stored; a completed key, its stored response replayed; else this request owns the key and
 *       runs.
 *   <li>The handler's response is held (up to a bound) and stored with its status and chosen
 *       headers before it is sent. A 5xx releases the key unless the policy stores server errors;
 *       an exception releases it too. A response too large to store is sent, and its replays get a
 *       409 problem ({@code response-not-stored}).
 * </ol>
 *
 * <p>Errors are RFC 9457 problems ({@code application/problem+json}) whose {@code type} links to a
 * page documenting that problem ({@link ProblemTypes}: by default, pages this filter serves at
 * {@value ProblemTypes#DEFAULT_PATH}); a store that fails or does not answer gives 503 (retrying
 * with the same key is safe). The store enforces retention: a key is replayed for {@link
 * Builder#retention} after its completion (the Idem store caps it at 7 days), then forgotten.
 * Waiting duplicates hold their server thread (bounded by the policy); asynchronous servlets are
 * not supported under this filter.
 *
 * <p>Thread-safe. {@link #destroy()} (or {@link #close()}) stops its renewal thread; the store is
 * the caller's.
 */
public final class IdempotencyFilter implements Filter, AutoCloseable {

  /** The response header on replays (the draft's, as Stripe sends it). */
  public static final String REPLAYED_HEADER = "Idempotent-Replayed";

  /** Default {@link Builder#methods}. */
  public static final List<String> DEFAULT_METHODS = List.of("POST", "PATCH");

  /** Default {@link Builder#replayedHeaders}. */
  public static final List<String> DEFAULT_REPLAYED_HEADERS =
      List.of(
          "Content-Type",
          "Content-Language",
          "Content-Location",
          "Location",
          "ETag",
          "Last-Modified",
          "Cache-Control");

  /** Default {@link Builder#maxBodyBytes}: 1 MiB. */
  public static final int DEFAULT_MAX_BODY_BYTES = 1 << 20;

  /**
   * Default {@link Builder#maxResponseBytes}: 60 KiB of stored record (status, headers, body),
   * under the Idem store's 64 KiB per response.
   */
  public static final int DEFAULT_MAX_RESPONSE_BYTES = 60 << 10;

  /** Default {@link Builder#inProgressTimeout}: the executor's, 30 s. */
  public static final Duration DEFAULT_IN_PROGRESS_TIMEOUT =
      IdempotentExecutor.DEFAULT_IN_PROGRESS_TIMEOUT;

  /** Default {@link Builder#retention}: the executor's, 24 h. */
  public static final Duration DEFAULT_RETENTION = IdempotentExecutor.DEFAULT_RETENTION;

  /** Which policy a request's endpoint has; null if the filter should not touch it. */
  @FunctionalInterface
  public interface PolicyResolver {
    /** The policy for {@code request} (its method is already known to be covered), or null. */
    IdempotencyPolicy policyFor(HttpServletRequest request);
  }

  private final Execution execution;
  private final Set<String> methods;
  private final PolicyResolver resolver;
  private final @Nullable String scopeHeader;
  private final @Nullable String anonymousScope;
  private final List<String> replayedHeaders;
  private final int maxBodyBytes;
  private final int maxResponseBytes;
  private final ProblemTypes problemTypes;

  private IdempotencyFilter(Builder b) {
    this.execution =
        b.store != null
            ? new Execution.OverStore(b.store, b.inProgressTimeout, b.retention, b.storeTimeout)
            : new Execution.InTransaction(
                Objects.requireNonNull(b.transactional, "a store or transactional keys"));
    this.methods = Set.copyOf(b.methods);
    IdempotencyPolicy policy = b.policy;
    this.resolver = b.resolver != null ? b.resolver : request -> policy;
    this.scopeHeader = b.scopeHeader;
    this.anonymousScope = b.anonymousScope;
    this.replayedHeaders = List.copyOf(b.replayedHeaders);
    this.maxBodyBytes = b.maxBodyBytes;
    this.maxResponseBytes = b.maxResponseBytes;
    this.problemTypes = b.problemTypes;
  }

  /** A builder over {@code store}. */
  public static Builder builder(KeyStore<?> store) {
    if (store == null) {
      throw new IllegalArgumentException("store must not be null");
    }
    return new Builder(store, null);
  }

  /**
   * A builder over a store that runs each keyed request in its own transaction (PostgreSQL's
   * transactional mode): the handler writes through {@link IdempotentRequest#transaction}, and its
   * writes commit with the stored response. A duplicate waits for the key's lock (the store's
   * bound) instead of getting 409 at once; {@link Builder#inProgressTimeout}, {@link
   * Builder#retention} and {@link Builder#storeTimeout} are the store's settings then, not the
   * filter's, and {@link IdempotentRequest#completeWith} is refused.
   */
  public static Builder builder(TransactionalKeys keys) {
    if (keys == null) {
      throw new IllegalArgumentException("keys must not be null");
    }
    return new Builder(null, keys);
  }

  @Override
  public void doFilter(ServletRequest req, ServletResponse res, FilterChain chain)
      throws IOException, ServletException {
    if (!(req instanceof HttpServletRequest request)
        || !(res instanceof HttpServletResponse response)) {
      chain.doFilter(req, res);
      return;
    }
    if (problemTypes.serve(request, response)) {
      return; // a page of the problems' documentation
    }
    if (!methods.contains(request.getMethod())) {
      chain.doFilter(req, res);
      return;
    }
    IdempotencyPolicy policy = resolver.policyFor(request);
    if (policy == null) {
      chain.doFilter(req, res);
      return;
    }
    String field = KeyHeader.fieldValue(request);
    if (field == null) {
      if (policy.keyRequired()) {
        problem(
            request,
            response,
            ProblemType.KEY_MISSING,
            "this endpoint requires an Idempotency-Key header");
        return;
      }
      chain.doFilter(req, res);
      return;
    }
    String keyText;
    try {
      keyText = KeyHeader.parse(field);
    } catch (KeyHeader.MalformedKeyException e) {
      problem(request, response, ProblemType.KEY_MALFORMED, e.detail());
      return;
    }
    CallerScope caller = caller(request);
    if (caller == null) {
      problem(
          request,
          response,
          ProblemType.SCOPE_MISSING,
          "idempotency keys belong to a caller: authenticate"
              + (scopeHeader == null ? "" : ", or send the " + scopeHeader + " header"));
      return;
    }
    String encoding = request.getCharacterEncoding();
    if (encoding != null && BufferedRequest.charsetOrNull(encoding) == null) {
      problem(
          request,
          response,
          ProblemType.CHARSET_UNSUPPORTED,
          "the charset of the request's Content-Type ("
              + clip(encoding)
              + ") is not a legal charset name or not known here; send the body in UTF-8");
      return;
    }
    byte[] body = BufferedRequest.readBody(request, maxBodyBytes);
    if (body == null) {
      problem(
          request,
          response,
          ProblemType.BODY_TOO_LARGE,
          "a request with an Idempotency-Key may carry at most " + maxBodyBytes + " bytes");
      return;
    }
    BufferedRequest buffered = new BufferedRequest(request, body);
    run(
        buffered,
        response,
        chain,
        policy,
        new IdempotencyKey(caller.encoded(), keyText),
        buffered.fingerprint());
  }

  private void run(
      BufferedRequest request,
      HttpServletResponse response,
      FilterChain chain,
      IdempotencyPolicy policy,
      IdempotencyKey key,
      Fingerprint fingerprint)
      throws IOException, ServletException {
    CapturingResponse[] ran = new CapturingResponse[1];
    IdempotentRequest[] handled = new IdempotentRequest[1]; // set once the handler has returned
    StoredResponse outcome;
    try {
      outcome =
          execution.run(
              key,
              fingerprint,
              policy.waitForResult(),
              context -> {
                request.setAttribute(IdempotentRequest.ATTRIBUTE, context);
                CapturingResponse captured =
                    new CapturingResponse(response, maxResponseBytes, request, problemTypes);
                ran[0] = captured;
                chain.doFilter(request, captured);
                StoredResponse stored = captured.toStored(replayedHeaders);
                handled[0] = context;
                if (captured.getStatus() >= 500 && !policy.storeServerErrors()) {
                  throw new ReleasedResponse(); // releases the key, or rolls the writes back
                }
                return stored;
              });
    } catch (ReleasedResponse released) {
      ran[0].sendCaptured(); // the key is released: a retry runs again
      return;
    } catch (KeyMismatchException e) {
      problem(
          request,
          response,
          ProblemType.KEY_REUSED,
          "this key was used with another request (method, target or body); use a new key");
      return;
    } catch (KeyInProgressException e) {
      problem(
          request,
          response,
          ProblemType.KEY_IN_PROGRESS,
          "a request with this key is still being processed; retry later for its response",
          retryAfterSeconds(e.retryAfter()));
      return;
    } catch (KeyFencedException e) {
      if (e.completedByAnother()) {
        // This run's outcome was not stored; another request with the key completed it, and its
        // response is what every retry gets. Send that one, as a replay.
        if (!response.isCommitted()) {
          e.otherOutcome(StoredResponse.CODEC).replayTo(response);
        }
        return;
      }
      problem(
          request,
          response,
          ProblemType.KEY_TAKEN_OVER,
          "this request ran past its deadline and another request with the key took it over;"
              + " this one's outcome was not stored: retry for the stored response");
      return;
    } catch (KeyStoreFullException e) {
      if (e.quota()) {
        problem(
            request,
            response,
            ProblemType.KEY_QUOTA_EXCEEDED,
            "the service holds as many idempotency keys as its quota allows; nothing ran: retry"
                + " with the same key once older keys expire");
      } else {
        problem(
            request,
            response,
            ProblemType.STORE_FULL,
            "the key store is out of space; nothing ran: retry with the same key later");
      }
      return;
    } catch (KeyStoreException e) {
      problem(
          request,
          response,
          ProblemType.STORE_UNAVAILABLE,
          "the key store did not answer; the outcome is unknown and retrying with the same key is"
              + " safe");
      return;
    } catch (Exception e) {
      if (handled[0] != null && handled[0].effect() != null && !response.isCommitted()) {
        // The store refused the handler's effect: nothing was applied and the key is released.
        problem(
            request,
            response,
            ProblemType.EFFECT_REFUSED,
            "the store refused this request's write ("
                + e.getMessage()
                + "); nothing was applied: retry with the same key");
        return;
      }
      if (e instanceof IOException io) {
        throw io;
      }
      if (e instanceof ServletException se) {
        throw se;
      }
      if (e instanceof RuntimeException re) {
        throw re;
      }
      throw new ServletException(e);
    }
    if (outcome.replayed()) {
      outcome.replayTo(response);
    } else {
      ran[0].sendCaptured();
    }
  }

  /**
   * The scope this filter keeps {@code request}'s caller's keys under (docs/HTTP.md, Scopes), as a
   * key store holds it; empty if the request names no caller. For an application that reads its
   * callers' keys back (the payments example's withdrawal resource).
   */
  public Optional<String> scopeOf(HttpServletRequest request) {
    return Optional.ofNullable(caller(request)).map(CallerScope::encoded);
  }

  /**
   * The key's caller: the principal, else the scope header, else the anonymous scope, else null.
   */
  private @Nullable CallerScope caller(HttpServletRequest request) {
    Principal p = request.getUserPrincipal();
    if (p != null && p.getName() != null && !p.getName().isEmpty()) {
      return new CallerScope(CallerScope.Source.PRINCIPAL, p.getName());
    }
    if (scopeHeader != null) {
      String v = request.getHeader(scopeHeader);
      if (v != null && !v.isBlank()) {
        return new CallerScope(CallerScope.Source.HEADER, v.strip());
      }
    }
    return anonymousScope == null
        ? null
        : new CallerScope(CallerScope.Source.ANONYMOUS, anonymousScope);
  }

  /** {@code s}, cut to 64 characters for a problem's detail. */
  private static String clip(String s) {
    return s.length() <= 64 ? s : s.substring(0, 64) + "...";
  }

  private void problem(
      HttpServletRequest request, HttpServletResponse response, ProblemType type, String detail)
      throws IOException {
    problem(request, response, type, detail, 1);
  }

  /**
   * The problem as the whole response, with {@code Retry-After: retryAfterSeconds} if its type says
   * to retry later.
   */
  private void problem(
      HttpServletRequest request,
      HttpServletResponse response,
      ProblemType type,
      String detail,
      long retryAfterSeconds)
      throws IOException {
    if (response.isCommitted()) {
      // Only a response too large to hold went out before its outcome was settled: the client
      // has it whole, and the key's fate (stored, or taken over) decides what a retry gets.
      return;
    }
    new Problem(type, detail)
        .send(
            response,
            problemTypes.uri(request, type),
            request.getRequestURI(),
            type.retryLater() ? retryAfterSeconds : 0);
  }

  /**
   * The whole seconds until an owner's deadline passes, at least 1: by then a retry gets the
   * response, or runs.
   */
  private static long retryAfterSeconds(Duration untilDeadline) {
    long ms = untilDeadline.toMillis();
    return Math.max(1, (ms + 999) / 1000);
  }

  /** A 5xx the policy does not store: the executor releases the key, the filter sends it. */
  private static final class ReleasedResponse extends Exception {
    private static final long serialVersionUID = 1L;

    ReleasedResponse() {
      super(null, null, false, false);
    }
  }

  /** Stops the executor's renewal thread. */
  @Override
  public void destroy() {
    close();
  }

  @Override
  public void close() {
    execution.close();
  }

  /** Builds an {@link IdempotencyFilter}. Not thread-safe. */
  public static final class Builder {
    private final @Nullable KeyStore<?> store;
    private final @Nullable TransactionalKeys transactional;
    private final Set<String> methods = new LinkedHashSet<>(DEFAULT_METHODS);
    private IdempotencyPolicy policy = IdempotencyPolicy.DEFAULTS;
    private @Nullable PolicyResolver resolver;
    private @Nullable String scopeHeader;
    private @Nullable String anonymousScope;
    private final List<String> replayedHeaders = new ArrayList<>(DEFAULT_REPLAYED_HEADERS);
    private int maxBodyBytes = DEFAULT_MAX_BODY_BYTES;
    private int maxResponseBytes = DEFAULT_MAX_RESPONSE_BYTES;
    private Duration inProgressTimeout = DEFAULT_IN_PROGRESS_TIMEOUT;
    private Duration retention = DEFAULT_RETENTION;
    private @Nullable Duration storeTimeout;
    private ProblemTypes problemTypes = ProblemTypes.defaults();

    private Builder(@Nullable KeyStore<?> store, @Nullable TransactionalKeys transactional) {
      this.store = store;
      this.transactional = transactional;
    }

    /** The HTTP methods covered (upper case). Default POST and PATCH. */
    public Builder methods(Collection<String> methods) {
      if (methods == null || methods.isEmpty()) {
        throw new IllegalArgumentException("methods must name at least one method, got " + methods);
      }
      this.methods.clear();
      for (String m : methods) {
        if (m == null || m.isBlank()) {
          throw new IllegalArgumentException("a method must not be blank, got " + methods);
        }
        this.methods.add(m.strip().toUpperCase(Locale.ROOT));
      }
      return this;
    }

    /** The policy of every covered request, unless a {@link #policyResolver} is set. */
    public Builder policy(IdempotencyPolicy policy) {
      if (policy == null) {
        throw new IllegalArgumentException("policy must not be null");
      }
      this.policy = policy;
      return this;
    }

    /** Each endpoint's policy (null: not covered); replaces {@link #policy}. */
    public Builder policyResolver(PolicyResolver resolver) {
      this.resolver = resolver;
      return this;
    }

    /**
     * A request header that names the caller when there is no principal (an API key, or a user id
     * that a trusted gateway sets). Keys are never shared between callers. Default none.
     */
    public Builder scopeHeader(String header) {
      this.scopeHeader = header == null || header.isBlank() ? null : header.strip();
      return this;
    }

    /**
     * The scope of requests with neither a principal nor the scope header, for a service whose
     * callers are not told apart; stored as {@code anonymous:v:} + scope, apart from every named
     * caller's. Default none: such requests get 400.
     */
    public Builder anonymousScope(String scope) {
      if (scope != null && scope.length() > IdempotencyKey.MAX_CHARS) {
        throw new IllegalArgumentException(
            "anonymousScope must have at most " + IdempotencyKey.MAX_CHARS + " characters");
      }
      this.anonymousScope = scope;
      return this;
    }

    /** The response headers stored and replayed with status and body. */
    public Builder replayedHeaders(Collection<String> headers) {
      this.replayedHeaders.clear();
      this.replayedHeaders.addAll(headers);
      return this;
    }

    /** Longest request body of a request with a key; longer gets 413. Default 1 MiB. */
    public Builder maxBodyBytes(int bytes) {
      if (bytes < 0) {
        throw new IllegalArgumentException("maxBodyBytes must be >= 0, got " + bytes);
      }
      this.maxBodyBytes = bytes;
      return this;
    }

    /**
     * Longest stored response (status, headers, body as stored); must fit the store's bound (Idem:
     * 64 KiB). Default 60 KiB.
     */
    public Builder maxResponseBytes(int bytes) {
      if (bytes < 1024) {
        throw new IllegalArgumentException("maxResponseBytes must be >= 1024, got " + bytes);
      }
      this.maxResponseBytes = bytes;
      return this;
    }

    /** How long a request owns its key without renewing it (renewed every third). Default 30 s. */
    public Builder inProgressTimeout(Duration d) {
      this.inProgressTimeout = d;
      return this;
    }

    /** How long a completed key is replayed; the store enforces it. Default 24 h. */
    public Builder retention(Duration d) {
      this.retention = d;
      return this;
    }

    /** How long one store call may take before the request gets 503. Default 10 s. */
    public Builder storeTimeout(Duration d) {
      this.storeTimeout = d;
      return this;
    }

    /**
     * Where the problems' {@code "type"} URIs point. Default {@link ProblemTypes#defaults()}: pages
     * this filter serves at {@value ProblemTypes#DEFAULT_PATH} of the application.
     */
    public Builder problemTypes(ProblemTypes types) {
      if (types == null) {
        throw new IllegalArgumentException("problemTypes must not be null");
      }
      this.problemTypes = types;
      return this;
    }

    /** The filter. */
    public IdempotencyFilter build() {
      return new IdempotencyFilter(this);
    }
  }
}
