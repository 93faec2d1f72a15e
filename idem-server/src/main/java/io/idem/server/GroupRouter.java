package io.idem.server;

import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.idem.proto.AuthReply;
import io.idem.proto.AuthRequest;
import io.idem.proto.ChangeMembersReply;
import io.idem.proto.ChangeMembersRequest;
import io.idem.proto.ClientFrame;
import io.idem.proto.ConfigureReply;
import io.idem.proto.ConfigureRequest;
import io.idem.proto.GetKeyReply;
import io.idem.proto.GetKeyRequest;
import io.idem.proto.GetReply;
import io.idem.proto.GetRequest;
import io.idem.proto.IdemGrpc;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.ServerFrame;
import io.idem.proto.StatusReply;
import io.idem.proto.StatusRequest;
import java.util.Map;

/**
 * The client port of a node that hosts several Raft groups: every call names its group in the
 * {@code idem-group} header (0: the metadata group; 1 and up: data groups), and goes to that
 * group's {@link FrontDoor}. A call without the header goes to group 1, so a client that knows
 * nothing of groups works with a cluster of one group exactly as before. A call naming a group this
 * node does not host fails with {@code NOT_FOUND} before it reaches any group.
 */
final class GroupRouter extends IdemGrpc.IdemImplBase implements ServerInterceptor {
  private static final Context.Key<Integer> KEY = Context.key("idem-group");

  private final Map<Integer, FrontDoor> doors;

  /**
   * @param doors each hosted group's front door, by group number
   */
  GroupRouter(Map<Integer, FrontDoor> doors) {
    this.doors = Map.copyOf(doors);
  }

  @Override
  public <Q, R> ServerCall.Listener<Q> interceptCall(
      ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
    String named = headers.get(io.idem.proto.GroupHeader.KEY);
    int group;
    try {
      group = named == null ? 1 : Integer.parseInt(named.trim());
    } catch (NumberFormatException e) {
      group = -1;
    }
    if (!doors.containsKey(group)) {
      call.close(
          Status.NOT_FOUND.withDescription(
              "this node hosts Raft groups "
                  + new java.util.TreeSet<>(doors.keySet())
                  + ", not \""
                  + named
                  + "\" (header idem-group)"),
          new Metadata());
      return new ServerCall.Listener<>() {};
    }
    return Contexts.interceptCall(Context.current().withValue(KEY, group), call, headers, next);
  }

  private FrontDoor door() {
    Integer g = KEY.get();
    return doors.get(g == null ? 1 : g);
  }

  @Override
  public void register(RegisterRequest req, StreamObserver<RegisterReply> reply) {
    door().register(req, reply);
  }

  @Override
  public StreamObserver<ClientFrame> session(StreamObserver<ServerFrame> responses) {
    return door().session(responses);
  }

  @Override
  public void get(GetRequest req, StreamObserver<GetReply> reply) {
    door().get(req, reply);
  }

  @Override
  public void getKey(GetKeyRequest req, StreamObserver<GetKeyReply> reply) {
    door().getKey(req, reply);
  }

  @Override
  public void status(StatusRequest req, StreamObserver<StatusReply> reply) {
    door().status(req, reply);
  }

  @Override
  public void configure(ConfigureRequest req, StreamObserver<ConfigureReply> reply) {
    door().configure(req, reply);
  }

  @Override
  public void changeMembers(ChangeMembersRequest req, StreamObserver<ChangeMembersReply> reply) {
    door().changeMembers(req, reply);
  }

  @Override
  public void auth(AuthRequest req, StreamObserver<AuthReply> reply) {
    door().auth(req, reply);
  }
}
