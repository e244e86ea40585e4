#!/usr/bin/env bash
# Turnout on several "hosts": each process in its own network namespace.
#
#   sudo bench/multihost/run.sh            (REQUESTS=50 by default)
#
# Creates the network namespaces tn-redis, tn-sim, tn-ingress, tn-w1, tn-w2,
# each with one veth (eth0) plugged into a bridge that lives in a sixth
# namespace, tn-net. The test range 10.213.0.0/24 exists only on those veths:
# nothing is added to the host's own namespace, no namespace has a route out,
# so every packet of the run stays between the run's own namespaces.
#
#   tn-redis    10.213.0.10  redis-server (AOF on)
#   tn-sim      10.213.0.11  turnout sim (the upstream provider)
#   tn-ingress  10.213.0.20  turnout ingress; the openai SDK client runs here too
#   tn-w1       10.213.0.31  turnout worker (metrics on :9464)
#   tn-w2       10.213.0.32  turnout worker (metrics on :9464)
#
# Then it sends REQUESTS (default 50) chat completions with the official
# openai SDK from tn-ingress, in two halves: the first half shows that both
# workers serve jobs (their own /metrics); during the second half worker 2 is
# SIGKILLed with jobs in flight, and every request must still succeed (worker
# 1 re-runs the orphaned jobs once their lease expires). Prints a summary;
# exits 0 only when every check held. The namespaces and every process it
# started are removed on exit, whatever happens (trap).
#
# Needs root and iproute2 (`ip`; installed with apt-get when missing),
# redis-server, and a Python with Turnout's dependencies (PYTHON=..., default:
# the checkout's .venv, else python3). Logs are removed after a passing run
# and kept (path printed) after a failing one, or always with KEEP_LOGS=1.

set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
REQUESTS="${REQUESTS:-50}"
NET="10.213.0"
BRIDGE_NS="tn-net"
# namespace:host-octet
HOSTS=("tn-redis:10" "tn-sim:11" "tn-ingress:20" "tn-w1:31" "tn-w2:32")
KEY="tk-multihost-0000000000001"

if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$REPO/.venv/bin/python" ]]; then PYTHON="$REPO/.venv/bin/python"; else PYTHON="$(command -v python3)"; fi
fi

die() { echo "multihost: $*" >&2; exit 2; }

[[ "$(id -u)" == 0 ]] || die "needs root (network namespaces); run with sudo"
if ! command -v ip >/dev/null 2>&1; then
  echo "multihost: installing iproute2 (ip)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null
fi
command -v ip >/dev/null 2>&1 || die "ip (iproute2) is missing"
REDIS_SERVER="$(command -v redis-server || true)"
[[ -n "$REDIS_SERVER" ]] || die "redis-server is missing (apt-get install -y redis-server)"
"$PYTHON" -c "import turnout_cli, openai" 2>/dev/null \
  || PYTHONPATH="$REPO/libs:$REPO/services" "$PYTHON" -c "import turnout_cli, openai" \
  || die "$PYTHON cannot import turnout and openai (set PYTHON=...)"

for entry in "${HOSTS[@]}" "$BRIDGE_NS:"; do
  ns="${entry%%:*}"
  if ip netns list | awk '{print $1}' | grep -qx "$ns"; then
    die "network namespace $ns already exists (an earlier run still going, or killed?); remove it with: ip netns del $ns"
  fi
done

WORK="$(mktemp -d /tmp/turnout-multihost.XXXXXX)"
PIDS=()
NAMES=()
CREATED_NS=()
CLEANED=0

cleanup() {
  local rc=$?
  [[ "$CLEANED" == 1 ]] && return
  CLEANED=1
  set +e
  local i pid
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    pid="${PIDS[$i]}"
    kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" 2>/dev/null
  done
  for _ in $(seq 1 100); do
    local alive=0
    for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [[ "$alive" == 0 ]] && break
    sleep 0.1
  done
  for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null; done
  for ((i = ${#CREATED_NS[@]} - 1; i >= 0; i--)); do
    ip netns del "${CREATED_NS[$i]}" 2>/dev/null
  done
  if [[ "$rc" == 0 && "${KEEP_LOGS:-0}" != 1 ]]; then
    rm -rf "$WORK"
    echo "multihost: cleaned up (${#PIDS[@]} processes, ${#CREATED_NS[@]} namespaces, logs; KEEP_LOGS=1 keeps them)"
  else
    echo "multihost: cleaned up (${#PIDS[@]} processes, ${#CREATED_NS[@]} namespaces); logs kept in $WORK"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- network: a bridge in tn-net, one veth per host namespace --------------
ip netns add "$BRIDGE_NS"; CREATED_NS+=("$BRIDGE_NS")
ip -n "$BRIDGE_NS" link set lo up
ip -n "$BRIDGE_NS" link add tn-br0 type bridge
ip -n "$BRIDGE_NS" link set tn-br0 up
for entry in "${HOSTS[@]}"; do
  ns="${entry%%:*}"; octet="${entry##*:}"
  ip netns add "$ns"; CREATED_NS+=("$ns")
  ip -n "$ns" link set lo up
  ip -n "$BRIDGE_NS" link add "p-$ns" type veth peer name eth0 netns "$ns"
  ip -n "$BRIDGE_NS" link set "p-$ns" master tn-br0
  ip -n "$BRIDGE_NS" link set "p-$ns" up
  ip -n "$ns" addr add "$NET.$octet/24" dev eth0
  ip -n "$ns" link set eth0 up
done

REDIS_URL="redis://$NET.10:6379/0"
SIM="http://$NET.11:9100"
BASE="http://$NET.20:8080"

# --- processes --------------------------------------------------------------
# start NAME NAMESPACE CMD... : run CMD inside NAMESPACE, output to $WORK/NAME.log
start() {
  local name="$1" ns="$2"; shift 2
  ip netns exec "$ns" env -u OTEL_TRACES_EXPORTER -u OTEL_METRICS_EXPORTER \
    PYTHONPATH="$REPO/libs:$REPO/services${PYTHONPATH:+:$PYTHONPATH}" "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=("$!"); NAMES+=("$name")
  LAST_PID="$!"
  disown "$!"  # no "Killed" job notice for the worker the run kills on purpose
}

drive() {  # drive NAMESPACE ARGS... : the Python driver inside NAMESPACE
  local ns="$1"; shift
  ip netns exec "$ns" env PYTHONPATH="$REPO/libs:$REPO/services${PYTHONPATH:+:$PYTHONPATH}" \
    "$PYTHON" "$HERE/drive.py" "$@"
}

wait_log() {  # wait_log NAME TEXT SECONDS
  local deadline=$((SECONDS + $3))
  until grep -q "$2" "$WORK/$1.log" 2>/dev/null; do
    if ((SECONDS >= deadline)); then echo "--- $WORK/$1.log"; tail -n 30 "$WORK/$1.log"; die "$1 did not log '$2' within $3 s"; fi
    sleep 0.1
  done
}

cat >"$WORK/turnout.yaml" <<EOF
providers:
  sim: {kind: openai_compatible, base_url: "$SIM/v1", api_key: sim-key}
models:
  mh: {offers: [{provider: sim, model: "mh~200+1000ms"}]}
gateway: {job_lease_s: 2, max_queue_depth: 1000}
breaker: {consecutive_failures: 1000000, failure_rate: 2.0}
orgs:
  bench:
    keys: [{name: main, key: $KEY}]
EOF

mkdir -p "$WORK/redis"
start redis tn-redis "$REDIS_SERVER" --bind "$NET.10" --port 6379 --protected-mode no --dir "$WORK/redis" \
  --appendonly yes --appendfsync everysec --save "" --loglevel warning
drive tn-redis wait-tcp "$NET.10" 6379 10

start sim tn-sim "$PYTHON" -m turnout_cli.main sim --host "$NET.11" --port 9100
drive tn-ingress wait-http "$SIM/sim/health" 20

start w1 tn-w1 env TURNOUT_METRICS_HOST="$NET.31" TURNOUT_METRICS_PORT=9464 TURNOUT_DRAIN_S=5 \
  "$PYTHON" -m turnout_cli.main worker --config "$WORK/turnout.yaml" --redis-url "$REDIS_URL"
start w2 tn-w2 env TURNOUT_METRICS_HOST="$NET.32" TURNOUT_METRICS_PORT=9464 TURNOUT_DRAIN_S=5 \
  "$PYTHON" -m turnout_cli.main worker --config "$WORK/turnout.yaml" --redis-url "$REDIS_URL"
W2_PID="$LAST_PID"
start ingress tn-ingress "$PYTHON" -m turnout_cli.main ingress --config "$WORK/turnout.yaml" \
  --redis-url "$REDIS_URL" --host "$NET.20" --port 8080
wait_log w1 "worker ready" 30
wait_log w2 "worker ready" 30
drive tn-ingress wait-http "$BASE/health/readiness" 30

echo "multihost: redis $NET.10  sim $NET.11  ingress $NET.20  workers $NET.31 $NET.32  (logs: $WORK)"

# --- the run ----------------------------------------------------------------
# In the background with `wait`, so a SIGTERM or SIGINT to this script runs
# the cleanup at once instead of after the load finishes.
ip netns exec tn-ingress env PYTHONPATH="$REPO/libs:$REPO/services${PYTHONPATH:+:$PYTHONPATH}" \
  "$PYTHON" "$HERE/drive.py" load --base "$BASE" --key "$KEY" --model mh --requests "$REQUESTS" \
  --sim "$SIM" --upstream-model "mh~200+1000ms" \
  --worker "w1=http://$NET.31:9464/metrics" --worker "w2=http://$NET.32:9464/metrics" \
  --kill w2 --kill-pid "$W2_PID" &
DRIVER_PID="$!"
PIDS+=("$DRIVER_PID"); NAMES+=("driver")
set +e
wait "$DRIVER_PID"
status=$?
set -e
echo "resident memory per process after the run:"
for i in "${!PIDS[@]}"; do
  [[ "${NAMES[$i]}" == driver ]] && continue
  rss="$(awk '/^VmRSS/ {printf "%.1f MiB", $2 / 1024}' "/proc/${PIDS[$i]}/status" 2>/dev/null || true)"
  echo "  ${NAMES[$i]}: ${rss:-not running}"
done
if [[ "$status" != 0 ]]; then
  for name in ingress w1 w2; do echo "--- last lines of $name.log"; tail -n 15 "$WORK/$name.log"; done
fi
exit "$status"
