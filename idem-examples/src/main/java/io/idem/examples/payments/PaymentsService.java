package io.idem.examples.payments;

import io.idem.client.IdemClient;
import io.idem.http.IdempotencyFilter;
import io.idem.http.IdempotencyPolicy;
import io.idem.http.IdempotentRequest;
import io.idem.http.ProblemTypes;
import io.idem.keys.IdempotencyKey;
import io.idem.testkit.LocalCluster;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.http.UriCompliance;
import org.eclipse.jetty.server.HttpConfiguration;
import org.eclipse.jetty.server.HttpConnectionFactory;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.util.thread.QueuedThreadPool;

/**
 * Seed 001's {@code withdraw(id, account, amount)} as an HTTP service: accounts whose balances live
 * on an Idem cluster, and withdrawals whose id is the {@code Idempotency-Key}.
 *
 * <ul>
 *   <li>{@code POST /accounts/{account}/withdrawals} with {@code {"amount": N}}: 201 and the
 *       withdrawal, its {@code Location} the withdrawal's path ({@link Withdrawals#path}: the key
 *       percent-encoded); 404 for an unknown account, 402 for insufficient funds, 400 for a bad
 *       body (problems, RFC 9457, {@link PaymentsProblem}). Under the filter, the debit is handed
 *       to the key store as the completion's effect: it lands in the same replicated command that
 *       stores the response, or not at all. A retry is replayed and debits nothing.
 *   <li>{@code GET /accounts/{account}/withdrawals/{id}}: the withdrawal, which is what the key
 *       store holds for its key (the stored 201), for the same caller; 404 otherwise.
 *   <li>{@code GET /accounts/{account}}: the balance.
 *   <li>{@code POST /plain/accounts/{account}/withdrawals}: the same handler without the filter, on
 *       the same server (the benchmark's baseline): it debits with a plain increment.
 * </ul>
 *
 * <p>With {@code --no-idempotency} the filter is off on {@code /accounts} too: every retry debits
 * again (the negative control). The funds check reads the balance before the debit, which is an
 * increment: concurrent withdrawals from one account can overdraw it by their amounts (a strict
 * check would make the effect a compare-and-set and retry on conflict).
 *
 * <pre>
 * java -cp idem-examples/target/idem-examples.jar io.idem.examples.payments.PaymentsService \
 *     --port 8080     # an embedded 3-node Idem store, deleted when it stops; --servers: a cluster
 * </pre>
 */
public final class PaymentsService implements AutoCloseable {

  /** The key of an account's balance on the store. */
  static String balanceKey(String account) {
    return "balance/" + account;
  }

  /** How the service runs. */
  public record Options(
      int port,
      boolean idempotency,
      Duration inProgressTimeout,
      Duration waitForResult,
      Duration processingDelay) {

    /** Port 0 (any), the filter on, 30 s in-progress timeout, no waiting, no delay. */
    public static Options defaults() {
      return new Options(
          0, true, IdempotencyFilter.DEFAULT_IN_PROGRESS_TIMEOUT, Duration.ZERO, Duration.ZERO);
    }
  }

  private final Server server;
  private final IdempotencyFilter filter;

  private PaymentsService(Server server, IdempotencyFilter filter) {
    this.server = server;
    this.filter = filter;
  }

  /** Starts the service on 127.0.0.1, its balances and keys on {@code client}'s cluster. */
  public static PaymentsService start(IdemClient client, Options options) throws Exception {
    return start(new IdemBalances(client), options);
  }

  /** Starts the service on 127.0.0.1, its balances and keys on {@code balances}' backend. */
  static PaymentsService start(Balances balances, Options options) throws Exception {
    QueuedThreadPool threads = new QueuedThreadPool(256, 16);
    threads.setName("payments-http");
    Server server = new Server(threads);
    // A withdrawal's id is its key, which may hold "/", "%" or be "..": its path escapes them
    // (%2F, %25, %2E%2E), which Jetty refuses by default as ambiguous (the connector with 400, the
    // servlet API with an exception). This service reads its paths raw (Accounts.rawPathInfo) and
    // has no path-based security constraints such paths could slip past, so it lets them through.
    HttpConfiguration http = new HttpConfiguration();
    http.setUriCompliance(
        UriCompliance.DEFAULT.with(
            "payments",
            UriCompliance.AMBIGUOUS_VIOLATIONS.toArray(new UriCompliance.Violation[0])));
    ServerConnector connector = new ServerConnector(server, new HttpConnectionFactory(http));
    connector.setHost("127.0.0.1");
    connector.setPort(options.port());
    connector.setReuseAddress(true);
    server.addConnector(connector);
    ServletContextHandler context = new ServletContextHandler();
    context.getServletHandler().setDecodeAmbiguousURIs(true);
    context.addServlet(new ServletHolder(new PaymentsProblem.Pages()), PaymentsProblem.PATH + "*");
    IdempotencyFilter filter =
        balances
            .filter()
            // The example's callers are not told apart: one scope for all, unless a caller names
            // itself with X-Client-Id. A service with users scopes keys by principal.
            .scopeHeader(Withdrawals.CLIENT_HEADER)
            .anonymousScope(Withdrawals.ANONYMOUS_SCOPE)
            .policy(
                IdempotencyPolicy.builder()
                    .keyRequired(true)
                    .waitForResult(options.waitForResult())
                    .build())
            .inProgressTimeout(options.inProgressTimeout())
            .build();
    Accounts accounts = new Accounts(balances, options.processingDelay(), filter::scopeOf);
    context.addServlet(new ServletHolder(accounts), "/accounts/*");
    context.addServlet(new ServletHolder(accounts), "/plain/accounts/*");
    if (options.idempotency()) {
      FilterHolder holder = new FilterHolder(filter);
      context.addFilter(holder, "/accounts/*", EnumSet.of(DispatcherType.REQUEST));
      // The pages its problems' types point at (ProblemTypes.DEFAULT_PATH).
      context.addFilter(
          holder, ProblemTypes.DEFAULT_PATH + "*", EnumSet.of(DispatcherType.REQUEST));
    }
    server.setHandler(context);
    server.start();
    return new PaymentsService(server, filter);
  }

  /** The port it listens on. */
  public int port() {
    return ((ServerConnector) server.getConnectors()[0]).getLocalPort();
  }

  /** Creates {@code account} with {@code balance} unless it exists. */
  public static void openAccount(IdemClient client, String account, long balance) {
    client.compareAndSet(
        balanceKey(account), 0, Long.toString(balance).getBytes(StandardCharsets.UTF_8));
  }

  /** The balance of {@code account} on the store (a linearizable read). */
  public static Optional<Long> balance(IdemClient client, String account) {
    return client.get(balanceKey(account)).map(kv -> Long.parseLong(kv.valueAsString()));
  }

  /** Stops the server (requests in flight are cut) and the filter's renewals. */
  @Override
  public void close() {
    try {
      server.stop();
    } catch (Exception e) {
      throw new IllegalStateException("the payments service did not stop cleanly", e);
    } finally {
      filter.close();
    }
  }

  /** The accounts resource. */
  static final class Accounts extends HttpServlet {
    private static final long serialVersionUID = 1L;
    private static final Pattern WITHDRAWALS =
        Pattern.compile("^/([A-Za-z0-9_-]{1,64})/withdrawals$");
    private static final Pattern WITHDRAWAL =
        Pattern.compile("^/([A-Za-z0-9_-]{1,64})/withdrawals/([^/]+)$");
    private static final Pattern ACCOUNT = Pattern.compile("^/([A-Za-z0-9_-]{1,64})$");
    private static final Pattern AMOUNT = Pattern.compile("\"amount\"\\s*:\\s*(\\d{1,12})");

    private final transient Balances balances;
    private final Duration processingDelay;
    private final transient Function<HttpServletRequest, Optional<String>> scopes;

    /** {@code scopes}: the filter's scope of a request's caller (its keys' scope). */
    Accounts(
        Balances balances,
        Duration processingDelay,
        Function<HttpServletRequest, Optional<String>> scopes) {
      this.balances = balances;
      this.processingDelay = processingDelay;
      this.scopes = scopes;
    }

    /**
     * The path after the servlet's, as sent (still percent-encoded): a withdrawal's id may hold an
     * escaped "/" or be an escaped "..", which the decoded path would lose.
     */
    private static String rawPathInfo(HttpServletRequest req) {
      return req.getRequestURI()
          .substring(req.getContextPath().length() + req.getServletPath().length());
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
      String path = rawPathInfo(req);
      Matcher w = WITHDRAWAL.matcher(path);
      if (w.matches()) {
        withdrawal(req, resp, w.group(1), w.group(2));
        return;
      }
      Matcher m = ACCOUNT.matcher(path);
      if (!m.matches()) {
        PaymentsProblem.NOT_FOUND.send(
            req, resp, "GET /accounts/{account} or /accounts/{account}/withdrawals/{id}");
        return;
      }
      Optional<Long> balance = balances.balance(Optional.empty(), m.group(1));
      if (balance.isEmpty()) {
        PaymentsProblem.NO_SUCH_ACCOUNT.send(req, resp, "no account " + m.group(1));
        return;
      }
      json(resp, 200, "{\"account\":\"" + m.group(1) + "\",\"balance\":" + balance.get() + "}");
    }

    /** The stored 201 of the withdrawal {@code rawId} from {@code account}, for this caller. */
    private void withdrawal(
        HttpServletRequest req, HttpServletResponse resp, String account, String rawId)
        throws IOException {
      Optional<String> id = Withdrawals.id(rawId);
      Optional<Withdrawals.Stored> stored =
          id.flatMap(i -> scopes.apply(req).map(scope -> new IdempotencyKey(scope, i)))
              .flatMap(balances::storedResponse)
              .flatMap(Withdrawals::decode)
              // Made from this account (the key is the caller's, not the account's).
              .filter(
                  s ->
                      s.status() == 201
                          && Withdrawals.path(account, id.get()).equals(s.location()));
      if (stored.isEmpty()) {
        PaymentsProblem.NO_SUCH_WITHDRAWAL.send(
            req,
            resp,
            "no withdrawal "
                + id.orElse(rawId)
                + " from account "
                + account
                + " is stored for this caller");
        return;
      }
      resp.setStatus(200);
      resp.setContentType("application/json");
      resp.setContentLength(stored.get().body().length);
      resp.getOutputStream().write(stored.get().body());
    }

    @Override
    protected void doPost(HttpServletRequest req, HttpServletResponse resp) throws IOException {
      Matcher m = WITHDRAWALS.matcher(rawPathInfo(req));
      if (!m.matches()) {
        PaymentsProblem.NOT_FOUND.send(req, resp, "POST /accounts/{account}/withdrawals");
        return;
      }
      String account = m.group(1);
      Matcher a =
          AMOUNT.matcher(new String(req.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
      if (!a.find() || Long.parseLong(a.group(1)) < 1) {
        PaymentsProblem.BAD_WITHDRAWAL.send(
            req, resp, "the body must be {\"amount\": N} with N >= 1");
        return;
      }
      long amount = Long.parseLong(a.group(1));
      Optional<IdempotentRequest> keyed = IdempotentRequest.of(req);
      Optional<Long> balance = balances.balance(keyed, account);
      if (balance.isEmpty()) {
        PaymentsProblem.NO_SUCH_ACCOUNT.send(req, resp, "no account " + account);
        return;
      }
      if (balance.get() < amount) {
        PaymentsProblem.INSUFFICIENT_FUNDS.send(
            req,
            resp,
            "the balance of " + account + " is " + balance.get() + ", less than " + amount);
        return;
      }
      pause();
      String id;
      if (keyed.isPresent()) {
        // The debit lands with the stored response or not at all (seed 001's second defect).
        balances.debit(keyed.get(), account, amount);
        id = keyed.get().key().key();
        resp.setHeader("Location", Withdrawals.path(account, id));
      } else {
        balances.debit(account, amount); // the plain endpoint: no key, no withdrawal resource
        id = "none";
      }
      json(
          resp,
          201,
          "{\"withdrawal\":"
              + PaymentsProblem.Json.quote(id)
              + ",\"account\":\""
              + account
              + "\",\"amount\":"
              + amount
              + ",\"status\":\"debited\"}");
    }

    private void pause() {
      if (processingDelay.isZero()) {
        return;
      }
      try {
        new CountDownLatch(1).await(processingDelay.toMillis(), TimeUnit.MILLISECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }

    private static void json(HttpServletResponse resp, int status, String body) throws IOException {
      byte[] b = body.getBytes(StandardCharsets.UTF_8);
      resp.setStatus(status);
      resp.setContentType("application/json");
      resp.setContentLength(b.length);
      resp.getOutputStream().write(b);
    }
  }

  /** The key store, and with it where the balances live. */
  public enum Store {
    /** The Idem store; balances on the same Idem cluster. */
    IDEM,
    /** The Redis store; balances as integers in the same Redis. */
    REDIS,
    /** The PostgreSQL store in its transactional mode; balances as rows of the same database. */
    POSTGRES;

    /**
     * {@code idem}, {@code redis} or {@code postgres}.
     *
     * @throws IllegalArgumentException naming anything else
     */
    public static Store named(String name) {
      return switch (name) {
        case "idem" -> IDEM;
        case "redis" -> REDIS;
        case "postgres" -> POSTGRES;
        default ->
            throw new IllegalArgumentException(
                "--store must be idem, redis or postgres, got " + name);
      };
    }
  }

  /**
   * Runs the service: {@code --port N} (default 8080), {@code --store idem|redis|postgres} (default
   * idem), {@code --no-idempotency}, {@code --in-progress-timeout 30s}, {@code --wait 0s}, {@code
   * --processing-delay 0s}, {@code --accounts alice,bob,carol} opened with {@code --balance
   * 1000000}. The Idem store: {@code --servers host:port,...} (default: an embedded 3-node cluster
   * in a temporary directory, deleted when the service stops, on SIGINT and SIGTERM too: its
   * balances and keys do not outlive the process). Redis: {@code --redis-uri redis://host:port}
   * (required), {@code --redis-prefix payments}. PostgreSQL: {@code --jdbc-url
   * jdbc:postgresql://host:port/db} (required), {@code --jdbc-user postgres}, {@code
   * --jdbc-password ""}, {@code --pool 16}.
   */
  public static void main(String[] args) throws Exception {
    int code = serve(args, new CountDownLatch(1));
    if (code != 0) {
      System.exit(code);
    }
  }

  /** What the command line asked for. */
  private record Command(
      Options options,
      Store store,
      String servers,
      String redisUri,
      String redisPrefix,
      String jdbcUrl,
      String jdbcUser,
      String jdbcPassword,
      int pool,
      List<String> accounts,
      long balance) {

    static Command parse(String[] args) {
      Options o = Options.defaults();
      int port = 8080;
      Store store = Store.IDEM;
      String servers = null;
      String redisUri = null;
      String redisPrefix = "payments";
      String jdbcUrl = null;
      String jdbcUser = "postgres";
      String jdbcPassword = "";
      int pool = PostgresBalances.DEFAULT_POOL;
      boolean idempotency = true;
      Duration inProgress = o.inProgressTimeout();
      Duration wait = o.waitForResult();
      Duration delay = o.processingDelay();
      List<String> accounts = List.of("alice", "bob", "carol");
      long balance = 1_000_000;
      for (int i = 0; i < args.length; i++) {
        String option = args[i];
        if (!option.equals("--no-idempotency") && i + 1 >= args.length) {
          throw new IllegalArgumentException(option + " needs a value");
        }
        switch (option) {
          case "--port" -> port = Integer.parseInt(args[++i]);
          case "--store" -> store = Store.named(args[++i]);
          case "--servers" -> servers = args[++i];
          case "--redis-uri" -> redisUri = args[++i];
          case "--redis-prefix" -> redisPrefix = args[++i];
          case "--jdbc-url" -> jdbcUrl = args[++i];
          case "--jdbc-user" -> jdbcUser = args[++i];
          case "--jdbc-password" -> jdbcPassword = args[++i];
          case "--pool" -> pool = Integer.parseInt(args[++i]);
          case "--no-idempotency" -> idempotency = false;
          case "--in-progress-timeout" -> inProgress = Durations.parse(args[++i]);
          case "--wait" -> wait = Durations.parse(args[++i]);
          case "--processing-delay" -> delay = Durations.parse(args[++i]);
          case "--accounts" -> accounts = List.of(args[++i].split(","));
          case "--balance" -> balance = Long.parseLong(args[++i]);
          default -> throw new IllegalArgumentException("unknown option " + option);
        }
      }
      if (store == Store.REDIS && redisUri == null) {
        throw new IllegalArgumentException("--store redis needs --redis-uri redis://host:port");
      }
      if (store == Store.POSTGRES && jdbcUrl == null) {
        throw new IllegalArgumentException(
            "--store postgres needs --jdbc-url jdbc:postgresql://host:port/database");
      }
      if (store != Store.IDEM && servers != null) {
        throw new IllegalArgumentException("--servers is for --store idem only");
      }
      if (pool < 1) {
        throw new IllegalArgumentException("--pool must be at least 1, got " + pool);
      }
      return new Command(
          new Options(port, idempotency, inProgress, wait, delay),
          store,
          servers,
          redisUri,
          redisPrefix,
          jdbcUrl,
          jdbcUser,
          jdbcPassword,
          pool,
          accounts,
          balance);
    }
  }

  /**
   * {@link #main}'s body (the options as for main), printing to the standard streams: see {@link
   * #serve(String[], CountDownLatch, PrintWriter, PrintWriter)}.
   */
  public static int serve(String[] args, CountDownLatch stop) throws Exception {
    return serve(
        args,
        stop,
        new PrintWriter(System.out, true, Charset.defaultCharset()),
        new PrintWriter(System.err, true, Charset.defaultCharset()));
  }

  /** How long SIGINT or SIGTERM waits for the service to stop and clean up before the JVM exits. */
  static final Duration SHUTDOWN_GRACE = Duration.ofSeconds(20);

  /**
   * Serves until {@code stop} opens or the JVM is told to exit (SIGINT, SIGTERM: a shutdown hook
   * opens {@code stop} and waits, at most {@link #SHUTDOWN_GRACE}, for the server to stop, the
   * store to close and the embedded cluster's temporary folder to be deleted; if that takes longer,
   * the hook deletes the folder itself). Returns 0 once stopped, 2 on bad options, 1 if the store
   * cannot be reached; errors go to {@code err} as one line.
   */
  public static int serve(String[] args, CountDownLatch stop, PrintWriter out, PrintWriter err)
      throws Exception {
    Command cmd;
    try {
      cmd = Command.parse(args);
    } catch (RuntimeException e) {
      err.println("payments: " + e.getMessage());
      return 2;
    }
    AtomicReference<Path> temporary = new AtomicReference<>();
    CountDownLatch stopped = new CountDownLatch(1);
    Thread hook =
        new Thread(
            () -> {
              stop.countDown();
              try {
                if (!stopped.await(SHUTDOWN_GRACE.toMillis(), TimeUnit.MILLISECONDS)) {
                  Durations.deleteTree(temporary.get()); // the cluster did not close in time
                }
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              }
            },
            "payments-shutdown");
    Runtime.getRuntime().addShutdownHook(hook);
    try {
      return cmd.store() == Store.IDEM
          ? serveOnIdem(cmd, stop, out, temporary)
          : serveOn(cmd, stop, out, err);
    } finally {
      stopped.countDown();
      try {
        Runtime.getRuntime().removeShutdownHook(hook);
      } catch (IllegalStateException e) {
        // The JVM is exiting: the hook is what stopped us.
      }
    }
  }

  private static int serveOn(Command cmd, CountDownLatch stop, PrintWriter out, PrintWriter err)
      throws Exception {
    Balances balances;
    try {
      balances =
          cmd.store() == Store.REDIS
              ? RedisBalances.connect(cmd.redisUri(), cmd.redisPrefix())
              : PostgresBalances.connect(
                  cmd.jdbcUrl(), cmd.jdbcUser(), cmd.jdbcPassword(), cmd.pool());
    } catch (IllegalArgumentException e) {
      err.println("payments: " + e.getMessage());
      return 2;
    } catch (RuntimeException e) {
      err.println("payments: cannot reach the " + cmd.store() + " store: " + e.getMessage());
      return 1;
    }
    try (balances) {
      run(balances, cmd, stop, out);
    }
    return 0;
  }

  private static int serveOnIdem(
      Command cmd, CountDownLatch stop, PrintWriter out, AtomicReference<Path> temporary)
      throws Exception {
    String servers = cmd.servers();
    Path dir = null;
    LocalCluster cluster = null;
    try {
      if (servers == null) {
        dir = Files.createTempDirectory("idem-payments");
        temporary.set(dir);
        cluster = LocalCluster.start(3, dir);
        cluster.waitForLeader(Duration.ofSeconds(30));
        servers = String.join(",", cluster.clientAddresses());
        out.println(
            "payments: embedded Idem store, 3 nodes: "
                + servers
                + "; its data (balances and keys) lives in "
                + dir
                + " and is deleted when the service stops: every start opens the accounts anew"
                + " (--servers, --store redis or --store postgres keep them)");
      }
      try (IdemClient client = IdemClient.builder().servers(servers).build()) {
        run(new IdemBalances(client), cmd, stop, out);
      }
    } finally {
      if (cluster != null) {
        cluster.close();
      }
      Durations.deleteTree(dir);
    }
    return 0;
  }

  private static void run(Balances balances, Command cmd, CountDownLatch stop, PrintWriter out)
      throws Exception {
    for (String account : cmd.accounts()) {
      balances.open(account, cmd.balance());
    }
    try (PaymentsService service = start(balances, cmd.options())) {
      out.printf(
          "payments: listening on http://127.0.0.1:%d (%s store, Idempotency-Key filter %s);"
              + " accounts %s%n",
          service.port(),
          balances.store().name().toLowerCase(java.util.Locale.ROOT),
          cmd.options().idempotency() ? "on" : "OFF",
          cmd.accounts());
      out.flush();
      stop.await();
    }
  }
}
