"""Online run_ut against hostile peers: memory follows the bytes that arrive (never a declared length), a bad
peer costs one warning line and the other ranks' results survive, shared-folder files cannot be redirected,
plain TCP stays on loopback unless asked for, and a bench that stops reading cannot hold training's exit.

Real sockets on 127.0.0.1, a real shared folder in tmp_path, the real bench as a child process; memory is
measured (tracemalloc in process, VmRSS of the bench) with bounds far from what the declared sizes cost."""
import glob
import os
import socket
import stat
import subprocess
import sys
import threading
import time
import tracemalloc

import pytest

from msprobe.core.errors import ParseError
from msprobe.core.run_ut.online import wire
from msprobe.core.run_ut.online.sender import CallSender
from msprobe.core.run_ut.online.transport import (DirChannel, DirWatcher, TcpChannel, TcpListener, TransportError,
                                                   check_plain_tcp, is_loopback)
from msprobe.pytorch.online_run_ut.packing import unpack_tensor
from online_run_ut_peers import RogueBench, connect, frame, hello, relu_call, rss_bytes, session
from online_run_ut_processes import ENV, Bench, bench_config, device_config, read_rows
from tests.net import free_port

MiB = 1 << 20


def _peak_while(action):
    """(result or exception, peak bytes Python allocated while `action` ran)."""
    tracemalloc.start()
    try:
        try:
            result = action()
        except Exception as exc:  # noqa: BLE001 - the caller checks which
            result = exc
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _stream(data):
    import io
    return io.BytesIO(data).readinto


# -- the wire reader -----------------------------------------------------------------------------------
def test_a_17_byte_frame_declaring_a_gib_costs_kilobytes_not_the_declared_size():
    data = frame(b"", header_len=0, payload_len=1 << 30)
    assert len(data) == 17
    error, peak = _peak_while(lambda: wire.read_message(_stream(data)))
    assert isinstance(error, ParseError) and "ended inside" in str(error)
    assert peak < 4 * MiB, peak  # the declared 1 GiB would be 256 times that


def test_a_hello_sized_limit_refuses_large_frames_before_reading_them():
    big_hello = frame(b"{}", header_len=1 << 20)
    with pytest.raises(ParseError, match="exceeds the limits"):
        wire.read_message(_stream(big_hello), wire.HANDSHAKE_LIMITS)
    with pytest.raises(ParseError, match="exceeds the limits"):
        wire.read_message(_stream(frame({"kind": "hello", "rank": 0}, b"xx")), wire.HANDSHAKE_LIMITS)
    assert wire.read_message(_stream(hello(3)), wire.HANDSHAKE_LIMITS).header["rank"] == 3


def test_a_header_nested_100k_deep_is_one_parse_error():
    nested = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(ParseError, match="nested too deeply"):
        wire.read_message(_stream(frame(nested)))


@pytest.mark.parametrize("shape, stride", [([8192, 8192], [0, 0]), ([1 << 20], [0]), ([4, 4, 4, 4], [0, 0, 0, 1])])
def test_zero_strides_cannot_turn_a_few_bytes_into_a_large_tensor(shape, stride):
    blob = {"name": "x", "dtype": "torch.float32", "shape": shape, "stride": stride, "offset": 0, "nbytes": 16}
    with pytest.raises(ParseError, match="more elements than its 16 bytes"):
        wire.read_message(_stream(frame({"kind": "call", "blobs": [blob]}, b"\0" * 16)))
    with pytest.raises(ValueError, match="elements of 4 bytes from 16 bytes"):
        unpack_tensor(blob, memoryview(bytearray(16)))


def test_unpack_refuses_negative_layouts_that_the_wire_would_refuse_too():
    for key, value in (("stride", [-1]), ("offset", -1)):
        meta = dict({"name": "x", "dtype": "torch.float32", "shape": [2], "stride": [1], "offset": 0, "nbytes": 8},
                    **{key: value})
        with pytest.raises(ValueError, match="negative"):
            unpack_tensor(meta, memoryview(bytearray(8)))


def test_printable_escapes_control_characters_for_log_lines():
    assert wire.printable("Functional.relu.0\n[ERROR] forged\r\x1b[31m") == \
        "Functional.relu.0\\n[ERROR] forged\\r\\x1b[31m"


# -- the device side against a rogue bench ------------------------------------------------------------------
def test_a_rogue_bench_declaring_a_huge_ack_costs_training_no_memory():
    rogue = RogueBench(frame(b"", header_len=(64 << 20) - 1, payload_len=8 << 30))
    try:
        error, peak = _peak_while(lambda: TcpChannel("127.0.0.1", rogue.port, 0, timeout=5))
    finally:
        rogue.close()
    assert isinstance(error, ParseError) and "exceeds the limits" in str(error), error
    assert peak < 4 * MiB, peak  # 64 MiB before the limit


def test_a_refusal_reason_with_newlines_reaches_the_training_log_as_one_line():
    reply = frame({"kind": "ack", "accepted": False, "reason": "no\n[ERROR] forged by the bench"})
    rogue = RogueBench(reply)
    try:
        with pytest.raises(TransportError) as caught:
            TcpChannel("127.0.0.1", rogue.port, 0, timeout=5)
    finally:
        rogue.close()
    assert "\n" not in str(caught.value) and "no\\n[ERROR] forged" in str(caught.value)


def test_a_bench_that_stops_reading_holds_exit_for_the_drain_only_and_no_end_lands_inside_a_message():
    rogue = RogueBench(frame({"kind": "ack", "accepted": True, "reason": ""}))
    sender = CallSender(lambda: TcpChannel("127.0.0.1", rogue.port, 0), max_bytes=256 * MiB, drain_s=3.0)
    payload = b"\x01" * MiB
    blob = {"name": "p", "dtype": "torch.uint8", "shape": [len(payload)], "stride": [1], "offset": 0,
            "nbytes": len(payload)}
    for seq in range(64):  # 64 MiB: far more than loopback socket buffers hold
        frames = wire.encode({"kind": "call", "seq": seq, "blobs": [blob]}, [payload])
        assert sender.submit(frames, sum(len(bytes(f)) for f in frames), is_call=True)
    result = {}
    closer = threading.Thread(target=lambda: result.update(
        counts=sender.close(wire.encode({"kind": "end", "rank": 0})), done=time.monotonic()), daemon=True)
    started = time.monotonic()
    closer.start()
    closer.join(timeout=40)
    try:
        assert not closer.is_alive(), "close() still waits for a bench that stopped reading"
        assert result["done"] - started < 3.0 + 4.0  # drain_s and a little: not drain_s twice plus 5 s (11 s)
        sent, dropped = result["counts"]
        assert sent + dropped == 64 and dropped >= 1
        received = rogue.drain()
    finally:
        rogue.close()
    # the end message is never written while a call is half-sent: its bytes would sit inside that call's
    assert b'"kind":"end"' not in received and received.count(b"MSRU") == received.count(b'"kind":"call"')
    kinds, read = [], _stream(received)
    while True:  # every complete message is a call; the stream may end inside the aborted one, nothing else
        try:
            message = wire.read_message(read)
        except ParseError as exc:
            assert "ended inside" in str(exc)
            break
        if message is None:
            break
        kinds.append(message.kind)
    assert kinds and set(kinds) == {"call"}


# -- shared folder ----------------------------------------------------------------------------------------
def test_a_symlink_planted_at_the_temporary_name_is_refused_not_followed(tmp_path):
    folder, victim = tmp_path / "shared_dir", tmp_path / "victim.txt"
    folder.mkdir()
    victim.write_text("keep me")
    channel = DirChannel(str(folder), 0)
    planted = folder / f".rank0_000000000000.msg.{os.getpid()}.tmp"
    os.symlink(victim, planted)
    with pytest.raises(TransportError, match="already exists"):
        channel.send([b"raw training tensor bytes"])
    assert victim.read_text() == "keep me"
    assert os.path.islink(planted) and not (folder / "rank0_000000000000.msg").exists()


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o000])
def test_shared_folder_messages_and_markers_are_0640_whatever_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        channel = DirChannel(str(tmp_path), 0)
        channel.send(wire.encode({"kind": "step_end", "step": 0}))
        channel.close()
    finally:
        os.umask(old)
    names = sorted(os.listdir(tmp_path))
    assert len(names) == 3 and any(name.endswith(".msg") for name in names)  # start, message, end
    assert {stat.S_IMODE(os.stat(tmp_path / name).st_mode) for name in names} == {0o640}


def _watch(folder):
    got, lock = [], threading.Lock()

    def deliver(rank, message):
        with lock:
            got.append((rank, None if message is None else message.header))
    return DirWatcher(str(folder), deliver, lambda rank: ""), got


def _wait_for(predicate, limit_s=20):
    end = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def test_a_17_byte_message_file_costs_the_watcher_no_memory(tmp_path, capsys):
    tracemalloc.start()
    try:
        watcher, got = _watch(tmp_path)
        (tmp_path / "rank0_000000000000.msg").write_bytes(frame(b"", header_len=0, payload_len=1 << 30))
        _wait_for(lambda: not (tmp_path / "rank0_000000000000.msg").exists())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    watcher.close()
    assert peak < 8 * MiB, peak
    assert got == [] and "cannot read rank0_000000000000.msg" in capsys.readouterr().out


def test_a_folder_and_a_fifo_symlink_named_like_messages_neither_stop_nor_block_the_watcher(tmp_path, capsys):
    watcher, got = _watch(tmp_path)
    try:
        (tmp_path / "rank0_000000000000.msg").mkdir()
        os.mkfifo(tmp_path / "fifo")
        os.symlink(tmp_path / "fifo", tmp_path / "rank0_000000000001.msg")
        os.mkfifo(tmp_path / "rank0_000000000002.msg")
        (tmp_path / "rank0_000000000003.msg").write_bytes(frame({"kind": "step_end", "step": 7}))
        (tmp_path / "end_rank0_1").write_bytes(b"")
        _wait_for(lambda: (0, None) in got)
    finally:
        watcher.close()
    assert got == [(0, {"kind": "step_end", "step": 7}), (0, None)]
    log = capsys.readouterr().out
    assert "rank0_000000000000.msg: TransportError: not a regular file" in log
    assert "rank0_000000000001.msg: OSError" in log  # the symlink: O_NOFOLLOW, never opened
    assert "rank0_000000000002.msg: TransportError: not a regular file" in log


# -- the TCP listener ------------------------------------------------------------------------------------
def test_connections_beyond_the_limit_are_closed_at_once(capsys):
    listener = TcpListener("127.0.0.1", 0, lambda rank, message: None, lambda rank: "", max_connections=3)
    socks = []
    try:
        socks = [connect(listener.port) for _ in range(5)]
        for sock in socks[3:]:  # closed by the listener at once: end of stream
            sock.settimeout(3)
            try:
                assert sock.recv(1) == b""
            except ConnectionResetError:
                pass
        for sock in socks[:3]:  # held open, waiting for their hello
            sock.settimeout(0.3)
            with pytest.raises(socket.timeout):
                sock.recv(1)
        assert capsys.readouterr().out.count("connections are open already") == 2
    finally:
        for sock in socks:
            sock.close()
        listener.close()


def test_plain_tcp_is_refused_off_loopback_unless_the_config_says_so():
    assert is_loopback("127.0.0.1") and is_loopback("127.3.4.5") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("192.0.2.1") and not is_loopback("0.0.0.0") and not is_loopback("bench.example")
    assert check_plain_tcp("127.0.0.1", False, False, "x") == "plain TCP on loopback"
    assert check_plain_tcp("192.0.2.1", True, False, "x") == "TLS"
    with pytest.raises(TransportError, match="allow_plain_tcp"):
        check_plain_tcp("192.0.2.1", False, False, "x")
    assert check_plain_tcp("192.0.2.1", False, True, "x").startswith("plain TCP (allow_plain_tcp")


def _bench_cli(config, out, timeout=120):
    done = subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "run_ut", "-config", config,
                           "-o", str(out)], capture_output=True, text=True, timeout=timeout, env=ENV)
    return done.returncode, done.stdout + done.stderr


def test_the_bench_refuses_plain_tcp_on_a_lan_address_in_one_line(tmp_path):
    code, text = _bench_cli(bench_config(tmp_path, host="192.0.2.1", port=free_port(), tls_path=""), tmp_path / "o")
    assert code == 1 and "Traceback" not in text
    error, = [line for line in text.splitlines() if "[ERROR]" in line]
    assert "not loopback" in error and "allow_plain_tcp" in error
    # opted in: the check passes and binding is what fails (192.0.2.1 is no address of this machine)
    code, text = _bench_cli(bench_config(tmp_path, host="192.0.2.1", port=free_port(), tls_path="",
                                         allow_plain_tcp=True), tmp_path / "o")
    assert code == 1 and "cannot listen on 192.0.2.1" in text and "not loopback" not in text


def test_the_device_side_refuses_plain_tcp_to_a_lan_address_and_says_its_mode(tmp_path):
    script = ("import sys; from msprobe.pytorch import PrecisionDebugger\n"
              "try:\n    PrecisionDebugger(config_path=sys.argv[1])\n"
              "except Exception as exc:\n    print('REFUSED', type(exc).__name__, exc)\n")
    outputs = []
    for name, extra in (("refused", {}), ("allowed", {"allow_plain_tcp": True})):
        (tmp_path / name).mkdir()
        config = device_config(tmp_path / name, host="192.0.2.1", port=59999, tls_path="", **extra)
        done = subprocess.run([sys.executable, "-c", script, config], capture_output=True, text=True, timeout=120,
                              env=ENV)
        outputs.append(done.stdout + done.stderr)
    assert "REFUSED ConfigError" in outputs[0] and "allow_plain_tcp" in outputs[0]
    assert "REFUSED" not in outputs[1]
    assert "sending the calls to 192.0.2.1:59999 (plain TCP (allow_plain_tcp" in outputs[1]


# -- the real bench against hostile peers -------------------------------------------------------------------
@pytest.fixture
def bench_of(tmp_path):
    started = []

    def start(**run_ut):
        port = free_port()
        bench = Bench(bench_config(tmp_path, host="127.0.0.1", port=port, tls_path="", **run_ut), tmp_path / "out")
        started.append(bench)
        bench.wait_ready()
        return bench, port
    yield start
    for bench in started:
        bench.stop()


def test_the_bench_memory_follows_bytes_received_not_declared_lengths(bench_of):
    bench, port = bench_of(rank_list=[0])
    time.sleep(0.5)
    before = rss_bytes(bench.proc.pid)
    zero_strides = {"name": "z", "dtype": "torch.float32", "shape": [2048, 2048], "stride": [0, 0], "offset": 0,
                    "nbytes": 4}
    header, _ = relu_call(0)
    header["blobs"] = [zero_strides]
    socks = [connect(port)]
    socks[0].sendall(frame(b"", header_len=(64 << 20) - 1))  # before any hello
    for _ in range(2):  # after a hello: 17 bytes declaring 768 MiB each, then silence
        socks.append(session(port, 0, [frame(b"", header_len=0, payload_len=768 << 20)], close=False))
    socks.append(session(port, 0, [frame(header, b"\0" * 4)], close=False))
    time.sleep(1.5)
    grown = rss_bytes(bench.proc.pid) - before
    for sock in socks:
        sock.close()
    assert grown < 100 * MiB, grown  # 1.6 GiB were declared
    header, payload = relu_call(1)
    session(port, 0, [frame(header, payload), frame({"kind": "end", "rank": 0})])
    assert bench.wait_exit(timeout=60) == 0, bench.text()
    text = bench.text()
    assert "declares more elements than its 4 bytes" in text and "Traceback" not in text
    assert "127.0.0.1:%d (plain TCP on loopback)" % port in text


def _result_rows(out, rank):
    path, = glob.glob(os.path.join(out, f"accuracy_checking_result_*_rank{rank}.csv"))
    return read_rows(path)


def test_bad_peers_cost_one_line_each_and_every_rank_keeps_its_results(bench_of, tmp_path):
    bench, port = bench_of(rank_list=[0, 1])
    session(port, 0, [])  # hello, then gone: rank 0 has not run here and must not end
    bad_step, _ = relu_call(0, step="x")
    forged_name = dict(relu_call(1)[0], name="Functional.relu.0\n[ERROR] forged line", blobs=[])
    good, payload = relu_call(2)
    nested = b"[" * 100_000 + b"]" * 100_000
    session(port, 1, [frame(nested)])  # the connection is dropped; the rank goes on
    session(port, 1, [frame(dict(bad_step, blobs=[])), frame(forged_name), frame({"kind": "step_end", "step": 0}),
                      frame({"kind": "step_end", "step": "x"}), frame({"kind": "backward", "seq": [1], "name": 3}),
                      frame(good, payload), frame({"kind": "end", "rank": 1})])
    _wait_for(lambda: "rank 1 done" in bench.text(), 60)
    time.sleep(0.5)
    assert "already ended" not in bench.text()  # its own connection closing after "end" is no late peer
    late, late_payload = relu_call(3)
    session(port, 1, [frame(late, late_payload), frame({"kind": "end", "rank": 1})])  # after its end
    time.sleep(1.0)
    assert bench.proc.poll() is None, bench.text()  # rank 0 has not ended yet
    mine, mine_payload = relu_call(4)
    session(port, 0, [frame(mine, mine_payload), frame({"kind": "end", "rank": 0})])
    assert bench.wait_exit(timeout=60) == 0, bench.text()
    text = bench.text()
    assert "Traceback" not in text and not any(line.startswith("[ERROR] forged") for line in text.splitlines())
    assert "Functional.relu.0\\n[ERROR] forged line" in text and "nested too deeply" in text
    assert "rank 1 already ended" in text
    for rank in (0, 1):
        rows = _result_rows(tmp_path / "out", rank)
        assert [row[0] for row in rows[1:]] == ["Functional.relu.0"], rows
        assert rows[1][1] == "pass", rows


def test_a_hostile_shared_folder_cannot_stop_the_bench(tmp_path):
    shared = tmp_path / "shared_dir"
    shared.mkdir()
    out = tmp_path / "out"
    bench = Bench(bench_config(tmp_path, nfs_path=str(shared), port=-1, rank_list=[0]), out)
    try:
        bench.wait_ready()
        (shared / "rank0_000000000900.msg").mkdir()
        os.mkfifo(tmp_path / "fifo")
        os.symlink(tmp_path / "fifo", shared / "rank0_000000000901.msg")
        channel = DirChannel(str(shared), 0)
        header, payload = relu_call(0)
        channel.send(wire.encode(header, [payload]))
        channel.send(wire.encode({"kind": "end", "rank": 0}))
        channel.close()
        assert bench.wait_exit(timeout=60) == 0, bench.text()
    finally:
        bench.stop()
    assert [row[0] for row in _result_rows(out, 0)[1:]] == ["Functional.relu.0"]
    text = bench.text()
    assert "Traceback" not in text and "rank0_000000000900.msg: TransportError: not a regular file" in text
    assert sorted(os.listdir(shared)) == ["rank0_000000000900.msg"]  # the folder stays; everything else read


def test_a_tensor_sent_without_data_is_not_generated_at_a_huge_recorded_shape(tmp_path):
    from msprobe.core.run_ut.online.bench import OnlineBench
    from msprobe.pytorch.online_run_ut.bench_ops import make_online_runner

    header, payload = relu_call(0)
    huge = dict(header["forward"]["input_args"][0], shape=[1 << 14, 1 << 13])  # 128 Mi elements, 64 header bytes
    del huge["data_name"]
    header["forward"]["input_args"] = [huge]
    message = wire.read_message(_stream(frame(header, payload)))
    bench = OnlineBench(str(tmp_path / "out"), make_online_runner({"device_id": 0, "threads": 1}))
    _, peak = _peak_while(lambda: (bench.handle(0, message), bench.handle(0, None)))
    assert peak < 64 * MiB, peak  # the float64 draw alone would be 1 GiB
    rows = _result_rows(tmp_path / "out", 0)
    assert rows[1][0] == "Functional.relu.0" and rows[1][1] == "SKIP" and "not generated online" in rows[1][-1], rows
