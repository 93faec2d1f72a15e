package io.idem.http;

import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import jakarta.servlet.http.HttpServlet;
import java.net.InetSocketAddress;
import java.net.URI;
import java.util.EnumSet;
import java.util.Map;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.ee10.servlet.security.ConstraintMapping;
import org.eclipse.jetty.ee10.servlet.security.ConstraintSecurityHandler;
import org.eclipse.jetty.security.Constraint;
import org.eclipse.jetty.security.HashLoginService;
import org.eclipse.jetty.security.UserStore;
import org.eclipse.jetty.security.authentication.BasicAuthenticator;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.util.security.Credential;

/**
 * A real Jetty 12 (ee10) on a free loopback port, with the filter in front of the given servlets,
 * and HTTP Basic authentication (the container's own) on {@code /secure/*} for the users given.
 */
final class EmbeddedJetty implements AutoCloseable {
  private final Server server;
  final URI base;

  private EmbeddedJetty(Server server) {
    this.server = server;
    int port = ((ServerConnector) server.getConnectors()[0]).getLocalPort();
    this.base = URI.create("http://127.0.0.1:" + port);
  }

  @SuppressWarnings("AddressSelection") // a literal loopback address: nothing is looked up
  static EmbeddedJetty start(
      Filter filter, Map<String, HttpServlet> servlets, Map<String, String> users)
      throws Exception {
    Server server = new Server(new InetSocketAddress("127.0.0.1", 0));
    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.SECURITY);
    servlets.forEach((path, servlet) -> context.addServlet(new ServletHolder(servlet), path));
    context.addFilter(new FilterHolder(filter), "/*", EnumSet.of(DispatcherType.REQUEST));
    UserStore store = new UserStore();
    users.forEach(
        (user, password) ->
            store.addUser(user, Credential.getCredential(password), new String[] {"user"}));
    HashLoginService login = new HashLoginService("idem-test");
    login.setUserStore(store);
    ConstraintSecurityHandler security = new ConstraintSecurityHandler();
    security.setAuthenticator(new BasicAuthenticator());
    security.setLoginService(login);
    ConstraintMapping secure = new ConstraintMapping();
    secure.setPathSpec("/secure/*");
    secure.setConstraint(Constraint.ANY_USER);
    security.addConstraintMapping(secure);
    context.setSecurityHandler(security);
    server.setHandler(context);
    server.start();
    return new EmbeddedJetty(server);
  }

  URI uri(String pathAndQuery) {
    return base.resolve(pathAndQuery);
  }

  @Override
  public void close() {
    try {
      server.stop();
    } catch (Exception e) {
      throw new IllegalStateException("Jetty did not stop", e);
    }
  }
}
