package io.idem.server;

import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import javax.net.ssl.SSLPeerUnverifiedException;
import javax.net.ssl.SSLSession;
import javax.security.auth.x500.X500Principal;
import org.apache.ratis.grpc.server.GrpcServices;
import org.apache.ratis.proto.grpc.RaftServerProtocolServiceGrpc;
import org.apache.ratis.thirdparty.io.grpc.Grpc;
import org.apache.ratis.thirdparty.io.grpc.Metadata;
import org.apache.ratis.thirdparty.io.grpc.ServerCall;
import org.apache.ratis.thirdparty.io.grpc.ServerCallHandler;
import org.apache.ratis.thirdparty.io.grpc.ServerInterceptor;
import org.apache.ratis.thirdparty.io.grpc.Status;
import org.apache.ratis.thirdparty.io.grpc.netty.NettyServerBuilder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Who may call the Raft port: the other members, and only for Raft itself. Ratis serves its client
 * and admin services (write, read, group management, leadership and configuration changes) on the
 * Raft port unless told otherwise; Idem needs none of them from outside, because its own front door
 * proposes every entry in-process ({@link RaftNode}). So every call on the Raft port to a service
 * other than Raft's server protocol (append entries, votes, snapshot install) is refused with
 * {@code PERMISSION_DENIED}, before Ratis sees it.
 *
 * <p>Under TLS the gate also tells peers from clients. A peer presents a certificate the peer CA
 * signed (the TLS handshake checks that); if {@code allowedSubjects} is not empty, its subject must
 * also be one of them (compared as X.500 names, so {@code CN=n1, O=Idem} equals {@code
 * CN=n1,O=Idem}). With one CA for clients and peers, the allowlist is what keeps a client's
 * certificate from speaking Raft: {@link ServerConfig} requires one of the two.
 *
 * <p>Node-local: it decides nothing in the replicated state. Thread-safe (immutable).
 */
final class PeerGate implements ServerInterceptor, GrpcServices.Customizer {
  private static final Logger LOG = LoggerFactory.getLogger(PeerGate.class);

  /** The one service the Raft port serves. */
  static final String RAFT_SERVICE = RaftServerProtocolServiceGrpc.SERVICE_NAME;

  private final Set<X500Principal> allowedSubjects;

  /**
   * @param allowedSubjects the peers' certificate subjects (RFC 2253); empty: any certificate the
   *     peer CA signed, or any caller without TLS
   * @throws IllegalArgumentException if a subject is not an X.500 name
   */
  PeerGate(List<String> allowedSubjects) {
    this.allowedSubjects =
        allowedSubjects.stream().map(PeerGate::subject).collect(Collectors.toUnmodifiableSet());
  }

  /** Parses {@code name} as an X.500 name, naming it if it is not one. */
  static X500Principal subject(String name) {
    try {
      return new X500Principal(name);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "peer certificate subject \"" + name + "\" is not an X.500 name (e.g. CN=n1,O=Idem)", e);
    }
  }

  @Override
  public NettyServerBuilder customize(NettyServerBuilder builder, EnumSet<GrpcServices.Type> t) {
    return builder.intercept(this);
  }

  @Override
  public <Q, R> ServerCall.Listener<Q> interceptCall(
      ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
    String service = call.getMethodDescriptor().getServiceName();
    String refusal = refusal(service, call.getAttributes().get(Grpc.TRANSPORT_ATTR_SSL_SESSION));
    if (refusal == null) {
      return next.startCall(call, headers);
    }
    LOG.warn(
        "refused {} from {} on the Raft port: {}",
        call.getMethodDescriptor().getFullMethodName(),
        call.getAttributes().get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR),
        refusal);
    call.close(Status.PERMISSION_DENIED.withDescription(refusal), new Metadata());
    return new ServerCall.Listener<>() {};
  }

  /** Why a call to {@code service} over {@code tls} is refused, or null if it may go on. */
  String refusal(String service, SSLSession tls) {
    if (!RAFT_SERVICE.equals(service)) {
      return "the Raft port serves the cluster's members only (service "
          + service
          + " is closed); clients use the client port";
    }
    if (allowedSubjects.isEmpty()) {
      return null;
    }
    X500Principal peer = peerSubject(tls);
    if (peer == null) {
      return "the Raft port needs a peer certificate";
    }
    if (!allowedSubjects.contains(peer)) {
      return "certificate subject "
          + peer.getName(X500Principal.RFC2253)
          + " is not one of the cluster's peers";
    }
    return null;
  }

  /** The subject of the verified certificate the caller presented, or null. */
  private static X500Principal peerSubject(SSLSession session) {
    if (session == null) {
      return null;
    }
    try {
      Certificate[] chain = session.getPeerCertificates();
      if (chain.length > 0 && chain[0] instanceof X509Certificate leaf) {
        return leaf.getSubjectX500Principal();
      }
    } catch (SSLPeerUnverifiedException e) {
      // No certificate: no peer.
    }
    return null;
  }
}
