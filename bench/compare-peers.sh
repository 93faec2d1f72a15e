#!/usr/bin/env bash
# One sitting, side by side: etcd, ZooKeeper and Idem, each three servers on loopback, one system after the other,
# the same put workload (100-byte values) through `idem bench`:
#   1. each system's closed-loop peak (--sessions x --window, as bench/compare-etcd.sh);
#   2. open-loop runs (`--rate`) at 25%, 50% and 75% of etcd's peak, on etcd, ZooKeeper and Idem;
#   3. Idem alone, open loop, at 50% and 75% of its own peak.
# Then linearizable reads (`--workload get`: etcd's default get, ZooKeeper's sync then getData, Idem's get) of 100
# keys written before each run, each system on a new cluster: etcd's and Idem's closed-loop read peaks, and open
# loops at 25%, 50% and 75% of etcd's read peak on all three (--no-reads skips them).
# Each new cluster first takes --settle (90 s) of the same closed-loop workload (put for ZooKeeper's reads, which
# have no closed loop here), not recorded, so that no measured run falls in the JVM servers' first minutes, while
# the JIT compiler takes a third of their CPU (docs/PERFORMANCE.md, "Warm-up"); etcd gets the same.
# --settle 0s skips it.
# Every run reports the servers' CPU-us per operation (/proc, over the measured window) and writes its latency per
# second to --out/timelines/N-target-workload.csv (`idem bench --timeline`). At the end: one table and
# a PNG plot of p99 against rate per system for writes, and one of each for reads (`idem bench-plot`), all in --out.
# Installs etcd-server and zookeeper from Debian packages if they are missing.
#
#   bench/compare-peers.sh [--sessions 256] [--window 1] [--duration 30s] [--warmup 30s] [--settle 90s]
#                          [--value-size 100] [--no-reads] [--out bench/out/compare-peers]
#
# Environment: IDEM_JAVA_OPTS (JVM flags of the Idem servers and the bench, see ./idem),
# KEEP_DATA=1 keeps the data directories (under $TMPDIR) for inspection.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sessions=256 window=1 duration=30s warmup=30s settle=90s value_size=100 reads=1 out="$root/bench/out/compare-peers"
while [ $# -gt 0 ]; do
  case "$1" in
    --sessions) sessions="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --settle) settle="$2"; shift 2 ;;
    --value-size) value_size="$2"; shift 2 ;;
    --no-reads) reads=0; shift ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "compare-peers: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

etcd_ports=(2379 22379 32379) etcd_peer_ports=(2380 22380 32380)
zk_ports=(2181 22181 32181) zk_quorum_ports=(2888 22888 32888) zk_election_ports=(3888 23888 33888)
idem_ports=(7001 7011 7021) idem_raft_ports=(7002 7012 7022)
name=compare-peers
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
ports_free "${etcd_ports[@]}" "${etcd_peer_ports[@]}" "${zk_ports[@]}" "${zk_quorum_ports[@]}" \
  "${zk_election_ports[@]}" "${idem_ports[@]}" "${idem_raft_ports[@]}"

install_missing etcd etcd-server
install_missing /usr/share/java/zookeeper.jar zookeeper

# Build the idem jar now (first run), not inside a measurement.
"$root/idem" --version > /dev/null
mkdir -p "$out"
results="$out/runs.jsonl" read_results="$out/reads.jsonl"
: > "$results"
: > "$read_results"
rm -rf "$out/timelines"
mkdir -p "$out/timelines"
runs=0

bench() { # target, servers, label, then extra options of idem bench (--rate R)
  run_bench put "$results" "$@"
}
bench_reads() { # as bench, for the get workload
  run_bench get "$read_results" "$@"
}
run_bench() { # workload, results file, target, servers, label, then extra options of idem bench
  local workload="$1" into="$2" target="$3" servers="$4" label="$5"
  shift 5
  runs=$((runs + 1))
  echo "-- $target $workload $label (timeline: $out/timelines/$runs-$target-$workload.csv)" >&2
  "$root/idem" bench --target "$target" --servers "$servers" --sessions "$sessions" --window "$window" \
    --workload "$workload" --value-size "$value_size" --duration "$duration" --warmup "$warmup" \
    --timeline "$out/timelines/$runs-$target-$workload.csv" \
    --cpu-pids "$(IFS=,; echo "${pids[*]}")" "$@" > "$work/run.out" || true
  tail -n 4 "$work/run.out" | grep -v '^{' >&2 || true
  local json
  json="$(grep '^{"target"' "$work/run.out" | tail -n 1)"
  if [ -z "$json" ]; then
    echo "compare-peers: $target $workload $label printed no result; its output:" >&2
    cat "$work/run.out" >&2
    exit 1
  fi
  echo "$json" >> "$into"
  peak="$(sed -n 's/.*"ops_per_s":\([0-9.]*\).*/\1/p' <<< "$json")"
}
settle() { # workload, target, servers, then extra options of idem bench: load a new cluster, not recorded
  local workload="$1" target="$2" servers="$3"
  shift 3
  if [ "${settle%s}" = 0 ]; then return 0; fi
  echo "-- $target $workload: settling for $settle (not recorded)" >&2
  "$root/idem" bench --target "$target" --servers "$servers" --sessions "$sessions" --window "$window" \
    --workload "$workload" --value-size "$value_size" --duration "$settle" --warmup 1s "$@" \
    > "$work/settle.out" 2>&1 || true
}
pct() { awk -v p="$1" -v x="$2" 'BEGIN { printf "%d", p * x / 100 }'; }

start_zookeeper() { # a new 3-server ensemble; sets zk_servers
  local i j conf data p zk_version
  rm -rf "$work/zk"
  zk_version="$(dpkg-query -W -f '${Version}' zookeeper 2> /dev/null || true)"
  echo "== zookeeper ${zk_version:-?}, 3 servers on loopback, data in $work" >&2
  for i in 0 1 2; do
    conf="$work/zk/conf$i" data="$work/zk/data$i"
    mkdir -p "$conf" "$data"
    echo $((i + 1)) > "$data/myid"
    {
      echo "tickTime=2000"
      echo "initLimit=10"
      echo "syncLimit=5"
      echo "dataDir=$data"
      echo "clientPortAddress=127.0.0.1"
      echo "clientPort=${zk_ports[$i]}"
      echo "maxClientCnxns=0"
      echo "admin.enableServer=false"
      for j in 0 1 2; do echo "server.$((j + 1))=127.0.0.1:${zk_quorum_ports[$j]}:${zk_election_ports[$j]}"; done
    } > "$conf/zoo.cfg"
    # As Debian's zkServer.sh runs it: the jar's manifest names the libraries it needs (with no logging back end).
    java -cp "$conf:/usr/share/java/zookeeper.jar" \
      org.apache.zookeeper.server.quorum.QuorumPeerMain "$conf/zoo.cfg" > "$work/zk-$i.log" 2>&1 &
    pids+=($!)
  done
  for p in "${zk_ports[@]}"; do wait_port "$p" 60; done
  zk_servers="127.0.0.1:${zk_ports[0]},127.0.0.1:${zk_ports[1]},127.0.0.1:${zk_ports[2]}"
}

start_idem() { # a new 3-node cluster; sets idem_servers
  local n p peers="n1=127.0.0.1:7002:7001,n2=127.0.0.1:7012:7011,n3=127.0.0.1:7022:7021"
  rm -rf "$work/idem"
  echo "== idem, 3 idem server processes on loopback, data in $work" >&2
  for n in n1 n2 n3; do
    "$root/idem" server --id "$n" --data-dir "$work/idem/$n" --peers "$peers" > "$work/idem-$n.log" 2>&1 &
    pids+=($!)
  done
  for p in "${idem_ports[@]}"; do wait_port "$p" 60; done
  idem_servers="127.0.0.1:7001,127.0.0.1:7011,127.0.0.1:7021"
}

# Writes. Each system runs on a new cluster, and its reads below on another new one, so that neither inherits the
# other's data (etcd keeps every revision of the writes until compacted).
start_etcd
settle put etcd "$etcd_servers"
bench etcd "$etcd_servers" "closed-loop peak"
etcd_peak="$peak"
rates=("$(pct 25 "$etcd_peak")" "$(pct 50 "$etcd_peak")" "$(pct 75 "$etcd_peak")")
for r in "${rates[@]}"; do bench etcd "$etcd_servers" "open loop at $r/s" --rate "$r"; done
stop_all

start_zookeeper
settle put zookeeper "$zk_servers" --timeout 60s
bench zookeeper "$zk_servers" "closed-loop peak" --timeout 60s
for r in "${rates[@]}"; do bench zookeeper "$zk_servers" "open loop at $r/s" --rate "$r"; done
stop_all

start_idem
settle put idem "$idem_servers"
bench idem "$idem_servers" "closed-loop peak"
idem_peak="$peak"
for r in "${rates[@]}"; do bench idem "$idem_servers" "open loop at $r/s" --rate "$r"; done
for p in 50 75; do
  r="$(pct "$p" "$idem_peak")"
  bench idem "$idem_servers" "open loop at $r/s ($p% of its own peak)" --rate "$r"
done
stop_all

if [ "$reads" = 1 ]; then
  start_etcd
  settle get etcd "$etcd_servers"
  bench_reads etcd "$etcd_servers" "closed-loop peak"
  etcd_read_peak="$peak"
  read_rates=("$(pct 25 "$etcd_read_peak")" "$(pct 50 "$etcd_read_peak")" "$(pct 75 "$etcd_read_peak")")
  for r in "${read_rates[@]}"; do bench_reads etcd "$etcd_servers" "open loop at $r/s" --rate "$r"; done
  stop_all

  start_zookeeper
  settle put zookeeper "$zk_servers" --timeout 60s # its reads have no closed loop here
  for r in "${read_rates[@]}"; do
    bench_reads zookeeper "$zk_servers" "open loop at $r/s" --rate "$r" --timeout 60s
  done
  stop_all

  start_idem
  settle get idem "$idem_servers"
  bench_reads idem "$idem_servers" "closed-loop peak"
  for r in "${read_rates[@]}"; do bench_reads idem "$idem_servers" "open loop at $r/s" --rate "$r"; done
  stop_all
fi

"$root/idem" bench-plot --png "$out/p99-vs-rate.png" \
  --title "p99 against offered rate: etcd, ZooKeeper, Idem; 3 servers each on loopback, 2 cores" \
  "$results" | tee "$out/table.md"
if [ "$reads" = 1 ]; then
  "$root/idem" bench-plot --png "$out/p99-reads-vs-rate.png" \
    --title "p99 of linearizable reads against offered rate; 3 servers each on loopback, 2 cores" \
    "$read_results" | tee "$out/reads-table.md"
fi
echo "compare-peers: runs in $results and $read_results, tables and plots (p99-*.png) in $out" >&2
