/**
 * The Idem client. Only {@code io.idem.client} is exported: the session state machine, its effects
 * and the identity journal in {@code io.idem.client.internal} are implementation, and so are the
 * protocol messages and gRPC, which the API does not mention (no {@code requires transitive}).
 */
// requires-automatic: gRPC (io.grpc, io.grpc.stub, io.grpc.netty.shaded) and protobuf
// (com.google.protobuf) ship no module-info, only an Automatic-Module-Name, and the client cannot
// do without them; javac's warning about each such requires would fail the build under -Werror.
@SuppressWarnings("requires-automatic")
module io.idem.client {
  requires io.idem.proto;
  requires io.grpc;
  requires io.grpc.stub;
  requires io.grpc.netty.shaded;
  requires com.google.protobuf;
  requires org.slf4j;

  exports io.idem.client;
}
