package io.idem.client;

import io.grpc.Channel;
import io.idem.proto.GroupHeader;
import io.idem.proto.IdemGrpc;

/**
 * How a call names its Raft group in a cluster of several: the {@code idem-group} header (0: the
 * metadata group; 1 and up: data groups). A call without it goes to group 1, which in a cluster of
 * one group is the only one.
 */
final class Groups {
  /** No group named: a cluster of one group. */
  static final int NONE = -1;

  /** The metadata group, where a client's id and epoch come from. */
  static final int METADATA = 0;

  private Groups() {}

  /** A stub on {@code channel} whose calls name {@code group} (none for {@link #NONE}). */
  static IdemGrpc.IdemStub stub(Channel channel, int group) {
    IdemGrpc.IdemStub stub = IdemGrpc.newStub(channel);
    return group == NONE ? stub : stub.withInterceptors(header(group));
  }

  private static io.grpc.ClientInterceptor header(int group) {
    return GroupHeader.naming(group);
  }
}
