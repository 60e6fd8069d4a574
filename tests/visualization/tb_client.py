"""Start TensorBoard with tb-graph-ascend on a free loopback port and talk to the plugin like its page does."""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from tests.net import free_port

PLUGIN = "/data/plugin/graph_ascend/"



class TensorBoard:
    """Context manager: a TensorBoard process serving `logdir`; always stopped on exit."""

    def __init__(self, logdir, startup_timeout=90):
        self.logdir = str(logdir)
        self.port = free_port()
        self.timeout = startup_timeout
        self.process = None

    def __enter__(self):
        command = [sys.executable, "-c", "import sys; from tensorboard.main import run_main; sys.argv[0] = "
                   "'tensorboard'; run_main()", "--logdir", self.logdir, "--host", "127.0.0.1",
                   "--port", str(self.port), "--reload_interval", "0"]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.log = open(os.path.join(self.logdir, "..", "tensorboard.log"), "wb")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)
        deadline = time.time() + self.timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"TensorBoard exited early with {self.process.returncode}")
            try:
                self.get("load_meta_dir", timeout=5)
                return self
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.3)
        self.__exit__(None, None, None)
        raise RuntimeError("TensorBoard did not answer in time")

    def __exit__(self, *exc):
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self.log.close()
        return False

    def url(self, route):
        return f"http://127.0.0.1:{self.port}{PLUGIN}{route}"

    def get(self, route, timeout=30):
        with urllib.request.urlopen(self.url(route), timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8"))

    def stream(self, route, timeout=60):
        """Read an SSE stream to its end; returns the list of decoded `data:` events."""
        events = []
        with urllib.request.urlopen(self.url(route), timeout=timeout) as response:
            for raw in response:
                line = raw.decode("utf-8").strip()
                if line.startswith("data:"):
                    events.append(json.loads(line[5:].strip()))
                    if events[-1].get("done") or events[-1].get("error"):
                        break
        return events

    def post(self, route, body, timeout=30):
        request = urllib.request.Request(self.url(route), data=json.dumps(body).encode("utf-8"), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8"))
