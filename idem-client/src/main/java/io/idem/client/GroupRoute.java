package io.idem.client;

import java.util.List;

/**
 * The route of one group's admin calls ({@link IdemClient#status(int)}, {@link
 * IdemClient#changeMembers(int, List, List, java.time.Duration)}) on the client's connections,
 * without a session in that group: asking a group's status or changing its members registers
 * nothing there and writes no journal beside the identity file. Follows leader hints; after a
 * failure, the next server of the list.
 */
final class GroupRoute implements AdminRoute {
  private final IdemTransport transport;
  private final List<String> servers;
  private final int group;
  private int next;
  private String hint = "";

  GroupRoute(IdemTransport transport, List<String> servers, int group) {
    if (servers.isEmpty()) {
      throw new IllegalArgumentException("no servers");
    }
    this.transport = transport;
    this.servers = List.copyOf(servers);
    this.group = group;
  }

  @Override
  public synchronized String address() {
    return hint.isEmpty() ? servers.get(next) : hint;
  }

  @Override
  public synchronized void redirect(String leader) {
    if (leader != null && !leader.isEmpty() && !leader.equals(hint)) {
      hint = leader;
      return;
    }
    hint = "";
    next = (next + 1) % servers.size();
  }

  @Override
  public synchronized String leaderHint() {
    return hint;
  }

  @Override
  public IdemTransport transport() {
    return transport;
  }

  @Override
  public io.idem.proto.IdemGrpc.IdemStub stub(io.grpc.Channel channel) {
    return Groups.stub(channel, group);
  }
}
