#!/usr/bin/env bash
# What access control costs: compare-etcd.sh's Idem half (3 `idem server` processes on loopback, the closed-loop
# put workload, 256 sessions x window 1, 100-byte values) over mutual TLS, with access control on (the bench's
# principal holds a role with read-write on every KV key, so every put is checked against its grants) and off
# (--no-auth), in alternating rounds (on first in odd rounds, off first in even ones), a new cluster each. Prints
# each round and the ratio of the summed rates.
# The certificates are made with openssl in the work directory.
#
#   bench/auth-cost.sh [--rounds 3] [--sessions N] [--window N] [--duration 30s] [--warmup 30s] [--value-size 100]
#
# Environment: IDEM_JAVA_OPTS (JVM flags of the Idem servers and the bench, see ./idem),
# KEEP_DATA=1 keeps the data directories (under $TMPDIR) for inspection.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds=3 sessions=256 window=1 duration=30s warmup=30s value_size=100
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --sessions) sessions="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --value-size) value_size="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "auth-cost: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

idem_ports=(7001 7011 7021) idem_raft_ports=(7002 7012 7022)
name=auth-cost
. "$root/bench/lib.sh"
ports_free "${idem_ports[@]}" "${idem_raft_ports[@]}"
"$root/idem" --version > /dev/null

certs="$work/certs"
mkdir -p "$certs"
ssl() { openssl "$@" >> "$certs/openssl.log" 2>&1; }
ssl req -x509 -newkey rsa:2048 -nodes -keyout "$certs/ca.key" -out "$certs/ca.pem" -days 2 -subj "/CN=auth-cost ca"
echo "subjectAltName=IP:127.0.0.1,DNS:localhost" > "$certs/san.ext"
for who in node admin bench; do
  ssl req -newkey rsa:2048 -nodes -keyout "$certs/$who.key" -out "$certs/$who.csr" -subj "/CN=$who"
  ssl x509 -req -in "$certs/$who.csr" -CA "$certs/ca.pem" -CAkey "$certs/ca.key" -CAcreateserial \
    -out "$certs/$who.pem" -days 2 -extfile "$certs/san.ext"
done
tls() { echo --tls-ca "$certs/ca.pem" --tls-cert "$certs/$1.pem" --tls-key "$certs/$1.key"; }
servers="127.0.0.1:7001,127.0.0.1:7011,127.0.0.1:7021"

round() { # on|off, round number
  local mode="$1" dir="$work/idem-$1-$2"
  local peers="n1=127.0.0.1:7002:7001,n2=127.0.0.1:7012:7011,n3=127.0.0.1:7022:7021"
  local auth=(--auth-admin CN=admin)
  if [ "$mode" = off ]; then auth=(--no-auth); fi
  for n in n1 n2 n3; do
    "$root/idem" server --id "$n" --data-dir "$dir/$n" --peers "$peers" \
      --tls-cert "$certs/node.pem" --tls-key "$certs/node.key" --tls-ca "$certs/ca.pem" \
      --peer-allow CN=node "${auth[@]}" > "$dir-$n.log" 2>&1 &
    pids+=($!)
  done
  for p in "${idem_ports[@]}"; do wait_port "$p" 60; done
  if [ "$mode" = on ]; then
    # shellcheck disable=SC2046
    "$root/idem" auth role put writer --kv-write "" --servers "$servers" --timeout 30s $(tls admin) > /dev/null
    # shellcheck disable=SC2046
    "$root/idem" auth grant CN=bench writer --servers "$servers" --timeout 30s $(tls admin) > /dev/null
  fi
  # shellcheck disable=SC2046
  "$root/idem" bench --target idem --servers "$servers" $(tls bench) --sessions "$sessions" \
    --window "$window" --workload put --value-size "$value_size" --duration "$duration" --warmup "$warmup" \
    > "$dir.out"
  stop_all
  tail -n 1 "$dir.out"
}

rate() { sed -n 's/.*"ops_per_s":\([0-9.]*\).*/\1/p' <<< "$1"; }
p99() { sed -n 's/.*"p99_ms":\([0-9.]*\).*/\1/p' <<< "$1"; }
sum_on=0 sum_off=0
for r in $(seq 1 "$rounds"); do
  order="on off"
  if [ $(( r % 2 )) = 0 ]; then order="off on"; fi
  for mode in $order; do
    json="$(round "$mode" "$r")"
    echo "round $r auth $mode: $(rate "$json") writes/s, p99 $(p99 "$json") ms  $json"
    if [ "$mode" = on ]; then sum_on="$(awk -v a="$sum_on" -v b="$(rate "$json")" 'BEGIN{print a+b}')"
    else sum_off="$(awk -v a="$sum_off" -v b="$(rate "$json")" 'BEGIN{print a+b}')"; fi
  done
done
awk -v on="$sum_on" -v off="$sum_off" -v n="$rounds" 'BEGIN {
  printf "auth on %.0f writes/s, auth off %.0f writes/s (mean of %d rounds each): on/off = %.3f\n", on / n, off / n, n, (off > 0 ? on / off : 0)
}'
