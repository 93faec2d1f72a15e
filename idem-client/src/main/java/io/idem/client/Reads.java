package io.idem.client;

import io.grpc.stub.StreamObserver;
import io.idem.proto.Code;
import io.idem.proto.GetKeyReply;
import io.idem.proto.GetKeyRequest;
import io.idem.proto.GetReply;
import io.idem.proto.GetRequest;
import io.idem.proto.IdemGrpc;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import java.util.function.Function;

/**
 * The linearizable reads of {@link IdemClient}: one RPC each, which needs no session, retried
 * through redirects and failures on the transport's timer until the call's deadline. Blocks no
 * thread; completes its future on the transport's workers.
 */
final class Reads {

  /** Delay between attempts of a read that found no leader. */
  static final long RETRY_MS = 50;

  private final SessionDriver session;
  private final long rpcTimeoutMs;

  Reads(SessionDriver session, long rpcTimeoutMs) {
    this.session = session;
    this.rpcTimeoutMs = rpcTimeoutMs;
  }

  /** The value of {@code key}, if any, read within {@code timeoutNanos}. */
  CompletableFuture<Optional<KeyValue>> get(String key, long timeoutNanos) {
    Operations.checkKey(key);
    GetRequest req = GetRequest.newBuilder().setKey(key).build();
    Read<GetReply, Optional<KeyValue>> read =
        new Read<>(
            key,
            System.nanoTime() + timeoutNanos,
            (stub, observer) -> stub.get(req, observer),
            GetReply::getCode,
            GetReply::getMessage,
            GetReply::getLeaderHint,
            r -> r.getFound() ? Optional.of(keyValue(key, r)) : Optional.empty());
    read.attempt();
    return read.result;
  }

  /** The record of the idempotency key {@code (scope, key)}, if any, read within the timeout. */
  CompletableFuture<Optional<KeyRecord>> getKey(String scope, String key, long timeoutNanos) {
    Operations.checkKeyId(scope, key);
    GetKeyRequest req = GetKeyRequest.newBuilder().setScope(scope).setKey(key).build();
    Read<GetKeyReply, Optional<KeyRecord>> read =
        new Read<>(
            "key " + scope + "/" + key,
            System.nanoTime() + timeoutNanos,
            (stub, observer) -> stub.getKey(req, observer),
            GetKeyReply::getCode,
            GetKeyReply::getMessage,
            GetKeyReply::getLeaderHint,
            r ->
                r.getFound()
                    ? Optional.of(
                        new KeyRecord(
                            scope,
                            key,
                            r.getCompleted(),
                            r.getToken(),
                            r.getDeadlineMs(),
                            r.getCompletedAtMs(),
                            r.getExpiresAtMs(),
                            r.getFingerprint().toByteArray(),
                            r.getResponse().toByteArray(),
                            r.getLogTimeMs()))
                    : Optional.empty());
    read.attempt();
    return read.result;
  }

  private static KeyValue keyValue(String key, GetReply r) {
    List<byte[]> elements = new ArrayList<>();
    r.getElementsList().forEach(b -> elements.add(b.toByteArray()));
    return new KeyValue(
        key,
        r.getElementsCount() > 0 ? null : r.getValue().toByteArray(),
        List.copyOf(elements),
        r.getVersion(),
        r.getModRevision(),
        r.getLease().isEmpty() ? null : r.getLease());
  }

  /** One linearizable read RPC (of reply type R), retried through redirects and failures. */
  private final class Read<R, T> {
    final String what;
    final long deadline;
    final BiConsumer<IdemGrpc.IdemStub, StreamObserver<R>> call;
    final Function<R, Code> code;
    final Function<R, String> message;
    final Function<R, String> leaderHint;
    final Function<R, T> value;
    final CompletableFuture<T> result = new CompletableFuture<>();
    String lastError = "";

    Read(
        String what,
        long deadline,
        BiConsumer<IdemGrpc.IdemStub, StreamObserver<R>> call,
        Function<R, Code> code,
        Function<R, String> message,
        Function<R, String> leaderHint,
        Function<R, T> value) {
      this.what = what;
      this.deadline = deadline;
      this.call = call;
      this.code = code;
      this.message = message;
      this.leaderHint = leaderHint;
      this.value = value;
    }

    void attempt() {
      IdemTransport.Connection c;
      try {
        c = session.transport().connection(session.address());
      } catch (IllegalStateException e) {
        fail(new NotSentException(NotSentException.Reason.CLIENT_CLOSED, e.getMessage(), 0, "", e));
        return;
      }
      long left = Math.max(1, deadline - System.nanoTime());
      call.accept(
          session
              .stub(c.channel)
              .withDeadlineAfter(
                  Math.min(left, TimeUnit.MILLISECONDS.toNanos(rpcTimeoutMs)),
                  TimeUnit.NANOSECONDS),
          new StreamObserver<>() {
            @Override
            public void onNext(R r) {
              Code k = code.apply(r);
              if (k == Code.OK) {
                T v = value.apply(r);
                session.onWorkers(() -> result.complete(v));
              } else if (k == Code.INVALID_ARGUMENT || k == Code.WRONG_GROUP) {
                fail(new InvalidArgumentException(message.apply(r), 0, 0));
              } else if (k == Code.PERMISSION_DENIED) {
                fail(new PermissionDeniedException(message.apply(r), 0, 0));
              } else {
                lastError = k + " " + message.apply(r);
                session.redirect(leaderHint.apply(r));
                retry();
              }
            }

            @Override
            public void onError(Throwable t) {
              lastError = t.toString();
              session.redirect("");
              retry();
            }

            @Override
            public void onCompleted() {}
          });
    }

    private void retry() {
      if (System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(RETRY_MS) - deadline > 0) {
        fail(
            new NotSentException(
                NotSentException.Reason.UNAVAILABLE,
                "read of " + what + " found no leader in time; last: " + lastError,
                0,
                session.leaderHint(),
                null));
        return;
      }
      try {
        session.transport().timer().schedule(this::attempt, RETRY_MS, TimeUnit.MILLISECONDS);
      } catch (RejectedExecutionException e) {
        fail(
            new NotSentException(
                NotSentException.Reason.CLIENT_CLOSED, "the client is closed", 0, "", e));
      }
    }

    private void fail(IdemException e) {
      session.onWorkers(() -> result.completeExceptionally(e));
    }
  }
}
