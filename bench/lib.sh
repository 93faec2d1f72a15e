# Shared by the bench scripts (source it): a work directory, the processes started into `pids`, stopped by PID on
# exit, and a wait for a loopback port. The script sets `name` (its name in messages) before sourcing this.

# Fails if any of the given loopback ports is in use.
ports_free() {
  local p
  for p in "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$name: port $p on 127.0.0.1 is in use; stop what listens there first" >&2
      exit 1
    fi
  done
}

work="$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX")"
pids=()
stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2> /dev/null || true; done
  pids=()
}
cleanup() {
  stop_all
  if [ "${KEEP_DATA:-0}" != 1 ]; then rm -rf "$work"; fi
}
trap cleanup EXIT

wait_port() { # port, seconds
  for _ in $(seq 1 $(( $2 * 10 ))); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2> /dev/null; then return 0; fi
    sleep 0.1
  done
  echo "$name: nothing listens on 127.0.0.1:$1 after $2 s" >&2
  return 1
}

# Installs a Debian package when a command (or file) it provides is missing: install_missing etcd etcd-server.
install_missing() {
  if ! command -v "$1" > /dev/null && [ ! -e "$1" ]; then
    echo "$name: installing $2 from Debian packages..." >&2
    local sudo_cmd=""
    if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
    $sudo_cmd apt-get update -qq > /dev/null
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "$2" > /dev/null
  fi
}

# Starts a new 3-member etcd on loopback (client ports from the array etcd_ports, peer ports from etcd_peer_ports,
# data under $work/etcd, emptied first), adds the PIDs to `pids`, waits until every member listens, and sets
# etcd_servers.
start_etcd() {
  local etcd_bin cluster="" i p
  rm -rf "$work/etcd"
  etcd_bin="$(command -v etcd)"
  echo "== etcd $("$etcd_bin" --version | head -1 | awk '{print $3}'), 3 members on loopback, data in $work" >&2
  for i in 0 1 2; do cluster+="e$i=http://127.0.0.1:${etcd_peer_ports[$i]},"; done
  for i in 0 1 2; do
    "$etcd_bin" --name "e$i" --data-dir "$work/etcd/e$i" \
      --listen-client-urls "http://127.0.0.1:${etcd_ports[$i]}" \
      --advertise-client-urls "http://127.0.0.1:${etcd_ports[$i]}" \
      --listen-peer-urls "http://127.0.0.1:${etcd_peer_ports[$i]}" \
      --initial-advertise-peer-urls "http://127.0.0.1:${etcd_peer_ports[$i]}" \
      --initial-cluster "${cluster%,}" --initial-cluster-state new --initial-cluster-token "$name" \
      --logger zap --log-outputs stderr --log-level warn > "$work/etcd-e$i.log" 2>&1 &
    pids+=($!)
  done
  for p in "${etcd_ports[@]}"; do wait_port "$p" 30; done
  etcd_servers="127.0.0.1:${etcd_ports[0]},127.0.0.1:${etcd_ports[1]},127.0.0.1:${etcd_ports[2]}"
}
