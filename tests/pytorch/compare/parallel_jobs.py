"""Small gloo jobs run side by side for the parallel-layout compare tests (loopback, bounded in time)."""
import os
import subprocess
import sys
from tests.net import free_port

HERE = os.path.dirname(os.path.abspath(__file__))



def run_jobs(root, script, specs, timeout=240):
    """Start `script` (a file beside this one) once per {name: (world size, mode)} at the same time, each
    with its own folder under `root` and its own free port; wait for all; {name: folder}."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    jobs = {}
    for name, (world, mode) in specs.items():
        (root / name).mkdir()
        jobs[name] = subprocess.Popen([sys.executable, os.path.join(HERE, script), str(root / name),
                                       str(free_port()), world, mode], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for job in jobs.values():
            output = job.communicate(timeout=timeout)[0]
            assert job.returncode == 0, output[-3000:]
    finally:
        for job in jobs.values():
            if job.poll() is None:
                job.kill()
                job.wait()
    return {name: str(root / name) for name in specs}


def float64_stats(tensor):
    """Max, Min, Mean, Norm of a tensor, recomputed in float64."""
    tensor = tensor.detach().double()
    return [tensor.max().item(), tensor.min().item(), tensor.mean().item(), tensor.norm().item()]
