package io.idem.hostile;

import io.idem.proto.LogEntry;
import io.idem.server.ServerConfig;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.ratis.client.RaftClient;
import org.apache.ratis.client.RaftClientConfigKeys;
import org.apache.ratis.conf.Parameters;
import org.apache.ratis.conf.RaftProperties;
import org.apache.ratis.grpc.GrpcConfigKeys;
import org.apache.ratis.grpc.GrpcTlsConfig;
import org.apache.ratis.proto.RaftProtos.RequestVoteRequestProto;
import org.apache.ratis.proto.grpc.RaftServerProtocolServiceGrpc;
import org.apache.ratis.protocol.Message;
import org.apache.ratis.protocol.RaftClientReply;
import org.apache.ratis.protocol.RaftGroup;
import org.apache.ratis.protocol.RaftGroupId;
import org.apache.ratis.protocol.RaftPeer;
import org.apache.ratis.protocol.RaftPeerId;
import org.apache.ratis.retry.RetryPolicies;
import org.apache.ratis.thirdparty.com.google.protobuf.UnsafeByteOperations;
import org.apache.ratis.thirdparty.io.grpc.ManagedChannel;
import org.apache.ratis.thirdparty.io.grpc.netty.GrpcSslContexts;
import org.apache.ratis.thirdparty.io.grpc.netty.NettyChannelBuilder;
import org.apache.ratis.util.TimeDuration;

/**
 * What a hostile process that reaches the Raft port does with Ratis's own client: it knows the
 * group id (derived from a constant) and the members' Raft addresses (the status page names them),
 * and sends raw log entries, group management and configuration changes to the leader, without
 * retries. With TLS files it presents a certificate, e.g. a tenant's from the cluster's CA.
 */
final class RaftPortClient implements AutoCloseable {
  /** The group id every Idem cluster uses (RaftNode.GROUP_ID). */
  static final RaftGroupId GROUP_ID =
      RaftGroupId.valueOf(UUID.nameUUIDFromBytes("idem".getBytes(StandardCharsets.UTF_8)));

  private final RaftClient client;
  private final RaftPeerId leader;

  /**
   * @param peers the cluster's members
   * @param leaderId the member to send to (the leader, so that nothing fails for another reason)
   * @param tls certificate, key and CA to present, or null for plaintext
   */
  RaftPortClient(List<ServerConfig.Peer> peers, String leaderId, Path[] tls) {
    RaftProperties properties = new RaftProperties();
    RaftClientConfigKeys.Rpc.setRequestTimeout(
        properties, TimeDuration.valueOf(5, TimeUnit.SECONDS));
    Parameters parameters = new Parameters();
    if (tls != null) {
      GrpcConfigKeys.TLS.setConf(
          parameters, new GrpcTlsConfig(tls[1].toFile(), tls[0].toFile(), tls[2].toFile(), true));
    }
    List<RaftPeer> raftPeers =
        peers.stream()
            .map(p -> RaftPeer.newBuilder().setId(p.id()).setAddress(p.raftAddress()).build())
            .toList();
    this.leader = RaftPeerId.valueOf(leaderId);
    this.client =
        RaftClient.newBuilder()
            .setProperties(properties)
            .setParameters(parameters)
            .setRaftGroup(RaftGroup.valueOf(GROUP_ID, raftPeers))
            .setLeaderId(leader)
            .setRetryPolicy(RetryPolicies.noRetry())
            .build();
  }

  /** Proposes {@code entry} as a write, as the front door would. */
  RaftClientReply propose(LogEntry entry) throws IOException {
    return client.io().send(Message.valueOf(UnsafeByteOperations.unsafeWrap(entry.toByteArray())));
  }

  /** Asks the leader to remove the group and delete its directory. */
  RaftClientReply removeGroup() throws IOException {
    return client.getGroupManagementApi(leader).remove(GROUP_ID, true, false);
  }

  /** Asks the leader to make {@code only} the group's sole member. */
  RaftClientReply reconfigure(ServerConfig.Peer only) throws IOException {
    return client
        .admin()
        .setConfiguration(
            List.of(RaftPeer.newBuilder().setId(only.id()).setAddress(only.raftAddress()).build()));
  }

  @Override
  public void close() throws IOException {
    client.close();
  }

  /**
   * Calls Raft's own server protocol (a vote request) at {@code raftAddress} over TLS with {@code
   * tls} (certificate, key, CA): what a client certificate would need to disturb elections or
   * append entries.
   */
  static void requestVote(String raftAddress, Path[] tls) throws IOException {
    ManagedChannel channel =
        NettyChannelBuilder.forTarget(raftAddress)
            .sslContext(
                GrpcSslContexts.forClient()
                    .trustManager(tls[2].toFile())
                    .keyManager(tls[0].toFile(), tls[1].toFile())
                    .build())
            .build();
    try {
      RaftServerProtocolServiceGrpc.newBlockingStub(channel)
          .withDeadlineAfter(10, TimeUnit.SECONDS)
          .requestVote(RequestVoteRequestProto.getDefaultInstance());
    } finally {
      channel.shutdownNow();
    }
  }
}
