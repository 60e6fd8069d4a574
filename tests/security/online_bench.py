"""An online run_ut bench (PyTorch) as a child process, on 127.0.0.1 or a shared folder, and calls sent to it."""
import contextlib
import json
import signal
import subprocess
import sys
import time


@contextlib.contextmanager
def running_bench(tmp_path, section, env, launcher=None, **popen):
    """(bench process, its log path) once it waits for ranks; results go to tmp_path/out. Stopped on exit.
    `launcher(argv)` gives the command that runs `python argv` (a process that measures it), default plain python."""
    config = tmp_path / "bench.json"
    config.write_text(json.dumps({"task": "run_ut", "run_ut": {"is_online": True, **section}}))
    log_path = tmp_path / "bench.log"
    argv = ["-m", "msprobe.cli", "-f", "pytorch", "run_ut", "-config", str(config), "-o", str(tmp_path / "out")]
    with open(log_path, "w", encoding="utf-8") as log:
        bench = subprocess.Popen(launcher(argv) if launcher else [sys.executable, *argv], stdout=log,
                                 stderr=subprocess.STDOUT, env=env, **popen)
    try:
        deadline = time.monotonic() + 120
        while "waiting for ranks" not in log_path.read_text():
            assert bench.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        yield bench, log_path
    finally:
        if bench.poll() is None:
            bench.send_signal(signal.SIGTERM)
            bench.wait(timeout=30)


def send_calls(section, calls):
    """Send rank 0's calls [(call name, forward record)] in order, then its end message."""
    from msprobe.core.run_ut.online import wire
    from msprobe.core.run_ut.online.transport import open_channel

    channel = open_channel(section, 0)
    for seq, (name, forward) in enumerate(calls):
        channel.send(wire.encode({"kind": "call", "rank": 0, "step": 0, "seq": seq, "name": name,
                                  "forward": forward, "expects_backward": False}))
    channel.send(wire.encode({"kind": "end", "rank": 0}))
    channel.close()
