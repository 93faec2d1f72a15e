package io.idem.cli;

import io.grpc.StatusRuntimeException;
import io.idem.client.FencedWriteException;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/**
 * Turns any failure into one line for a person: no stack traces on the command line. Public for the
 * lab's commands.
 */
public final class Errors {
  private Errors() {}

  /** One line describing {@code t} (its cause, for completion wrappers), without a stack trace. */
  public static String oneLine(Throwable t) {
    Throwable e = t;
    while ((e instanceof CompletionException || e instanceof ExecutionException)
        && e.getCause() != null) {
      e = e.getCause();
    }
    if (e instanceof StatusRuntimeException s) {
      return "server unreachable or failing: " + s.getStatus().getCode() + describe(s);
    }
    String message = e.getMessage();
    if (e instanceof FencedWriteException) {
      return "fenced write refused: " + message; // the server's message names both tokens
    }
    return message == null || message.isBlank() ? e.getClass().getSimpleName() : message;
  }

  private static String describe(StatusRuntimeException s) {
    String d = s.getStatus().getDescription();
    return d == null ? "" : " (" + d + ")";
  }
}
