#!/usr/bin/env bash
# Server CPU per write of two builds, alternating: a baseline (--baseline JAR) and this one (./idem's jar), each on
# a new 3-process cluster on loopback per run, under the closed-loop put workload of compare-peers.sh (256 sessions
# x window 1, 100-byte values). Each cluster gets two measured runs:
#   early: 30 s warm-up, then 30 s measured, from the servers' start (compare-peers.sh's first run);
#   late:  the next bench on the same cluster, --late-warmup (60 s) then --late-duration (60 s) measured, when the
#          JIT compiler has mostly settled (docs/PERFORMANCE.md, "Warm-up").
# The load generator is this build's idem bench for both, so only the servers differ (a baseline older than
# --cpu-pids works too). The builds alternate (this build first in odd rounds). Prints each run's line and, per
# regime, each build's summed writes/s and its CPU-us per write over all its runs (servers' CPU from /proc,
# --cpu-pids), and the ratios.
#
#   bench/cpu-ab.sh --baseline JAR [--rounds 2] [--late-warmup 60s] [--late-duration 60s]
#
# Build a baseline with: git worktree add /tmp/base <commit> && (cd /tmp/base && ./mvnw -q package -DskipTests
# -pl idem-lab -am), then pass /tmp/base/idem-lab/target/idem.jar. Environment: IDEM_JAVA_OPTS (JVM flags of the
# servers and the bench, as for ./idem), KEEP_DATA=1 keeps the data directories.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds=2 late_warmup=60s late_duration=60s baseline=""
while [ $# -gt 0 ]; do
  case "$1" in
    --baseline) baseline="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --late-warmup) late_warmup="$2"; shift 2 ;;
    --late-duration) late_duration="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "cpu-ab: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$baseline" ] || [ ! -f "$baseline" ]; then
  echo "cpu-ab: --baseline JAR is required and must exist (see --help)" >&2
  exit 2
fi
name=cpu-ab
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
ports_free 7001 7002 7011 7012 7021 7022
"$root/idem" --version > /dev/null # build this jar now, not inside a measurement
current="$root/idem-lab/target/idem.jar"
jvm=(java ${IDEM_JAVA_OPTS--XX:+UseG1GC -XX:MaxGCPauseMillis=20} -jar)
servers="127.0.0.1:7001,127.0.0.1:7011,127.0.0.1:7021"
results="$work/results"

run() { # label, jar
  local label="$1" jar="$2" n peers="n1=127.0.0.1:7002:7001,n2=127.0.0.1:7012:7011,n3=127.0.0.1:7022:7021"
  rm -rf "$work/idem"
  for n in n1 n2 n3; do
    "${jvm[@]}" "$jar" server --id "$n" --data-dir "$work/idem/$n" --peers "$peers" > "$work/$label-$n.log" 2>&1 &
    pids+=($!)
  done
  for p in 7001 7011 7021; do wait_port "$p" 60; done
  local cpu
  cpu="$(IFS=,; echo "${pids[*]}")"
  for regime in early late; do
    local w=30s d=30s line
    if [ "$regime" = late ]; then w="$late_warmup" d="$late_duration"; fi
    line="$("${jvm[@]}" "$current" bench --servers "$servers" --workload put --sessions 256 --window 1 \
      --value-size 100 --warmup "$w" --duration "$d" --cpu-pids "$cpu" | tail -n 1)"
    echo "$label $regime $line"
    echo "$label $regime $line" >> "$results"
  done
  stop_all
}

for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) = 1 ]; then
    run this "$current"; run baseline "$baseline"
  else
    run baseline "$baseline"; run this "$current"
  fi
done

for regime in early late; do
  awk -v regime="$regime" '$2 == regime {
      ops = $0; sub(/.*"ops":/, "", ops); sub(/,.*/, "", ops)
      secs = $0; sub(/.*"seconds":/, "", secs); sub(/,.*/, "", secs)
      cpu = $0; sub(/.*"server_cpu_us_per_op":/, "", cpu); sub(/[,}].*/, "", cpu)
      o[$1] += ops; s[$1] += secs; c[$1] += cpu * ops }
    END {
      for (b in o) printf "%s %s: %.0f writes/s, %.1f server CPU-us per write\n", regime, b, o[b] / s[b], c[b] / o[b]
      if (o["this"] > 0 && o["baseline"] > 0)
        printf "%s: this/baseline CPU per write %.3f, writes/s %.3f\n", regime,
          (c["this"] / o["this"]) / (c["baseline"] / o["baseline"]), (o["this"] / s["this"]) / (o["baseline"] / s["baseline"])
    }' "$results"
done
