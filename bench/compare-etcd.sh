#!/usr/bin/env bash
# Side by side: the same closed-loop put workload (256 sessions x window 1, 100-byte values) against
# a 3-node etcd and a 3-node Idem, each on loopback, one after the other on this machine; prints
# both results and the ratio. Installs etcd-server from Debian packages if it is missing.
#
#   bench/compare-etcd.sh [--sessions N] [--window N] [--duration 30s] [--warmup 30s] [--value-size 100]
#
# Environment: IDEM_JAVA_OPTS (JVM flags of the Idem servers and the bench, see ./idem),
# KEEP_DATA=1 keeps the data directories (under $TMPDIR) for inspection.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sessions=256 window=1 duration=30s warmup=30s value_size=100
while [ $# -gt 0 ]; do
  case "$1" in
    --sessions) sessions="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --value-size) value_size="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "compare-etcd: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

etcd_ports=(2379 22379 32379) etcd_peer_ports=(2380 22380 32380)
idem_ports=(7001 7011 7021) idem_raft_ports=(7002 7012 7022)
name=compare-etcd
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
ports_free "${etcd_ports[@]}" "${etcd_peer_ports[@]}" "${idem_ports[@]}" "${idem_raft_ports[@]}"

install_missing etcd etcd-server

# Build the idem jar now (first run), not inside a measurement.
"$root/idem" --version > /dev/null

bench() { # target, servers
  "$root/idem" bench --target "$1" --servers "$2" --sessions "$sessions" --window "$window" \
    --workload put --value-size "$value_size" --duration "$duration" --warmup "$warmup" \
    | tee "$work/$1.out" | tail -n 3 >&2
  tail -n 1 "$work/$1.out"
}

start_etcd
etcd_json="$(bench etcd "$etcd_servers")"
stop_all

echo "== idem, 3 idem server processes on loopback, data in $work" >&2
peers="n1=127.0.0.1:7002:7001,n2=127.0.0.1:7012:7011,n3=127.0.0.1:7022:7021"
for n in n1 n2 n3; do
  "$root/idem" server --id "$n" --data-dir "$work/idem/$n" --peers "$peers" > "$work/idem-$n.log" 2>&1 &
  pids+=($!)
done
for p in "${idem_ports[@]}"; do wait_port "$p" 60; done
idem_json="$(bench idem "127.0.0.1:7001,127.0.0.1:7011,127.0.0.1:7021")"
stop_all

rate() { sed -n 's/.*"ops_per_s":\([0-9.]*\).*/\1/p' <<< "$1"; }
p99() { sed -n 's/.*"p99_ms":\([0-9.]*\).*/\1/p' <<< "$1"; }
etcd_rate="$(rate "$etcd_json")" idem_rate="$(rate "$idem_json")"
echo "etcd: $etcd_json"
echo "idem: $idem_json"
awk -v e="$etcd_rate" -v i="$idem_rate" -v ep="$(p99 "$etcd_json")" -v ip="$(p99 "$idem_json")" 'BEGIN {
  printf "etcd %.0f writes/s (p99 %.1f ms), idem %.0f exactly-once writes/s (p99 %.1f ms): idem/etcd = %.2fx\n", e, ep, i, ip, (e > 0 ? i / e : 0)
}'
