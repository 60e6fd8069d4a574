"""`msprobe -f pytorch run_ut -config config.json` with `run_ut.is_online`: the online run_ut bench side.

Listens on host:port (TLS with server.key/server.crt/ca.crt in tls_path) or watches nfs_path, checks the
calls of the ranks in rank_list as they arrive, and returns when every one of those ranks has ended
(Ctrl-C or SIGTERM: writes what is complete and returns).
"""
import queue
import signal
import time

from msprobe.core.errors import ConfigError
from msprobe.core.log import logger
from msprobe.core.run_ut.online.bench import OnlineBench
from msprobe.core.run_ut.online.tls import server_context, tls_files
from msprobe.core.run_ut.online.wire import printable
from msprobe.core.run_ut.online.transport import DirWatcher, TcpListener, TransportError, check_plain_tcp
from msprobe.core.run_ut.runner import load_factory

__all__ = ["online_section", "make_api_info_optional", "run_online_bench"]


def online_section(config_path):
    """The validated run_ut section of config.json when it sets is_online, else None."""
    if not config_path:
        return None
    from msprobe.core.config import load_task_section

    section = load_task_section(config_path, "run_ut")
    return section if section.get("is_online") else None


def make_api_info_optional(parser):
    """-api_info is not needed online (docs 08): the run_ut command checks for it when offline."""
    for action in parser._actions:
        if action.dest == "api_info_file":
            action.required = False


def _source(section, deliver, accepts):
    if section.get("nfs_path"):
        return DirWatcher(section["nfs_path"], deliver, accepts), f"shared directory {section['nfs_path']}"
    host, port = section.get("host") or "", section.get("port", -1)
    if not host or not isinstance(port, int) or port <= 0:
        raise ConfigError("run_ut.is_online: set run_ut.nfs_path, or run_ut.host and run_ut.port (this machine's "
                          f"address and a free port; got host={host!r}, port={port}).")
    files = tls_files(section.get("tls_path", ""), "server")
    context = server_context(files) if files else None
    try:
        mode = check_plain_tcp(host, context is not None, section.get("allow_plain_tcp", False), "run_ut.is_online")
    except TransportError as exc:
        raise ConfigError(str(exc)) from None
    try:
        listener = TcpListener(host, port, deliver, accepts, context)
    except OSError as exc:
        raise ConfigError(f"run_ut.is_online: cannot listen on {host}:{port}: {exc.strerror or exc}.") from None
    return listener, f"{host}:{port} ({mode})"


def _handle(bench, rank, message):
    """bench.handle; a message that still breaks it costs its peer one warning line, not the bench."""
    try:
        bench.handle(rank, message)
    except Exception as exc:  # noqa: BLE001 - one bad peer must not lose every rank's results
        logger.warning("online run_ut: dropped a message of rank %s that cannot be handled: %s: %s", rank,
                       type(exc).__name__, printable(exc, 200))


def _stop_on_sigterm():
    def stop(signum, frame):
        raise KeyboardInterrupt
    try:
        signal.signal(signal.SIGTERM, stop)
    except ValueError:
        pass  # not the main thread: Ctrl-C only


def run_online_bench(args, section, runner_path):
    """Serve until every rank of rank_list has ended; `runner_path` names the framework's runner factory."""
    ranks = list(section["rank_list"])
    rank_text = section["rank_list"].to_config()
    runner = load_factory(runner_path)({"device_id": args.device_id, "threads": 1})
    bench = OnlineBench(args.out_path, runner, section.get("white_list"), section.get("black_list"))
    received = queue.Queue(maxsize=16)  # bounded: a slow bench slows the senders, it does not fill memory

    def deliver(rank, message):
        received.put((rank, message))

    def accepts(rank):
        return "" if rank in section["rank_list"] else f"its rank_list is {rank_text}"

    source, where = _source(section, deliver, accepts)
    _stop_on_sigterm()
    logger.info("online run_ut: waiting for ranks %s on %s; results in %s", rank_text, where, bench.out_dir)
    first, busy = None, 0.0
    try:
        while not bench.done(ranks):
            try:
                rank, message = received.get(timeout=0.2)
            except queue.Empty:
                continue
            started = time.perf_counter()
            first = first or started
            _handle(bench, rank, message)
            busy += time.perf_counter() - started
    except KeyboardInterrupt:
        logger.warning("online run_ut: stopped; writing the calls received so far")
    finally:
        source.close()
        bench.close()
    elapsed = time.perf_counter() - first if first else 0.0
    logger.info("online run_ut: %d calls checked in %.3f s from the first message, %.3f s of them busy "
                "(the rest waiting for training)", bench.checked, elapsed, busy)
    return 0
