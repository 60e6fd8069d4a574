"""Online run_ut end to end: the bench side and the training script as separate processes on loopback.

The CSVs must equal offline run_ut's on a tensor dump of the same calls (TCP, TLS, shared directory);
a bench side that is down, refuses the certificate, or is killed mid-run must leave training untouched
(bit-identical losses) and say how many calls were not checked.
"""
import glob
import os
import signal
import subprocess
import sys
import time

import pytest

from online_run_ut_processes import (ENV, Bench, bench_config, csv_pair, device_config, offline_run_ut,
                                     parse_losses, read_rows, run_device, write_json)
from online_run_ut_tls import make_tls_folders
from tests.net import free_port


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    return offline_run_ut(tmp_path_factory.mktemp("offline"))


def _check_equal_to_offline(out, offline):
    offline_result, offline_details, offline_details_path = offline
    result, details, details_path = csv_pair(out, "_rank0")
    assert len(result) == 12 and result[0][0] == "API name"  # 11 calls of step 0
    assert result == offline_result
    assert details == offline_details
    # the device's own outputs: the same CPU kernels in the same dtypes, so the same rows as the re-run
    assert csv_pair(out, "_rank0_device")[:2] == (result, details)
    # api_precision_compare pair: what the CLI gives on the device details against offline's details
    device_details = glob.glob(os.path.join(out, "accuracy_checking_details_*_rank0_device.csv"))[0]
    cli_out = os.path.join(out, "cli")
    subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "api_precision_compare", "-npu",
                    device_details, "-gpu", offline_details_path, "-o", cli_out], check=True, env=ENV,
                   capture_output=True, timeout=60)
    for kind in ("result", "details"):
        online_file, = glob.glob(os.path.join(out, f"api_precision_compare_{kind}_*_rank0.csv"))
        cli_file, = glob.glob(os.path.join(cli_out, f"api_precision_compare_{kind}_*.csv"))
        assert read_rows(online_file) == read_rows(cli_file)


def _train_against(bench, device_cfg, steps=1):
    try:
        bench.wait_ready()
        losses, log = run_device(device_cfg, steps)
        assert bench.wait_exit(timeout=60) == 0, bench.text()
    finally:
        bench.stop()
    assert losses["losses"] == losses["reference"]
    return log


def test_tcp_csvs_equal_offline_run_ut(tmp_path, offline):
    port = free_port()
    bench = Bench(bench_config(tmp_path, host="127.0.0.1", port=port, tls_path=""), tmp_path / "out")
    log = _train_against(bench, device_config(tmp_path, host="127.0.0.1", port=port, tls_path=""))
    assert "11 calls sent to the bench side" in log
    _check_equal_to_offline(tmp_path / "out", offline)
    assert not os.path.exists(tmp_path / "unused_dump")  # no dump is written


def test_shared_directory_csvs_equal_offline_run_ut(tmp_path, offline):
    shared = tmp_path / "nfs"
    shared.mkdir()
    bench = Bench(bench_config(tmp_path, nfs_path=str(shared), port=-1), tmp_path / "out")
    _train_against(bench, device_config(tmp_path, nfs_path=str(shared), port=-1))
    _check_equal_to_offline(tmp_path / "out", offline)
    assert os.listdir(shared) == []  # messages and markers consumed


def test_tls_csvs_equal_offline_and_wrong_certificate_refused(tmp_path, offline):
    good_server, good_client, rogue_client = make_tls_folders(tmp_path)
    port = free_port()
    bench = Bench(bench_config(tmp_path, host="127.0.0.1", port=port, tls_path=good_server), tmp_path / "out")
    try:
        bench.wait_ready()
        # a client certificate from another CA: refused, training goes on untouched
        rogue = device_config(tmp_path, host="127.0.0.1", port=port, tls_path=rogue_client)
        losses, log = run_device(rogue)
        assert losses["losses"] == losses["reference"]
        warnings = [line for line in log.splitlines() if "cannot reach the bench side" in line]
        assert len(warnings) == 1 and "SSL" in warnings[0], log
        assert "11 calls (and" in log and "were not checked" in log
        deadline = time.monotonic() + 10
        while "TLS handshake failed" not in bench.text() and time.monotonic() < deadline:
            time.sleep(0.05)
        refused = [line for line in bench.text().splitlines() if "refused a connection" in line]
        assert len(refused) == 1 and "TLS handshake failed" in refused[0], bench.text()
        assert bench.proc.poll() is None  # still serving
        good = device_config(tmp_path, host="127.0.0.1", port=port, tls_path=good_client)
        log = _train_against(bench, good)
    finally:
        bench.stop()
    assert "11 calls sent" in log
    _check_equal_to_offline(tmp_path / "out", offline)


def test_bench_down_training_finishes_and_counts_unchecked(tmp_path):
    config = device_config(tmp_path, host="127.0.0.1", port=free_port(), tls_path="")
    started = time.monotonic()
    losses, log = run_device(config, steps=1)
    assert time.monotonic() - started < 60
    assert losses["losses"] == losses["reference"]
    assert sum("cannot reach the bench side" in line for line in log.splitlines()) == 1, log
    assert "11 calls (and" in log and "were not checked; 0 calls were sent" in log
    assert "Traceback" not in log


def test_bench_killed_mid_run_training_finishes_bit_identical(tmp_path):
    port = free_port()
    bench = Bench(bench_config(tmp_path, host="127.0.0.1", port=port, tls_path=""), tmp_path / "out")
    config = write_json(tmp_path / "device_all_steps.json", {
        "task": "tensor", "dump_path": str(tmp_path / "unused_dump"), "level": "L1",
        "tensor": {"online_run_ut": True, "host": "127.0.0.1", "port": port, "tls_path": ""}})
    try:
        bench.wait_ready()
        device = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "online_run_ut_train.py"),
                                   config, "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        try:
            deadline = time.monotonic() + 60
            while "connected from" not in bench.text():
                assert time.monotonic() < deadline and device.poll() is None, bench.text()
                time.sleep(0.02)
            bench.proc.send_signal(signal.SIGKILL)
            out, err = device.communicate(timeout=120)
        finally:
            if device.poll() is None:
                device.kill()
                device.wait()
    finally:
        bench.stop()
    assert device.returncode == 0, err
    losses = parse_losses(out)
    err = out + err
    assert losses["losses"] == losses["reference"] and len(losses["losses"]) == 60
    assert sum("lost the bench side" in line for line in err.splitlines()) == 1, err
    assert "were not checked" in err and "Traceback" not in err


@pytest.mark.parametrize("run_ut, message", [
    ({"is_online": True, "host": "", "port": -1}, "set run_ut.nfs_path, or run_ut.host and run_ut.port"),
    ({"is_online": True, "host": "127.0.0.1", "port": 1, "tls_path": "MISSING"}, "server.key, server.crt, ca.crt"),
])
def test_bench_config_errors_are_one_line(tmp_path, run_ut, message):
    if run_ut.get("tls_path") == "MISSING":
        (tmp_path / "tls").mkdir()
        run_ut = dict(run_ut, tls_path=str(tmp_path / "tls"))
    config = bench_config(tmp_path, **run_ut)
    done = subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "run_ut", "-config", config],
                          capture_output=True, text=True, env=ENV, timeout=60)
    assert done.returncode == 1
    errors = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("[ERROR]")]
    assert len(errors) == 1 and message in errors[0], done.stderr
    assert "Traceback" not in done.stderr


def test_run_ut_without_api_info_or_online_config_is_one_line_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "run_ut"], capture_output=True,
                          text=True, env=ENV, timeout=60)
    assert done.returncode == 1 and "-api_info DUMP_JSON is required" in done.stderr + done.stdout
