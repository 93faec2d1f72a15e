package io.idem.core;

import java.util.EnumMap;
import java.util.Map;

/**
 * The table's decision for one command, from {@link SessionTable#admit}. A decision never mutates
 * the table: only {@link SessionTable#record} commits a {@link New} command.
 */
public sealed interface Admission permits Admission.New, Admission.Duplicate, Admission.Rejected {

  /** The single {@link New} decision. */
  New NEW = new New();

  /** Returns the shared {@link Rejected} instance for {@code code}; decisions allocate nothing. */
  static Rejected rejected(RejectCode code) {
    return Rejected.BY_CODE.get(code);
  }

  /** The command was never applied: apply it, then {@link SessionTable#record} its response. */
  final class New implements Admission {
    private New() {}

    @Override
    public String toString() {
      return "NEW";
    }
  }

  /**
   * The command was applied before: answer with the saved response and do not apply it again.
   *
   * @param response the response recorded when it was applied; owned by the table, never mutate it
   */
  record Duplicate(byte[] response) implements Admission {
    @Override
    public String toString() {
      return "DUPLICATE(" + response.length + " bytes)";
    }
  }

  /**
   * The command is refused; applying nothing is a deterministic no-op on every replica.
   *
   * @param code why
   */
  record Rejected(RejectCode code) implements Admission {
    private static final Map<RejectCode, Rejected> BY_CODE = new EnumMap<>(RejectCode.class);

    static {
      for (RejectCode c : RejectCode.values()) {
        BY_CODE.put(c, new Rejected(c));
      }
    }
  }
}
