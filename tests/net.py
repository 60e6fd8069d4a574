"""Loopback networking for tests: every socket a test opens targets 127.0.0.1."""
import socket

__all__ = ["free_port"]


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago (for servers, gloo and torchrun masters: never 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
