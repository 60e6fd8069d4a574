"""TLS contexts of online run_ut: mutual authentication with the key/certificate files of docs 08.

The bench side (server) uses `server.key` / `server.crt`, the device side (client) `client.key` /
`client.crt`, each in its own `tls_path`; both trust the certificates signed by `ca.crt` found in the
same folder, and each side refuses a peer whose certificate that CA did not sign. TLS 1.2 is the minimum.
Host names are not checked: LAN hosts are usually addressed by IP and their certificates rarely carry IP
entries; trust comes from the private CA instead.
"""
import os
import ssl

from msprobe.core.errors import ConfigError

__all__ = ["tls_files", "server_context", "client_context", "DEFAULT_TLS_PATH"]

DEFAULT_TLS_PATH = "./"


def tls_files(tls_path: str, role: str):
    """(key, cert, ca) paths when TLS is configured, else None. `role`: "server" or "client".

    An empty tls_path means plain TCP; the default "./" means TLS only when the files are there; any other
    folder must hold all three files."""
    if not tls_path:
        return None
    files = tuple(os.path.join(tls_path, name) for name in (f"{role}.key", f"{role}.crt", "ca.crt"))
    present = [os.path.isfile(path) for path in files]
    if all(present):
        return files
    if os.path.normpath(tls_path) == os.path.normpath(DEFAULT_TLS_PATH) and not any(present):
        return None
    missing = ", ".join(os.path.basename(p) for p, ok in zip(files, present) if not ok)
    raise ConfigError(f"tls_path '{tls_path}': {missing} missing; it must hold {role}.key, {role}.crt and ca.crt "
                      "(the CA that signed the peer's certificate), or set tls_path to \"\" for plain TCP.")


def _context(purpose, files):
    key, cert, ca = files
    context = ssl.SSLContext(purpose)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
        context.load_verify_locations(ca)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"TLS files {cert} / {key} / {ca} cannot be used: {exc}") from None
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def server_context(files) -> ssl.SSLContext:
    """Bench side: present server.crt, require a client certificate signed by ca.crt."""
    return _context(ssl.PROTOCOL_TLS_SERVER, files)


def client_context(files) -> ssl.SSLContext:
    """Device side: present client.crt, require a server certificate signed by ca.crt."""
    context = _context(ssl.PROTOCOL_TLS_CLIENT, files)
    context.check_hostname = False  # see the module docstring; the certificate chain is still verified
    context.verify_mode = ssl.CERT_REQUIRED
    return context
