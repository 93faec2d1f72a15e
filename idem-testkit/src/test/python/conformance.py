#!/usr/bin/env python3
"""A conformance check of the Idem client protocol, from a client in another language.

Written from docs/PROTOCOL.md and the .proto files only. It generates the Python messages with
protoc into a temporary directory, then drives a real cluster through grpc's generic
unary_unary/stream_stream calls: register, a session stream with Hello, pipelined requests,
resends with the same numbers (duplicate = true, the saved answers), a half-close that still
receives every answer owed, and a resume on a new stream that continues the numbering.

Usage: conformance.py PROTO_DIR HOST:PORT[,HOST:PORT...]
Prints each check; exits 0 if all hold, 1 on the first mismatch, 2 on a usage or setup error.
"""

import os
import queue
import subprocess
import sys
import tempfile
import threading

TIMEOUT_S = 20  # per RPC and per awaited answer
PIPELINED = 20  # requests sent before reading any answer (below the default window of 128)


class Mismatch(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Mismatch(what)
    print("ok: " + what, flush=True)


def generate(proto_dir, out_dir):
    files = [os.path.join("idem", "v1", f) for f in ("kv.proto", "client.proto")]
    subprocess.run(["protoc", "-I", proto_dir, "--python_out=" + out_dir] + files, check=True)
    sys.path.insert(0, out_dir)


class Stream:
    """One Session stream: frames go in through a queue; answers are read by a thread."""

    def __init__(self, session_call):
        self.outgoing = queue.Queue()
        self.incoming = queue.Queue()
        self.ended = threading.Event()
        self.error = None
        self.call = session_call(self._frames(), timeout=120)
        threading.Thread(target=self._read, daemon=True).start()

    def _frames(self):
        while True:
            frame = self.outgoing.get()
            if frame is None:  # half-close
                return
            yield frame

    def _read(self):
        try:
            for frame in self.call:
                self.incoming.put(frame)
        except Exception as e:  # grpc.RpcError: recorded, checked by the caller
            self.error = e
        finally:
            self.ended.set()

    def send(self, frame):
        self.outgoing.put(frame)

    def half_close(self):
        self.outgoing.put(None)

    def next(self):
        try:
            return self.incoming.get(timeout=TIMEOUT_S)
        except queue.Empty:
            raise Mismatch("no frame within %d s" % TIMEOUT_S)

    def answers(self, count):
        """The next `count` answers to requests (seq > 0), by seq; keep-alive answers skipped."""
        got = {}
        while len(got) < count:
            f = self.next()
            if f.seq == 0 and f.result.code != kv_pb2.OK:
                raise Mismatch("stream refused: %s %s" % (kv_pb2.Code.Name(f.result.code), f.result.message))
            if f.seq > 0:
                got[f.seq] = f
        return got


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    proto_dir, servers = argv[1], argv[2].split(",")
    try:
        import grpc  # noqa: F401
    except ImportError:
        print("python3-grpcio is not installed: run ./run-tests (it installs the test packages)", file=sys.stderr)
        return 2
    out_dir = tempfile.mkdtemp(prefix="idem-py-")
    generate(proto_dir, out_dir)
    global client_pb2, kv_pb2
    from idem.v1 import client_pb2, kv_pb2

    def stubs(address):
        ch = grpc.insecure_channel(address)
        return ch, {
            "register": ch.unary_unary(
                "/idem.v1.Idem/Register",
                request_serializer=client_pb2.RegisterRequest.SerializeToString,
                response_deserializer=client_pb2.RegisterReply.FromString),
            "session": ch.stream_stream(
                "/idem.v1.Idem/Session",
                request_serializer=client_pb2.ClientFrame.SerializeToString,
                response_deserializer=client_pb2.ServerFrame.FromString),
            "get": ch.unary_unary(
                "/idem.v1.Idem/Get",
                request_serializer=client_pb2.GetRequest.SerializeToString,
                response_deserializer=client_pb2.GetReply.FromString),
        }

    # 1. Register at the leader, following NOT_LEADER hints (bounded).
    address, grant = servers[0], None
    for attempt in range(40):
        channel, rpc = stubs(address)
        reply = rpc["register"](client_pb2.RegisterRequest(ttl_ms=60000, nonce=4242), timeout=TIMEOUT_S)
        if reply.code == kv_pb2.OK:
            grant = reply
            break
        channel.close()
        if reply.code == kv_pb2.NOT_LEADER and reply.leader_hint:
            address = reply.leader_hint
        else:
            address = servers[(attempt + 1) % len(servers)]
        threading.Event().wait(0.25)
    check(grant is not None, "Register at the leader (%s) answers OK" % address)
    check(grant.next_seq == 1 and grant.epoch == 0, "a new session starts at next_seq 1, epoch 0")
    check(grant.window >= PIPELINED, "the server's window (%d) allows %d in flight" % (grant.window, PIPELINED))
    check(grant.limits.max_value_bytes > 0 and grant.limits.max_key_bytes > 0,
          "RegisterReply carries the limits (values up to %d bytes)" % grant.limits.max_value_bytes)
    hello = client_pb2.ClientFrame(hello=client_pb2.Hello(
        client_id=grant.client_id, epoch=grant.epoch, secret_hi=grant.secret_hi, secret_lo=grant.secret_lo))

    def incr(seq, ack):
        op = kv_pb2.Operation(increment=kv_pb2.Increment(key="py-counter", delta=1))
        return client_pb2.ClientFrame(request=client_pb2.Request(seq=seq, ack=ack, op=op))

    # 2. Hello, then pipeline requests before reading any answer.
    s = Stream(rpc["session"])
    s.send(hello)
    for seq in range(1, PIPELINED + 1):
        s.send(incr(seq, 1))
    first = s.answers(PIPELINED)
    check(all(first[q].result.code == kv_pb2.OK for q in first), "%d pipelined increments answered OK" % PIPELINED)
    check(all(first[q].result.number == q for q in first), "applied in number order: request n made the counter n")
    check(not any(first[q].duplicate for q in first), "first copies are not duplicates")

    # 3. Resend some with the same numbers: duplicates, with the saved answers.
    for seq in (3, 7, PIPELINED):
        s.send(incr(seq, 1))
    again = s.answers(3)
    check(all(again[q].duplicate for q in again), "resends of 3, 7, %d are answered duplicate = true" % PIPELINED)
    check(all(again[q].result == first[q].result for q in again), "duplicates carry the saved answers, unchanged")

    # 4. Pipeline more, acknowledging the answers read, and half-close at once: every answer owed comes.
    second = range(PIPELINED + 1, 2 * PIPELINED + 1)
    for seq in second:
        s.send(incr(seq, PIPELINED + 1))
    s.half_close()
    rest = s.answers(len(second))
    check(sorted(rest) == list(second), "after the half-close all %d answers owed arrived" % len(second))
    check(all(rest[q].result.number == q for q in rest), "and they are the counter values %d..%d" % (second[0], second[-1]))
    check(s.ended.wait(TIMEOUT_S), "then the server ended the stream")
    check(s.error is None, "with OK status (%s)" % s.error)

    # 5. Resume on a new stream: same session, numbering continues.
    last = second[-1]
    r = Stream(rpc["session"])
    r.send(hello)
    r.send(incr(last, last))
    dup = r.answers(1)[last]
    check(dup.duplicate and dup.result.number == last, "on a new stream, a resend of %d is a duplicate with its saved answer" % last)
    r.send(incr(last + 2, last))
    gap = r.answers(1)[last + 2]
    check(gap.result.code == kv_pb2.OUT_OF_ORDER and gap.next_seq == last + 1,
          "a gap is OUT_OF_ORDER with next_seq %d" % (last + 1))
    r.send(incr(last + 1, last + 1))
    new = r.answers(1)[last + 1]
    check(new.result.code == kv_pb2.OK and not new.duplicate and new.result.number == last + 1,
          "request %d continues the numbering: counter %d" % (last + 1, last + 1))
    got = rpc["get"](client_pb2.GetRequest(key="py-counter"), timeout=TIMEOUT_S)
    check(got.code == kv_pb2.OK and got.value == str(last + 1).encode(),
          "a linearizable Get reads %d: each increment applied exactly once" % (last + 1))
    r.send(client_pb2.ClientFrame(close=client_pb2.CloseSession()))
    closed = r.next()
    check(closed.seq == 0 and closed.result.code == kv_pb2.OK, "CloseSession is answered OK")
    r.half_close()
    check(r.ended.wait(TIMEOUT_S) and r.error is None, "and the stream ends")
    channel.close()
    print("PASS: Python client conformance", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Mismatch as m:
        print("FAIL: " + str(m), flush=True)
        sys.exit(1)
