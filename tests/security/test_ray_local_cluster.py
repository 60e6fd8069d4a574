"""`--engine ray --address local`: the cluster msprobe starts requires a token only this run holds.

Ray's gRPC servers listen on every interface once the machine has a non-loopback address, whatever node address
they are given, and a Ray cluster without authentication runs any task sent to it. The test runs in a network
namespace of its own (`unshare -n`) where loopback also carries 10.11.0.1 and the default route: the address a
real machine's network would give. There, a second process without the token must not join the cluster.
"""
import os
import shutil
import subprocess
import sys
import tempfile

SCRIPT = r"""
import os, subprocess, sys
from msprobe.core.compare import ray_engine

assert "ray" not in sys.modules
ray, saved = ray_engine.connect("local")
print("MODE", os.environ.get("RAY_AUTH_MODE"), len(os.environ.get("RAY_AUTH_TOKEN", "")))

@ray.remote
def add(a, b):
    return a + b

print("OWN", ray.get(add.remote(40, 2)))
gcs = ray.get_runtime_context().gcs_address
print("GCS", gcs)
env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
env["RAY_gcs_rpc_server_connect_timeout_s"] = "10"  # a refused client gives up sooner (Ray's default: 30 s+)
join = ("import ray; ray.init(address=%r, logging_level='ERROR'); "
        "print('JOINED', ray.get(ray.remote(lambda: 1).remote()))" % gcs)
other = subprocess.run([sys.executable, "-c", join], env=env, capture_output=True, text=True, timeout=150)
print("OTHER", other.returncode, "JOINED" in other.stdout)
listening = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True).stdout
print("DASHBOARD", any(line.split()[3].endswith(":8265") for line in listening.splitlines() if line.split()))
ray.shutdown()
ray_engine._restore(saved)
print("RESTORED", "RAY_AUTH_MODE" not in os.environ and "RAY_AUTH_TOKEN" not in os.environ)
"""


def test_local_cluster_needs_a_token_the_run_holds_and_gives_it_back(tmp_path):
    ray_tmp = tempfile.mkdtemp(prefix="msbr", dir="/tmp")  # Ray's socket paths must stay short
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
    env.update(RAY_TMPDIR=ray_tmp, RAY_USAGE_STATS_ENABLED="0")
    setup = ("ip link set lo up && ip addr add 10.11.0.1/32 dev lo && ip route add default dev lo src 10.11.0.1 "
             "&& exec \"$0\" -c \"$1\"")
    try:
        done = subprocess.run(["unshare", "-n", "sh", "-c", setup, sys.executable, SCRIPT], capture_output=True,
                              text=True, timeout=400, env=env)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    out = done.stdout
    assert done.returncode == 0, out[-2000:] + done.stderr[-3000:]
    assert "MODE token 64" in out and "OWN 42" in out, out
    assert "GCS 10.11.0.1:" in out or "GCS 127.0.0.1:" in out, out
    assert "OTHER 1 False" in out, out  # refused without the token
    assert "DASHBOARD False" in out and "RESTORED True" in out, out
