# Run inside `unshare -n` (a network namespace of the test's own: every packet stays on loopback).
# usage: bash ray_cluster.sh [--node-local DIR SRC] PORT LOG_DIR COMPARE_JSON OUT_DIR [COMPARE_JSON OUT_DIR ...]
# Starts a Ray head and a second node as separate processes, prints "NODE <id> head|second" for each, runs
# each compare with --engine ray (its output between "COMPARE <i>" and "RC <i> <exit status>" lines), and
# stops exactly the process groups it started, all within 480 s (the compares share what the start left), so
# its EXIT trap always runs before a caller's timeout. Ray's session folder is a short one of our own under /tmp
# (its socket paths must stay under 108 bytes); the node logs are copied to LOG_DIR.
# --node-local DIR SRC: the second node runs in a mount namespace of its own (unshare -m, private
# propagation) where a tmpfs is mounted over DIR and filled with a copy of SRC: under DIR that node sees
# SRC's files only, the head (and the compare's driver) sees what DIR holds on disk. Two disks, one path.
set -u
LOCAL_DIR=""; LOCAL_SRC=""
if [ "${1:-}" = "--node-local" ]; then LOCAL_DIR=$2; LOCAL_SRC=$3; shift 3; fi
PORT=$1; LOGS=$2; shift 2
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
[ $? -eq 0 ] || exit 1
if [ -n "$LOCAL_DIR" ]; then
    # the tmpfs lives as long as the node's processes (the namespace's only members)
    setsid unshare -m --propagation private sh -c \
        'mount -t tmpfs -o size=256m msprobe_node "$1" && cp -a "$2"/. "$1"/ && shift 2 && exec ray start "$@"' \
        sh "$LOCAL_DIR" "$LOCAL_SRC" --address="127.0.0.1:$PORT" $COMMON > "$TMP/node.log" 2>&1 &
else
    setsid ray start --address="127.0.0.1:$PORT" $COMMON > "$TMP/node.log" 2>&1 &
fi
NODE=$!
python - "$PORT" <<'PY'
import sys, time, ray
ray.init(address=f"127.0.0.1:{sys.argv[1]}", logging_level="ERROR")
deadline = time.time() + 120
while len([n for n in ray.nodes() if n["Alive"]]) < 2:
    if time.time() > deadline: sys.exit("second ray node did not join (see node.log)")
    time.sleep(1)
for node in ray.nodes():
    if node["Alive"]:
        print("NODE", node["NodeID"], "head" if "node:__internal_head__" in node["Resources"] else "second")
ray.shutdown()
PY
[ $? -eq 0 ] || exit 1
echo "NODES 2"
INDEX=0
while [ $# -ge 2 ]; do
    INDEX=$((INDEX + 1))
    echo "COMPARE $INDEX"
    LEFT=$((480 - SECONDS)); [ "$LEFT" -gt 0 ] || LEFT=1
    timeout "$LEFT" python -m msprobe.cli -f pytorch compare -i "$1" -o "$2" --engine ray \
        --address "127.0.0.1:$PORT" 2>&1
    echo "RC $INDEX $?"
    shift 2
done
