package io.idem.server;

import io.idem.proto.ChangeMembersReply;
import io.idem.proto.ChangeMembersRequest;
import io.idem.proto.Code;
import io.idem.proto.Member;
import io.idem.proto.StatusReply;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.apache.ratis.protocol.RaftClientReply;
import org.apache.ratis.protocol.RaftPeer;
import org.apache.ratis.protocol.RaftPeerId;
import org.apache.ratis.server.RaftConfiguration;

/**
 * Membership changes on the leader, through Ratis's configuration change: the request is checked
 * against the configuration in force, then the new voting set goes to Ratis (compare-and-set on the
 * current one), which first lets new members catch up as non-voters and then commits the change by
 * joint consensus. Nothing here touches the replicated state machine: configuration entries are
 * Ratis's own, applied by Ratis, and never reach {@link ReplicatedState}.
 */
final class Membership {
  /** How long a change may take when the request gives no timeout. */
  static final long DEFAULT_TIMEOUT_MS = 30_000;

  /** The longest timeout a request may ask for. */
  static final long MAX_TIMEOUT_MS = 10 * 60_000;

  /** How long a new member's client port has to answer the leader's Status before the change. */
  static final long PROBE_TIMEOUT_MS = 2_000;

  private final RaftNode raft;
  private final Function<String, StatusReply> probe;
  private final java.util.function.IntSupplier formatInForce;

  /** What the cluster refuses in a change (ids added, ids removed): the reason, or null. */
  private final java.util.function.BiFunction<List<String>, List<String>, String> rule;

  /** Runs the checks that block (the probe, cancelling a stuck change) off the gRPC threads. */
  private final ExecutorService worker =
      Executors.newCachedThreadPool(
          r -> {
            Thread t = new Thread(r, "idem-membership");
            t.setDaemon(true);
            return t;
          });

  /**
   * @param probe asks the node at a client address for its Status (within {@link
   *     #PROBE_TIMEOUT_MS}), throwing if it does not answer
   */
  Membership(RaftNode raft, Function<String, StatusReply> probe) {
    this(raft, probe, () -> 0);
  }

  /**
   * @param formatInForce the log format leaders write: a new member's code must apply it
   */
  Membership(
      RaftNode raft,
      Function<String, StatusReply> probe,
      java.util.function.IntSupplier formatInForce) {
    this(raft, probe, formatInForce, (added, removed) -> null);
  }

  /**
   * @param rule what the cluster refuses in a change (the ids added, the ids removed), or null: in
   *     a cluster of several groups, the order of members between the metadata group and the data
   *     groups ({@code IdemServer}); checked before the change reaches Ratis
   */
  Membership(
      RaftNode raft,
      Function<String, StatusReply> probe,
      java.util.function.IntSupplier formatInForce,
      java.util.function.BiFunction<List<String>, List<String>, String> rule) {
    this.raft = raft;
    this.probe = probe;
    this.formatInForce = formatInForce;
    this.rule = rule;
  }

  void close() {
    worker.shutdownNow();
  }

  /** The members in force: the new configuration's voters, then those still leaving, if any. */
  List<Member> members() {
    try {
      return members(raft.configuration());
    } catch (IOException e) {
      return List.of();
    }
  }

  private static List<Member> members(RaftConfiguration conf) {
    Map<String, Member> out = new LinkedHashMap<>();
    for (RaftPeer p : conf.getCurrentPeers()) {
      out.put(p.getId().toString(), member(p, true));
    }
    for (RaftPeer p : conf.getPreviousPeers()) {
      out.putIfAbsent(p.getId().toString(), member(p, false));
    }
    return List.copyOf(out.values());
  }

  private static Member member(RaftPeer p, boolean voter) {
    return Member.newBuilder()
        .setId(p.getId().toString())
        .setRaftAddress(p.getAddress())
        .setClientAddress(p.getClientAddress() == null ? "" : p.getClientAddress())
        .setVoter(voter)
        .setPriority(p.getPriority())
        .build();
  }

  /**
   * Checks and starts a change; the answer comes once it committed, failed, or timed out. Call on
   * the leader (Ratis refuses elsewhere, answered as {@code NOT_LEADER}). Never blocks the caller.
   */
  CompletableFuture<ChangeMembersReply> change(ChangeMembersRequest req) {
    try {
      return CompletableFuture.supplyAsync(() -> start(req), worker).thenCompose(f -> f);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      return CompletableFuture.completedFuture(
          answer(Code.NOT_LEADER, "this node is stopping", List.of()));
    }
  }

  private CompletableFuture<ChangeMembersReply> start(ChangeMembersRequest req) {
    RaftConfiguration conf;
    try {
      conf = raft.configuration();
    } catch (IOException e) {
      return CompletableFuture.completedFuture(
          answer(Code.NOT_LEADER, "this node is not running: " + e.getMessage(), List.of()));
    }
    List<RaftPeer> current = List.copyOf(conf.getCurrentPeers());
    if (!conf.getPreviousPeers().isEmpty()) {
      return CompletableFuture.completedFuture(
          answer(
              Code.MEMBERSHIP_CHANGE_FAILED,
              "another membership change is under way; try again once it committed",
              members(conf)));
    }
    List<RaftPeer> next = new ArrayList<>();
    String problem = next(req, current, next);
    if (problem != null) {
      return CompletableFuture.completedFuture(
          answer(Code.INVALID_ARGUMENT, problem, members(conf)));
    }
    String refused =
        rule.apply(req.getAddList().stream().map(Member::getId).toList(), req.getRemoveList());
    if (refused != null) {
      return CompletableFuture.completedFuture(
          answer(Code.MEMBERSHIP_CHANGE_FAILED, refused, members(conf)));
    }
    long timeoutMs = req.getTimeoutMs() == 0 ? DEFAULT_TIMEOUT_MS : req.getTimeoutMs();
    if (timeoutMs < 0 || timeoutMs > MAX_TIMEOUT_MS) {
      return CompletableFuture.completedFuture(
          answer(
              Code.INVALID_ARGUMENT,
              "timeout_ms must be in [1, " + MAX_TIMEOUT_MS + "], got " + timeoutMs,
              members(conf)));
    }
    for (Member m : req.getAddList()) {
      String wrong = probeNewMember(m);
      if (wrong != null) {
        return CompletableFuture.completedFuture(
            answer(Code.INVALID_ARGUMENT, wrong, members(conf)));
      }
    }
    return raft.setConfiguration(current, next)
        .orTimeout(timeoutMs, TimeUnit.MILLISECONDS)
        .handleAsync((reply, error) -> outcome(reply, error, timeoutMs, current), worker);
  }

  /**
   * Whether every member's code applies log format {@code version} ({@code
   * StatusReply.max_log_format}): what is wrong, or null. Asks each member for its status, off the
   * caller's thread.
   */
  CompletableFuture<String> formatProblem(int version) {
    try {
      return CompletableFuture.supplyAsync(
          () -> {
            for (Member m : members()) {
              StatusReply s;
              try {
                s = probe.apply(m.getClientAddress());
              } catch (RuntimeException e) {
                return "member "
                    + m.getId()
                    + " does not answer at "
                    + m.getClientAddress()
                    + " ("
                    + e.getMessage()
                    + "): every member must run code that applies log format "
                    + version;
              }
              if (maxLogFormat(s) < version) {
                return "member "
                    + m.getId()
                    + " applies log formats up to "
                    + maxLogFormat(s)
                    + ", not "
                    + version
                    + ": upgrade it first";
              }
            }
            return null;
          },
          worker);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      return CompletableFuture.completedFuture("this node is stopping");
    }
  }

  /**
   * The newest log format a node's code applies, from its status: code older than the field applies
   * up to {@link FormatState#BEFORE_THE_GATE}.
   */
  static int maxLogFormat(StatusReply s) {
    return s.getMaxLogFormat() == 0 ? FormatState.BEFORE_THE_GATE : s.getMaxLogFormat();
  }

  /**
   * Asks a member to be added for its Status: it must answer at its client address, under its id,
   * and belong to no cluster yet ({@code idem server --join}). Ratis would otherwise stage a peer
   * that never answers, and (seen with Ratis 3.3 on a leader whose followers keep it busy) keep the
   * change staged for good, refusing every later one. Returns what is wrong, or null.
   */
  private String probeNewMember(Member m) {
    StatusReply s;
    try {
      s = probe.apply(m.getClientAddress());
    } catch (RuntimeException e) {
      return m.getId()
          + " does not answer at its client address "
          + m.getClientAddress()
          + " ("
          + e.getMessage()
          + "): start it first with `idem server --join --id "
          + m.getId()
          + "`";
    }
    if (!s.getId().equals(m.getId())) {
      return "the node at " + m.getClientAddress() + " is " + s.getId() + ", not " + m.getId();
    }
    if (maxLogFormat(s) < formatInForce.getAsInt()) {
      return m.getId()
          + " applies log formats up to "
          + maxLogFormat(s)
          + ", below the format in force ("
          + formatInForce.getAsInt()
          + "): upgrade it first";
    }
    if (s.getMembersCount() > 0) {
      return "the node at "
          + m.getClientAddress()
          + " already has members ("
          + s.getMembersList().stream().map(Member::getId).toList()
          + "): a new member starts empty, with `idem server --join`";
    }
    return null;
  }

  private ChangeMembersReply outcome(
      RaftClientReply reply, Throwable error, long timeoutMs, List<RaftPeer> before) {
    Throwable e =
        error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
    if (e == null && reply != null && !reply.isSuccess()) {
      e =
          reply.getNotLeaderException() != null
              ? reply.getNotLeaderException()
              : reply.getException();
    }
    if (e == null) {
      return answer(Code.OK, "", members());
    }
    if (e instanceof org.apache.ratis.protocol.exceptions.NotLeaderException
        || e instanceof org.apache.ratis.protocol.exceptions.LeaderNotReadyException) {
      return answer(Code.NOT_LEADER, "not the leader: " + e.getMessage(), members());
    }
    if (e instanceof TimeoutException) {
      return answer(
          Code.MEMBERSHIP_CHANGE_FAILED,
          "the change did not commit within " + timeoutMs + " ms; " + cancelStaged(before),
          members());
    }
    String why = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    if (e instanceof org.apache.ratis.protocol.exceptions.ReconfigurationTimeoutException) {
      why =
          "a new member made no progress catching up (is it running with --join, and is its raft"
              + " address right?): "
              + why;
    }
    return answer(Code.MEMBERSHIP_CHANGE_FAILED, why, members());
  }

  /**
   * After a timeout: if the change never left Ratis's staging (new members still catching up, the
   * configuration in force still {@code before}), this leader steps down, which drops the staged
   * change (Ratis 3.3 has no call to cancel one, and refuses to transfer leadership while it
   * stages); otherwise the change is under way and will commit. Returns what happened, for the
   * answer.
   */
  private String cancelStaged(List<RaftPeer> before) {
    RaftConfiguration conf;
    try {
      conf = raft.configuration();
    } catch (IOException e) {
      return "this node stopped: list the members";
    }
    boolean staged =
        conf.getPreviousPeers().isEmpty()
            && ids(conf.getCurrentPeers()).equals(ids(before))
            && raft.isLeader();
    if (!staged) {
      return "it is under way and may still commit: list the members";
    }
    try {
      raft.stepDown(PROBE_TIMEOUT_MS * 2);
      return "a new member was still catching up; the leader stepped down to cancel the change"
          + " (an election follows): nothing changed. If its raft address was wrong, start it"
          + " again under a new id: a node keeps the raft address it tried for an id until it"
          + " restarts";
    } catch (IOException ex) {
      return "a new member was still catching up and the change stays staged on this leader ("
          + ex.getMessage()
          + "): restart the leader to cancel it";
    }
  }

  private static Set<String> ids(java.util.Collection<RaftPeer> peers) {
    Set<String> out = new HashSet<>();
    peers.forEach(p -> out.add(p.getId().toString()));
    return out;
  }

  /**
   * Fills {@code next} with {@code current} minus the removed plus the added members; returns what
   * is wrong with the request instead, or null.
   */
  private static String next(
      ChangeMembersRequest req, List<RaftPeer> current, List<RaftPeer> next) {
    if (req.getAddCount() == 0 && req.getRemoveCount() == 0) {
      return "the change adds and removes no member";
    }
    Set<String> ids = new HashSet<>();
    Set<String> raftAddresses = new HashSet<>();
    Set<String> clientAddresses = new HashSet<>();
    for (RaftPeer p : current) {
      ids.add(p.getId().toString());
      raftAddresses.add(p.getAddress());
      clientAddresses.add(p.getClientAddress());
    }
    Set<String> removed = new HashSet<>();
    for (String id : req.getRemoveList()) {
      if (!ids.contains(id)) {
        return "no member " + id + " to remove (members: " + String.join(", ", sorted(ids)) + ")";
      }
      if (!removed.add(id)) {
        return id + " is named twice";
      }
    }
    for (RaftPeer p : current) {
      if (!removed.contains(p.getId().toString())) {
        next.add(p);
      }
    }
    for (Member m : req.getAddList()) {
      ServerConfig.Peer peer;
      try {
        peer = new ServerConfig.Peer(m.getId(), m.getRaftAddress(), m.getClientAddress());
      } catch (IllegalArgumentException e) {
        return e.getMessage();
      }
      if (ids.contains(peer.id())) {
        // Also when the same id is removed in this change: a node keeps its id for life, and a
        // node that lost its disk must never come back under its old one (docs/OPERATIONS.md).
        return peer.id()
            + " is already a member: a new member needs a new id (a node that lost its disk"
            + " rejoins under a new id and the old one is removed)";
      }
      if (!raftAddresses.add(peer.raftAddress())) {
        return "raft address " + peer.raftAddress() + " is already in use by a member";
      }
      if (!clientAddresses.add(peer.clientAddress())) {
        return "client address " + peer.clientAddress() + " is already in use by a member";
      }
      ids.add(peer.id());
      next.add(
          RaftPeer.newBuilder()
              .setId(RaftPeerId.valueOf(peer.id()))
              .setAddress(peer.raftAddress())
              .setClientAddress(peer.clientAddress())
              .build());
    }
    if (next.isEmpty()) {
      return "the change would leave no member: a cluster keeps at least one";
    }
    return null;
  }

  private static List<String> sorted(Set<String> ids) {
    List<String> l = new ArrayList<>(ids);
    l.sort(null);
    return l;
  }

  private static ChangeMembersReply answer(Code code, String message, List<Member> members) {
    return ChangeMembersReply.newBuilder()
        .setCode(code)
        .setMessage(message)
        .addAllMembers(members)
        .build();
  }
}
