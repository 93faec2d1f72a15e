package io.idem.verify;

import io.idem.testkit.FaultProxy;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;

/**
 * The network between the nodes' Raft ports: one {@link FaultProxy} per ordered pair of nodes, the
 * link from node {@code i} to node {@code j}, through which every connection {@code i} opens
 * towards {@code j} passes. Node {@code i}'s peer list names, for every other node {@code j}, the
 * proxy of the link {@code i -> j} as {@code j}'s Raft address ({@link #raftAddressSeenBy}).
 *
 * <p>Ratis over gRPC: each server opens its own connections to the peers' addresses, and an RPC's
 * request and its answer both travel on the caller's connection. So the link {@code i -> j} carries
 * {@code i}'s requests to {@code j} (append entries and heartbeats when {@code i} leads, votes when
 * it stands, read-index requests) and {@code j}'s answers to them; the link {@code j -> i} carries
 * the other way round. Messages from {@code i} to {@code j} are the requests on {@code i -> j} and
 * the answers on {@code j -> i}.
 *
 * <p>Faults, all silent (bytes dropped, no RST, connections accepted and left open), until {@link
 * #healAll()}:
 *
 * <ul>
 *   <li>{@link #cut(int, int)}: nothing passes between {@code i} and {@code j}, either way;
 *   <li>{@link #cutOneWay(int, int)}: every message from {@code i} to {@code j} is lost (requests
 *       on {@code i -> j}, answers on {@code j -> i}), while messages from {@code j} reach {@code
 *       i}: {@code j} still calls {@code i}, and {@code i} acts on the calls, but {@code j} hears
 *       nothing from it;
 *   <li>{@link #halfOpen(int, int)}: the connections open now on {@code i -> j} go silent both ways
 *       and stay open, as when a NAT between them dropped its state; new connections work, so the
 *       link recovers only if {@code i} gives up on the silent connection and opens another.
 * </ul>
 *
 * A heal resets the connections that lost bytes (their HTTP/2 streams broke mid-frame), and the
 * nodes reconnect.
 *
 * <p>Why one proxy per ordered pair, and per-node peer lists, work with Ratis 3.3: the peers'
 * addresses are part of the configuration entries Ratis replicates, but a server looks its peers up
 * in its {@code PeerProxyMap}, which keeps the first address it was given for an id ({@code
 * computeIfAbsent}), and the server adds the peers of the group it was started with before it reads
 * its log ({@code RaftServerProxy.newRaftServerImpl}). A configuration entry written by another
 * node (with that node's view of the addresses) therefore never replaces the local ones, also after
 * a restart or a snapshot install. The client addresses, which do travel to clients in {@code
 * NOT_LEADER} hints, are the same in every node's list. {@code PartitionTest} checks that the links
 * really carry the traffic: cutting them isolates a leader.
 *
 * <p>Thread-safe: the faults may be switched from any thread.
 */
public final class PeerNetwork implements AutoCloseable {
  // links.get(i).get(j): the link i -> j (null where i == j).
  private final List<List<FaultProxy>> links = new ArrayList<>();
  private final List<String> raft = new ArrayList<>();
  private final Set<String> cut = new TreeSet<>();

  /** Starts a proxy for every ordered pair of the nodes whose Raft ports are {@code raft}. */
  public PeerNetwork(List<String> raft) {
    raft.forEach(this::add);
  }

  /**
   * A node more, whose Raft port is {@code raftAddress}: starts the links between it and every node
   * so far, both ways. Returns its index.
   */
  public synchronized int add(String raftAddress) {
    int k = raft.size();
    for (int i = 0; i < k; i++) {
      links.get(i).add(FaultProxy.start(raftAddress));
    }
    List<FaultProxy> out = new ArrayList<>();
    for (int j = 0; j < k; j++) {
      out.add(FaultProxy.start(raft.get(j)));
    }
    out.add(null);
    links.add(out);
    raft.add(raftAddress);
    return k;
  }

  /**
   * Node {@code j} now listens on {@code raftAddress} (a new member in its slot): the links towards
   * it are replaced by new ones (new addresses) that lead there. The links from it stay.
   */
  public synchronized void retarget(int j, String raftAddress) {
    checkNode(j);
    raft.set(j, raftAddress);
    for (int i = 0; i < raft.size(); i++) {
      if (i != j) {
        links.get(i).set(j, FaultProxy.start(raftAddress)).close();
      }
    }
  }

  /** Node {@code j}'s Raft address as node {@code i} must know it: the link {@code i -> j}. */
  public String raftAddressSeenBy(int i, int j) {
    return link(i, j).address();
  }

  /** The proxy of the link {@code i -> j} (connections {@code i} opens towards {@code j}). */
  public synchronized FaultProxy link(int i, int j) {
    if (i == j) {
      throw new IllegalArgumentException("no link from node " + i + " to itself");
    }
    checkNode(i);
    checkNode(j);
    return links.get(i).get(j);
  }

  private void checkNode(int i) {
    if (i < 0 || i >= raft.size()) {
      throw new IllegalArgumentException("no node " + i + " among " + raft.size() + " nodes");
    }
  }

  /** Nothing passes between {@code i} and {@code j}, in either direction. */
  public synchronized void cut(int i, int j) {
    link(i, j).partition();
    link(j, i).partition();
    cut.add(i + "<->" + j);
  }

  /** Every pair across the two sides is {@link #cut}. */
  public synchronized void partition(Collection<Integer> side, Collection<Integer> other) {
    for (int i : side) {
      for (int j : other) {
        cut(i, j);
      }
    }
  }

  /**
   * Messages from {@code from} to {@code to} are lost, messages from {@code to} to {@code from}
   * arrive: requests on the link {@code from -> to}, and answers on {@code to -> from}, are
   * dropped.
   */
  public synchronized void cutOneWay(int from, int to) {
    link(from, to).partitionRequests();
    link(to, from).partitionResponses();
    cut.add(from + "->" + to);
  }

  /**
   * The connections open now on the link {@code from -> to} go silent both ways and stay open.
   *
   * @return how many connections the link had accepted so far (compare {@link #accepted} later to
   *     see whether the caller opened a new one)
   */
  public synchronized long halfOpen(int from, int to) {
    link(from, to).silenceOpenConnections();
    cut.add(from + "~>" + to);
    return accepted(from, to);
  }

  /** How many connections the link {@code from -> to} accepted since it started. */
  public long accepted(int from, int to) {
    return link(from, to).acceptedConnections();
  }

  /**
   * Heals every link: bytes flow again, the connections that lost bytes or were silenced are reset.
   *
   * @return how many connections were reset
   */
  public synchronized int healAll() {
    int reset = 0;
    for (List<FaultProxy> out : links) {
      for (FaultProxy link : out) {
        if (link != null) {
          reset += link.heal();
        }
      }
    }
    cut.clear();
    return reset;
  }

  /** The faults in force, as {@code 0<->1} (cut), {@code 0->1} (one way), {@code 0~>1} (silent). */
  public synchronized List<String> faults() {
    return new ArrayList<>(cut);
  }

  @Override
  public synchronized void close() {
    for (List<FaultProxy> out : links) {
      for (FaultProxy link : out) {
        if (link != null) {
          link.close();
        }
      }
    }
  }
}
