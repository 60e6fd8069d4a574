"""Throwaway TLS material for the online run_ut tests: a CA signing the server and client certificates,
and a second, unrelated CA signing a rogue client certificate (made with the `cryptography` package)."""
import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(text):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


def _certificate(subject, key, issuer, issuer_key, is_ca):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True))
    if is_ca:
        builder = builder.add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                                      key_encipherment=False, data_encipherment=False,
                                                      key_agreement=False, key_cert_sign=True, crl_sign=True,
                                                      encipher_only=False, decipher_only=False), critical=True)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(folder, role, key, cert, ca_cert):
    folder.mkdir(exist_ok=True)
    (folder / f"{role}.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                           serialization.PrivateFormat.PKCS8,
                                                           serialization.NoEncryption()))
    (folder / f"{role}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "ca.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    return str(folder)


def make_tls_folders(tmp):
    """(server folder, client folder, rogue client folder) as docs/online_run_ut.md describes them."""
    ca_key, rogue_ca_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("msprobe test CA", ca_key, "msprobe test CA", ca_key, True)
    rogue_ca = _certificate("rogue CA", rogue_ca_key, "rogue CA", rogue_ca_key, True)
    folders = []
    for role, folder, issuer, issuer_key, trust in (("server", "server_tls", ca, ca_key, ca),
                                                     ("client", "client_tls", ca, ca_key, ca),
                                                     ("client", "rogue_tls", rogue_ca, rogue_ca_key, ca)):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(f"msprobe {role}", key, issuer.subject.rfc4514_string()[3:], issuer_key, False)
        folders.append(_write(tmp / folder, role, key, cert, trust))
    return tuple(folders)
