package io.idem.verify;

/** Short constructors for test histories. */
final class Ops {
  private static long ids;

  private Ops() {}

  static Op append(String p, String key, long value, long seq, Op.Outcome o) {
    return new Op(++ids, p, Op.Fn.APPEND, key, value, 0, seq, seq * 10, seq * 10 + 5, o, null);
  }

  static Op incr(String p, String key, long delta, Op.Outcome o, Long result) {
    return new Op(++ids, p, Op.Fn.INCR, key, delta, 0, 0, 0, 1, o, result);
  }

  static Op write(long value, long start, long end, Op.Outcome o) {
    return new Op(++ids, "c", Op.Fn.WRITE, "r", value, 0, 0, start, end, o, null);
  }

  static Op read(Long result, long start, long end) {
    return new Op(++ids, "c", Op.Fn.READ, "r", 0, 0, 0, start, end, Op.Outcome.OK, result);
  }

  static Op cas(long expected, long value, long start, long end, Op.Outcome o) {
    return new Op(++ids, "c", Op.Fn.CAS, "r", value, expected, 0, start, end, o, null);
  }
}
