package io.idem.proto;

import io.grpc.ClientInterceptor;
import io.grpc.Metadata;
import io.grpc.stub.MetadataUtils;

/**
 * How a call names its Raft group in a cluster of several: the {@code idem-group} header, in
 * decimal (0: the metadata group; 1 and up: data groups). A call without it goes to group 1, which
 * in a cluster of one group is the only one ({@link Partitions}).
 */
public final class GroupHeader {
  /** The header. */
  public static final Metadata.Key<String> KEY =
      Metadata.Key.of("idem-group", Metadata.ASCII_STRING_MARSHALLER);

  private GroupHeader() {}

  /** An interceptor that names {@code group} on every call. */
  public static ClientInterceptor naming(int group) {
    if (group < 0) {
      throw new IllegalArgumentException("a group number is 0 or more, got " + group);
    }
    Metadata headers = new Metadata();
    headers.put(KEY, Integer.toString(group));
    return MetadataUtils.newAttachHeadersInterceptor(headers);
  }
}
