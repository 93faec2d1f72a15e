#!/usr/bin/env bash
# Where the servers' CPU goes per write, by thread kind, for one group count: a fresh 3-node Idem cluster
# (idem server --groups G) on loopback under the closed-loop put workload (idem bench); over a 10 s window after the
# warm-up, each server thread's CPU from /proc (named through jstack: /proc keeps 15 characters of a name), summed
# by kind (digits and group ids folded), in CPU-µs per acknowledged write (and how much of it was system time: fsync,
# sockets, futex wake-ups, page faults), and the log entries the nodes applied.
#
#   bench/groups-threads.sh [--groups G] [--sessions N] [--window N] [--warmup 15s]
#
# Environment: IDEM_JAVA_OPTS (JVM flags of the servers and the bench, see ./idem), KEEP_DATA=1 keeps the data.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
groups=4 sessions=64 window=32 warmup=15s
while [ $# -gt 0 ]; do
  case "$1" in
    --groups) groups="$2"; shift 2 ;;
    --sessions) sessions="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "groups-threads: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
name=groups-threads
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
ports_free 7001 7002 7011 7012 7021 7022 7091 7092 7093
"$root/idem" --version > /dev/null # build the jar now, not inside a measurement

peers="n1=127.0.0.1:7002:7001,n2=127.0.0.1:7012:7011,n3=127.0.0.1:7022:7021"
i=1
for n in n1 n2 n3; do
  "$root/idem" server --id "$n" --data-dir "$work/$n" --peers "$peers" --groups "$groups" \
    --admin-address "127.0.0.1:709$i" > "$work/$n.log" 2>&1 &
  pids+=($!)
  i=$((i + 1))
done
for p in 7001 7011 7021; do wait_port "$p" 90; done
servers=("${pids[@]}")
window_s=10
"$root/idem" bench --servers "127.0.0.1:7001,127.0.0.1:7011,127.0.0.1:7021" --sessions "$sessions" \
  --window "$window" --workload put --duration "$(( window_s + 10 ))s" --warmup "$warmup" > "$work/bench.out" 2>&1 &
bench_pid=$!
pids+=("$bench_pid")

threads() { # pid-tid, user ticks, system ticks of every thread of the servers: one awk over /proc, quick under load
  local pid
  for pid in "${servers[@]}"; do
    awk -v pid="$pid" 'FNR == 1 { split(FILENAME, p, "/"); line = $0; sub(/^.*\) /, "", line); split(line, f, " ")
      print pid "-" p[5], f[12], f[13] }' /proc/"$pid"/task/*/stat 2> /dev/null
  done | sort
}
applied() { # log entries applied, summed over the three nodes and their groups
  local s=0 port
  for port in 7091 7092 7093; do
    s=$(( s + $(curl -s "127.0.0.1:$port/metrics" | awk 'index($1, "idem_entry_commands_count") == 1 {s += $2} END {printf "%d", s}') ))
  done
  echo "$s"
}
sleep $(( ${warmup%s} + 3 ))
e0="$(applied)"
s0="$(date +%s.%N)"
threads > "$work/t0"
sleep "$window_s"
threads > "$work/t1"
s1="$(date +%s.%N)"
e1="$(applied)"
for pid in "${servers[@]}"; do # thread id -> full name
  jstack "$pid" | sed -n 's/^"\([^"]*\)".* nid=0x\([0-9a-f]*\).*/\2 \1/p' | while read -r hex nm; do
    echo "$pid-$((16#$hex)) ${nm// /_}"
  done
done | sort > "$work/names"
wait "$bench_pid"
rate="$(sed -n 's/.*"ops_per_s":\([0-9.]*\).*/\1/p' "$work/bench.out" | tail -n 1)"
echo "groups $groups: $(tail -n 1 "$work/bench.out")"
awk -v e="$(( e1 - e0 ))" -v a="$s0" -v b="$s1" -v r="$rate" 'BEGIN {
  secs = b - a; printf "applied entries per node and second: %.0f (all groups); commands per entry: %.1f\n", e / 3 / secs, r * secs / (e / 3) }'
join "$work/t0" "$work/t1" | join -a 1 - "$work/names" > "$work/joined"
hz="$(getconf CLK_TCK)"
w="$(awk -v a="$s0" -v b="$s1" 'BEGIN {print b - a}')" # the window as it ran
# joined: pid-tid, user and system ticks before, user and system ticks after, name
awk -v r="$rate" -v hz="$hz" -v w="$w" '{ t += $4 - $2 + $5 - $3; k += $5 - $3 } END {
  printf "server CPU: %.2f cores, %.1f CPU-us per write (%.1f of it in the kernel)\n", t / hz / w, t / hz * 1e6 / (r * w),
    k / hz * 1e6 / (r * w) }' "$work/joined"
awk -v r="$rate" -v hz="$hz" -v w="$w" '
  { n = (NF >= 6) ? $6 : "?"; gsub(/group-[0-9A-F]+/, "group-G", n); gsub(/[0-9]+/, "#", n)
    d[n] += $4 - $2 + $5 - $3; s[n] += $5 - $3; t += $4 - $2 + $5 - $3 }
  END { for (k in d) if (d[k] > 0)
    printf "%8.1f us/write %5.1f%%  (kernel %4.1f)  %s\n", d[k] / hz * 1e6 / (r * w), 100 * d[k] / t, s[k] / hz * 1e6 / (r * w), k }' \
  "$work/joined" | sort -rn | head -n 16
