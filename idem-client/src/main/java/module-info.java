/**
 * The Idem client. Only {@code io.idem.client} is exported: the session state machine, its effects
 * and the identity journal in {@code io.idem.client.internal} are implementation, and so are the
 * protocol messages and gRPC, which the API does not mention (the only {@code requires transitive}
 * is Micrometer's, optional, for the builder's meter registry).
 */
// requires-automatic: gRPC (io.grpc, io.grpc.stub, io.grpc.netty.shaded) and protobuf
// (com.google.protobuf) ship no module-info, only an Automatic-Module-Name, and the client cannot
// do without them; javac's warning about each such requires would fail the build under -Werror.
// Micrometer core is automatic too (micrometer.core), and required transitively (see below).
@SuppressWarnings({"requires-automatic", "requires-transitive-automatic"})
module io.idem.client {
  requires io.idem.proto;
  requires io.grpc;
  requires io.grpc.stub;
  requires io.grpc.netty.shaded;
  requires com.google.protobuf;
  requires org.slf4j;
  // @Nullable in the API's signatures: annotations only, not needed at run time.
  requires static transitive org.jspecify;
  // Optional: only IdemClient.Builder#meterRegistry names it, and its callers bring it; transitive
  // because the API names its MeterRegistry (the one third-party type the API mentions).
  requires static transitive micrometer.core;

  exports io.idem.client;
}
