#!/usr/bin/env bash
# What the accounting of quotas and the backend budget costs (issue 32): two builds side by side, the one without
# quotas (--baseline JAR) and this one (./idem), each on 3 `idem server` processes on loopback, plaintext (so every
# command is charged to the one anonymous principal), a new cluster per run. Per round: the put workload (256
# sessions x window 1, 100-byte values, as compare-etcd.sh) and the keys workload (16 x 6, as keys-target.sh), the
# builds alternating (this build first in odd rounds, the baseline first in even ones). Prints each run and, per
# workload, the ratio of the summed rates (this build / the baseline).
# This build's clusters are bootstrapped with key quotas above what the keys workload holds (as keys-target.sh does),
# so no run is refused; the accounting runs on every command all the same.
#
#   bench/quota-cost.sh --baseline JAR [--rounds 3] [--duration 30s] [--warmup 30s]
#
# Build a baseline with: git worktree add /tmp/base <commit> && (cd /tmp/base && ./mvnw -q package -DskipTests
# -pl idem-lab -am) and pass /tmp/base/idem-lab/target/idem.jar (idem-cli/target/idem.jar before the lab split). Environment: IDEM_JAVA_OPTS (JVM flags of the
# servers and the bench, as for ./idem), KEEP_DATA=1 keeps the data directories.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds=3 duration=30s warmup=30s baseline=""
while [ $# -gt 0 ]; do
  case "$1" in
    --baseline) baseline="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "quota-cost: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$baseline" ] || [ ! -f "$baseline" ]; then
  echo "quota-cost: --baseline JAR (the build without quotas) is required, and must exist" >&2
  exit 2
fi

idem_ports=(7001 7011 7021) raft_ports=(7002 7012 7022)
name=quota-cost
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
ports_free "${idem_ports[@]}" "${raft_ports[@]}"
"$root/idem" --version > /dev/null # build now, not inside a measurement
jvm=(java ${IDEM_JAVA_OPTS--XX:+UseG1GC -XX:MaxGCPauseMillis=20} -jar)
servers="127.0.0.1:7001,127.0.0.1:7011,127.0.0.1:7021"
peers="n1=127.0.0.1:7002:7001,n2=127.0.0.1:7012:7011,n3=127.0.0.1:7022:7021"

run() { # build (quotas|baseline), workload (put|keys), round
  local build="$1" workload="$2" dir="$work/$1-$2-$3" cmd quotas=() shape=()
  if [ "$build" = quotas ]; then
    cmd=("$root/idem")
    quotas=(--quota key_records=2000000 --quota key_bytes=1GiB)
  else
    cmd=("${jvm[@]}" "$baseline")
  fi
  if [ "$workload" = put ]; then
    shape=(--sessions 256 --window 1 --value-size 100)
  else
    shape=(--sessions 16 --window 6)
  fi
  for n in n1 n2 n3; do
    "${cmd[@]}" server --id "$n" --data-dir "$dir/$n" --peers "$peers" "${quotas[@]}" > "$dir-$n.log" 2>&1 &
    pids+=($!)
  done
  for p in "${idem_ports[@]}"; do wait_port "$p" 60; done
  "${cmd[@]}" bench --servers "$servers" --workload "$workload" "${shape[@]}" --duration "$duration" \
    --warmup "$warmup" > "$dir.out" 2>&1 || true
  stop_all
  grep '^{' "$dir.out" | tail -n 1
}

field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" <<< "$2"; }
declare -A sum
for w in put keys; do sum[quotas-$w]=0; sum[baseline-$w]=0; done
for r in $(seq 1 "$rounds"); do
  order="quotas baseline"
  if [ $(( r % 2 )) = 0 ]; then order="baseline quotas"; fi
  for w in put keys; do
    for b in $order; do
      json="$(run "$b" "$w" "$r")"
      if [ -z "$json" ] || [ "$(field errors "$json")" != 0 ]; then
        echo "quota-cost: round $r, $b, $w: the bench failed or had errors: ${json:-no result} (see $work)" >&2
        KEEP_DATA=1
        exit 1
      fi
      echo "round $r $w $b: $(field ops_per_s "$json") ops/s, p99 $(field p99_ms "$json") ms  $json"
      sum[$b-$w]="$(awk -v a="${sum[$b-$w]}" -v b="$(field ops_per_s "$json")" 'BEGIN{print a+b}')"
    done
  done
done
for w in put keys; do
  awk -v q="${sum[quotas-$w]}" -v b="${sum[baseline-$w]}" -v n="$rounds" -v w="$w" 'BEGIN {
    printf "%s: with quotas %.0f ops/s, baseline %.0f ops/s (mean of %d runs each): quotas/baseline = %.3f\n",
      w, q / n, b / n, n, (b > 0 ? q / b : 0)
  }'
done
