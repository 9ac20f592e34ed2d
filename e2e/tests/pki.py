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
