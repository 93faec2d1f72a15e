#!/usr/bin/env bash
# The keys target of issue 12: three `idem server` processes on loopback and `idem bench --workload keys` (each
# operation acquires a new idempotency key, then completes it with a 100-byte response), after a warm-up long enough
# for the JIT compilers to finish. Each round starts a new cluster. Prints each round, the CPU of every process in the
# measured window (and the share of it that went to the JIT compilers), and whether the round met the target:
# at least 10,000 keyed operations/s with p99 at most 50 ms.
#
#   bench/keys-target.sh [--sessions 16] [--window 6] [--duration 60s] [--warmup 120s] [--rounds 1]
#                        [--key-retention 1m] [--jar PATH] [--timeline FILE]
#
# --jar runs another build (for a comparison; by default the ./idem command, built if needed). --timeline appends
# the bench's per-second lines (`idem bench --timeline`) of every round to FILE. Environment:
# IDEM_JAVA_OPTS (JVM flags of the servers and the bench, as for ./idem), KEEP_DATA=1 keeps the data directories.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sessions=16 window=6 duration=60 warmup=120 rounds=1 retention=1m jar="" timeline=()
seconds() { # 90, 90s or 2m -> seconds
  case "$1" in
    *m) echo $(( ${1%m} * 60 )) ;;
    *s) echo "${1%s}" ;;
    *) echo "$1" ;;
  esac
}
while [ $# -gt 0 ]; do
  case "$1" in
    --sessions) sessions="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --duration) duration="$(seconds "$2")"; shift 2 ;;
    --warmup) warmup="$(seconds "$2")"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --key-retention) retention="$2"; shift 2 ;;
    --jar) jar="$2"; shift 2 ;;
    --timeline) timeline=(--timeline "$2"); shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "keys-target: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for v in "$sessions" "$window" "$duration" "$warmup" "$rounds"; do
  if ! [[ "$v" =~ ^[1-9][0-9]*$ ]]; then
    echo "keys-target: sessions, window, duration, warm-up and rounds must be positive integers, got '$v'" >&2
    exit 2
  fi
done
if [ "$duration" -lt 10 ]; then
  echo "keys-target: --duration must be at least 10s" >&2
  exit 2
fi

idem_ports=(7001 7011 7021) raft_ports=(7002 7012 7022)
name=keys-target
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
ports_free "${idem_ports[@]}" "${raft_ports[@]}"

if [ -n "$jar" ]; then
  if [ ! -f "$jar" ]; then
    echo "keys-target: no such jar: $jar" >&2
    exit 2
  fi
  run=(java ${IDEM_JAVA_OPTS--XX:+UseG1GC -XX:MaxGCPauseMillis=20} -jar "$jar")
else
  "$root/idem" --version > /dev/null # build now (first run), not inside a measurement
  run=("$root/idem")
fi

# CPU ticks of a process and of its JIT compiler threads: "total jit".
ticks() {
  local total=0 jit=0 t name v
  for t in /proc/"$1"/task/*; do
    v="$(awk '{print $14 + $15}' "$t/stat" 2> /dev/null || echo 0)"
    name="$(cat "$t/comm" 2> /dev/null || true)"
    total=$(( total + v ))
    case "$name" in C1*|C2*) jit=$(( jit + v )) ;; esac
  done
  echo "$total $jit"
}

# The bench is one (anonymous) principal holding about throughput x retention key records: above the default
# per-principal quotas (docs/LIMITS.md), so a new cluster is bootstrapped with larger ones, as an operator would.
# A build from before quotas has no such flag.
quotas=()
if "${run[@]}" server --help 2>&1 | grep -q -- '--quota'; then
  quotas=(--quota key_records=2000000 --quota key_bytes=1GiB)
fi
met=0
hz="$(getconf CLK_TCK)"
peers="n1=127.0.0.1:7002:7001,n2=127.0.0.1:7012:7011,n3=127.0.0.1:7022:7021"
for round in $(seq 1 "$rounds"); do
  for n in n1 n2 n3; do
    "${run[@]}" server --id "$n" --data-dir "$work/r$round/$n" --peers "$peers" "${quotas[@]}" \
      > "$work/r$round-$n.log" 2>&1 &
    pids+=($!)
  done
  for p in "${idem_ports[@]}"; do wait_port "$p" 60; done
  "${run[@]}" bench --servers 127.0.0.1:7001,127.0.0.1:7011,127.0.0.1:7021 --workload keys \
    --sessions "$sessions" --window "$window" --duration "${duration}s" --warmup "${warmup}s" \
    --key-retention "$retention" "${timeline[@]}" > "$work/r$round-bench.out" 2>&1 &
  bench_pid=$!
  procs=("${pids[@]}" "$bench_pid")
  # The measured window, less two seconds at each end.
  sleep $(( warmup + 2 ))
  before=() after=()
  for p in "${procs[@]}"; do before+=("$(ticks "$p")"); done
  start="$(date +%s.%N)"
  sleep $(( duration - 4 ))
  for p in "${procs[@]}"; do after+=("$(ticks "$p")"); done
  elapsed="$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {print e - s}')"
  status=0
  wait "$bench_pid" || status=$?
  stop_all
  json="$(grep '^{' "$work/r$round-bench.out" | tail -n 1 || true)"
  if [ -z "$json" ]; then
    echo "keys-target: round $round: the bench failed (exit $status):" >&2
    tr '\r' '\n' < "$work/r$round-bench.out" | tail -n 5 >&2
    exit 1
  fi
  cpu=""
  names=(n1 n2 n3 bench)
  for i in 0 1 2 3; do
    read -r t0 j0 <<< "${before[$i]}"
    read -r t1 j1 <<< "${after[$i]}"
    if [ "$t1" -lt "$t0" ]; then # the process ended before the window did
      cpu+="${names[$i]} n/a  "
      continue
    fi
    cpu+="$(awk -v n="${names[$i]}" -v t=$(( t1 - t0 )) -v j=$(( j1 - j0 )) -v hz="$hz" -v s="$elapsed" \
      'BEGIN {printf "%s %.0f%% (jit %.0f%%)  ", n, 100 * t / hz / s, 100 * j / hz / s}')"
  done
  field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" <<< "$json"; }
  rate="$(field ops_per_s)" p99="$(field p99_ms)" errors="$(field errors)"
  verdict="$(awk -v r="$rate" -v p="$p99" -v e="$errors" 'BEGIN {
    print (r >= 10000 && p <= 50 && e == 0) ? "met" : "not met"}')"
  if [ "$verdict" = met ]; then met=$(( met + 1 )); fi
  tr '\r' '\n' < "$work/r$round-bench.out" | grep -E '^(idem keys|latency ms|idem: )' | sed "s/^/round $round: /"
  echo "round $round: cpu in the measured window: $cpu"
  echo "round $round: target (>= 10,000 keyed ops/s, p99 <= 50 ms, no error): $verdict"
  echo "$json"
done
echo "keys-target: $met of $rounds rounds met the target"
