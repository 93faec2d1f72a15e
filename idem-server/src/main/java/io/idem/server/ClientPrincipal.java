package io.idem.server;

import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.Grpc;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import javax.net.ssl.SSLPeerUnverifiedException;
import javax.net.ssl.SSLSession;
import javax.security.auth.x500.X500Principal;

/**
 * The authenticated principal of a client call: the subject of the certificate it presented over
 * mutual TLS, in RFC 2253 form ({@code CN=tenant-a,O=Example}). Calls without a verified client
 * certificate (plain text, or TLS without client authentication) have none.
 *
 * <p>The front door binds a new session to its registrar's principal through the log ({@code
 * RegisterCmd.principal}) and checks it on every resume and stream Hello, so one tenant can neither
 * resume, fence nor write through another's session, even if it learns its secret.
 */
final class ClientPrincipal implements ServerInterceptor {
  private static final Context.Key<String> KEY = Context.key("idem-client-principal");

  /** The current call's principal, or null. Valid inside a service method of the client port. */
  static String current() {
    return KEY.get();
  }

  @Override
  public <Q, R> ServerCall.Listener<Q> interceptCall(
      ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
    String principal = of(call.getAttributes().get(Grpc.TRANSPORT_ATTR_SSL_SESSION));
    if (principal == null) {
      return next.startCall(call, headers);
    }
    return Contexts.interceptCall(Context.current().withValue(KEY, principal), call, headers, next);
  }

  /** The subject of the session's verified peer certificate, or null. */
  static String of(SSLSession session) {
    if (session == null) {
      return null;
    }
    try {
      Certificate[] chain = session.getPeerCertificates();
      if (chain.length > 0 && chain[0] instanceof X509Certificate leaf) {
        return leaf.getSubjectX500Principal().getName(X500Principal.RFC2253);
      }
    } catch (SSLPeerUnverifiedException e) {
      // TLS without a client certificate: no principal.
    }
    return null;
  }
}
