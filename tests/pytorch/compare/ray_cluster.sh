# Run inside `unshare -n` (a network namespace of the test's own: every packet stays on loopback).
# usage: bash ray_cluster.sh PORT LOG_DIR COMPARE_JSON OUT_DIR
# Starts a Ray head and a second node as separate processes, runs the compare with --engine ray, and
# stops exactly the process groups it started. Ray's session folder is a short one of our own under /tmp
# (its socket paths must stay under 108 bytes); the node logs are copied to LOG_DIR.
set -u
PORT=$1; LOGS=$2; COMPARE=$3; OUT=$4
TMP=$(mktemp -d /tmp/msrXXXXXX)
ip link set lo up
export RAY_USAGE_STATS_ENABLED=0
COMMON="--node-ip-address=127.0.0.1 --num-cpus=1 --object-store-memory=80000000 --block"
setsid ray start --head --port="$PORT" --include-dashboard=false --disable-usage-stats --temp-dir="$TMP" \
    $COMMON > "$TMP/head.log" 2>&1 &
HEAD=$!
stop() { kill -TERM -- -"$HEAD" 2>/dev/null; [ -n "${NODE:-}" ] && kill -TERM -- -"$NODE" 2>/dev/null; sleep 2;
         kill -KILL -- -"$HEAD" 2>/dev/null; [ -n "${NODE:-}" ] && kill -KILL -- -"$NODE" 2>/dev/null;
         cp "$TMP"/*.log "$LOGS"/ 2>/dev/null; rm -rf "$TMP"; true; }
trap stop EXIT
python - "$PORT" <<'PY'
import sys, time, ray
deadline = time.time() + 120
while True:
    try:
        ray.init(address=f"127.0.0.1:{sys.argv[1]}", logging_level="ERROR"); ray.shutdown(); break
    except Exception:
        if time.time() > deadline: sys.exit("ray head did not start (see head.log)")
        time.sleep(2)
PY
setsid ray start --address="127.0.0.1:$PORT" $COMMON > "$TMP/node.log" 2>&1 &
NODE=$!
python - "$PORT" <<'PY'
import sys, time, ray
ray.init(address=f"127.0.0.1:{sys.argv[1]}", logging_level="ERROR")
deadline = time.time() + 120
while len([n for n in ray.nodes() if n["Alive"]]) < 2:
    if time.time() > deadline: sys.exit("second ray node did not join")
    time.sleep(1)
ray.shutdown()
PY
echo "NODES 2"
python -m msprobe.cli -f pytorch compare -i "$COMPARE" -o "$OUT" --engine ray --address "127.0.0.1:$PORT"
