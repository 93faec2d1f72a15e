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
