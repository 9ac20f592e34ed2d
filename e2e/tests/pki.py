"""A throwaway PKI for the TLS and SASL_SSL tests, made with the openssl CLI (installed by
e2e/setup.sh)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(d: Path, name: str) -> None:
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=d)


def make_cert(d: Path, name: str, ca: str, cn: str, san: str | None) -> None:
    """`name`.key (PKCS#8) and `name`.pem signed by `ca`; `name`-keystore.pem holds both. `cn` is the
    common name, or a whole subject in openssl's form when it starts with '/'."""
    subject = cn if cn.startswith("/") else f"/CN={cn}"
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", f"{name}.key",
            "-out", f"{name}.csr", cwd=d)
    ext = d / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\n" if san else "basicConstraints=CA:FALSE\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", "2", "-extfile", ext.name, "-out", f"{name}.pem", cwd=d)
    (d / f"{name}-keystore.pem").write_text((d / f"{name}.key").read_text() + (d / f"{name}.pem").read_text())


def _b64url(b: bytes) -> str:
    import base64
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def make_jwt_key(d: Path, kid: str) -> dict:
    """An RSA key `kid`.key for signing JWTs (RS256); returns its public JWK."""
    openssl("genrsa", "-out", f"{kid}.key", "2048", cwd=d)
    out = subprocess.run(["openssl", "rsa", "-in", f"{kid}.key", "-noout", "-modulus"], cwd=d, check=True,
                         capture_output=True, timeout=60).stdout.decode()
    modulus = bytes.fromhex(out.strip().split("=", 1)[1])
    return {"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": _b64url(modulus), "e": "AQAB"}


def sign_jwt(d: Path, kid: str, claims: dict, header_kid: str | None = None) -> str:
    """A JWT with `claims`, signed RS256 with `kid`.key (the header names `header_kid`, default kid)."""
    import json
    header = {"alg": "RS256", "typ": "JWT", "kid": header_kid or kid}
    signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", f"{kid}.key"], cwd=d, input=signing_input.encode(),
                         check=True, capture_output=True, timeout=60).stdout
    return f"{signing_input}.{_b64url(sig)}"
