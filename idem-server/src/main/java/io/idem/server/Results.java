package io.idem.server;

import io.idem.proto.Code;
import io.idem.proto.Result;

/** Builders of the {@link Result} answers that the domains' operations share. */
final class Results {
  private Results() {}

  static Result.Builder ok(long revision) {
    return Result.newBuilder().setCode(Code.OK).setRevision(revision);
  }

  static Result of(long revision, Code code, String message) {
    return Result.newBuilder().setCode(code).setMessage(message).setRevision(revision).build();
  }

  static Result invalid(long revision, String message) {
    return of(revision, Code.INVALID_ARGUMENT, message);
  }
}
