#!/usr/bin/env bash
# What several Raft groups cost: for each group count, a fresh 3-node Idem cluster (idem server --groups G) on
# loopback, the same closed-loop put workload (idem bench), and from /proc the server processes' CPU during the
# measured window, their threads and resident memory; then, under a second bench that is not measured, node n1's
# fsyncs (strace -c for 5 s: traced, the node runs slower, so the count is a lower bound of the untraced rate). One
# line per group count, then the ratios to the first.
#
#   bench/groups-cost.sh [--groups "1 4 16"] [--sessions N] [--window N] [--duration 20s] [--warmup 10s]
#
# Environment: IDEM_JAVA_OPTS (JVM flags of the servers and the bench, see ./idem), KEEP_DATA=1 keeps the data.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
groups_list="1 4 16" sessions=64 window=32 duration=20s warmup=10s
while [ $# -gt 0 ]; do
  case "$1" in
    --groups) groups_list="$2"; shift 2 ;;
    --sessions) sessions="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "groups-cost: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
idem_ports=(7001 7011 7021) idem_raft_ports=(7002 7012 7022) 
name=groups-cost
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
ports_free "${idem_ports[@]}" "${idem_raft_ports[@]}"
"$root/idem" --version > /dev/null # build the jar now, not inside a measurement

ticks() { # the summed utime+stime, in clock ticks, of the given PIDs
  local t=0 pid f
  for pid in "$@"; do
    # utime and stime are fields 14 and 15; the command name before them may hold spaces, so count from ") ".
    read -r -a f <<< "$(sed 's/^.*) //' "/proc/$pid/stat")"
    t=$(( t + f[11] + f[12] ))
  done
  echo "$t"
}
status_of() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/status"; }
fsyncs_per_s() { # fsync and fdatasync calls of process $1 and its threads in 5 s, per second
  timeout -s INT 5 strace -f -c -e trace=fsync,fdatasync -p "$1" 2>&1 > /dev/null \
    | awk '$NF == "fsync" || $NF == "fdatasync" {s += $4} END {printf "%.0f", s / 5}' || true
}

hz="$(getconf CLK_TCK)"
printf '%-7s %12s %9s %9s %14s %9s %10s %12s\n' groups "writes/s" "p99 ms" "p999 ms" "CPU-us/write" threads "RSS MiB" "n1 fsyncs/s" >&2
results=()
for g in $groups_list; do
  peers="n1=127.0.0.1:7002:7001,n2=127.0.0.1:7012:7011,n3=127.0.0.1:7022:7021"
  for n in n1 n2 n3; do
    "$root/idem" server --id "$n" --data-dir "$work/g$g/$n" --peers "$peers" --groups "$g" \
      > "$work/g$g-$n.log" 2>&1 &
    pids+=($!)
  done
  for p in "${idem_ports[@]}"; do wait_port "$p" 90; done
  servers=("${pids[@]}")
  # The bench warms up first; the CPU window is the measured part: sample around it by its start and end lines.
  "$root/idem" bench --servers "127.0.0.1:7001,127.0.0.1:7011,127.0.0.1:7021" --sessions "$sessions" \
    --window "$window" --workload put --duration "$duration" --warmup "$warmup" > "$work/g$g.out" 2>&1 &
  bench_pid=$!
  sleep "${warmup%s}"
  t0="$(ticks "${servers[@]}")" s0="$(date +%s.%N)"
  sleep "${duration%s}"
  t1="$(ticks "${servers[@]}")" s1="$(date +%s.%N)"
  wait "$bench_pid"
  # A second, unmeasured bench while strace counts n1's fsyncs.
  "$root/idem" bench --servers "127.0.0.1:7001,127.0.0.1:7011,127.0.0.1:7021" --sessions "$sessions" \
    --window "$window" --workload put --duration 8s --warmup 1s > "$work/g$g-strace.out" 2>&1 &
  bench_pid=$!
  sleep 3
  fsyncs="$(fsyncs_per_s "${servers[0]}")"
  wait "$bench_pid" || true
  json="$(tail -n 1 "$work/g$g.out")"
  threads=0 rss=0
  for pid in "${servers[@]}"; do
    threads=$(( threads + $(status_of "$pid" Threads) ))
    rss=$(( rss + $(status_of "$pid" VmRSS) ))
  done
  stop_all
  rate="$(sed -n 's/.*"ops_per_s":\([0-9.]*\).*/\1/p' <<< "$json")"
  line="$(awk -v g="$g" -v r="$rate" -v p99="$(sed -n 's/.*"p99_ms":\([0-9.]*\).*/\1/p' <<< "$json")" \
    -v p999="$(sed -n 's/.*"p999_ms":\([0-9.]*\).*/\1/p' <<< "$json")" \
    -v dt="$(( t1 - t0 ))" -v hz="$hz" -v secs="$(awk -v a="$s0" -v b="$s1" 'BEGIN {print b - a}')" \
    -v th="$threads" -v rss="$rss" -v fl="$fsyncs" 'BEGIN {
      cpu_us = (r > 0) ? dt / hz * 1e6 / (r * secs) : 0
      printf "%-7s %12.0f %9.1f %9.1f %14.1f %9d %10.0f %12.0f", g, r, p99, p999, cpu_us, th / 3, rss / 1024 / 3, fl
    }')"
  echo "$line" >&2
  results+=("$line")
done
echo "(threads and RSS per server process; CPU summed over the three servers during the measured window)" >&2
base="${results[0]}"
for line in "${results[@]}"; do
  awk -v b="$base" -v l="$line" 'BEGIN {
    split(b, x, " +"); split(l, y, " +")
    printf "groups %s: throughput %.2fx, p99 %.2fx, CPU per write %.2fx of groups %s\n", y[1], y[2] / x[2], y[3] / x[3], y[5] / x[5], x[1]
  }'
done
