"""Certificates of the client listeners on the real API server tier, over time.

- **Rotation on a short clock.** The operator counts a day of `validityDays` and `renewalDays`
  as CERT_DAY seconds (the chart's `certificates.daySeconds`), so a cluster with validityDays 40
  and renewalDays 15 lives on certificates of 80 s renewed with 30 s left: months of validity
  in a few minutes. Both CAs, the brokers' certificate and a `tls` user's certificate are
  renewed on time, again and again; the brokers reload theirs in place (same processes, same
  pods); a client that keeps the certificates it started with works through the overlap, up to
  their expiry, beside one that took the renewed ones; and no acks=all record fails.
- **Bring your own CA.** `clusterCaSecret` and `clientsCaSecret` name Secrets the
  administrator made (one as cert-manager writes it): the brokers' and the users' certificates
  come from those CAs, the operator never writes the Secrets, and a CA its administrator renews
  reaches the brokers without a restart.

Local mode only (the pod runner stands in for the kubelet; the test reads the brokers' pids).
Run by e2e/k8s/operator-e2e.sh after test_operator.py, on its control plane.
"""

from __future__ import annotations

import base64
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_operator import (MODE, NS, AcksAllWriter, broker_log, first_certificate, poll_values,  # noqa: E402
                           ready, served_certificate, ssl_der, tls_cluster, tls_verifies, wait_until)

# Seconds in a certificate day for the rotation test.
CERT_DAY = 2
VALIDITY_DAYS, RENEWAL_DAYS = 40, 15


@pytest.fixture(scope="module", autouse=True)
def local_tier():
    if MODE != "local":
        pytest.fail("test_certificates.py needs this machine's tier (the pod runner): run e2e/k8s/operator-e2e.sh")


def secret_data(env, name: str) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in env.get("-n", NS, "get", "secret", name)["data"].items()}


def not_after(pem: str | bytes) -> float:
    """When the first certificate of `pem` expires (Unix seconds; openssl)."""
    import ssl
    text = pem.decode() if isinstance(pem, bytes) else pem
    r = subprocess.run(["openssl", "x509", "-noout", "-enddate"], input=first_certificate(text),
                       capture_output=True, text=True, check=True)
    return ssl.cert_time_to_seconds(r.stdout.strip().split("=", 1)[1])


def public_key(pem: str | bytes) -> str:
    text = pem.decode() if isinstance(pem, bytes) else pem
    return subprocess.run(["openssl", "x509", "-noout", "-pubkey"], input=first_certificate(text),
                          capture_output=True, text=True, check=True).stdout


def operator_env(env) -> dict:
    p = env.leader_pod() or {}
    return {e["name"]: e.get("value") for e in p.get("spec", {}).get("containers", [{}])[0].get("env", [])}


@pytest.fixture
def short_clock(env):
    """The operator counting a certificate day as CERT_DAY seconds; back to real days after."""
    env.helm_install("--set", f"certificates.daySeconds={CERT_DAY}", verb="upgrade")
    try:
        wait_until(lambda: operator_env(env).get("SKEIN_CERTIFICATE_DAY_SECONDS") == str(CERT_DAY), 180,
                   f"an operator with {CERT_DAY} s certificate days leading")
        yield
    finally:
        env.helm_install(verb="upgrade")
        wait_until(lambda: operator_env(env).get("SKEIN_CERTIFICATE_DAY_SECONDS") == "86400", 180,
                   "an operator with real certificate days leading again")


class Versions:
    """Each distinct value a source showed, with when it was first seen."""

    def __init__(self):
        self.seen: dict[str, list[tuple[float, str]]] = {}

    def note(self, what: str, value: str | None, at: float):
        if value is None:
            return
        vs = self.seen.setdefault(what, [])
        if not vs or vs[-1][1] != value:
            vs.append((at, value))

    def __getitem__(self, what: str) -> list[tuple[float, str]]:
        return self.seen.get(what, [])


@pytest.mark.timeout(900)
def test_certificates_renew_on_time_without_restarts_or_failed_deliveries(env, short_clock, tmp_path):
    """On a 2 s certificate day (validityDays 40 = 80 s, renewalDays 15 = renewed with 30 s
    left), over two renewals of each CA (months of certificate time):
    - each CA is renewed within seconds of falling due, with its key kept;
    - the brokers get a new certificate from each renewed CA and serve it within seconds,
      with the same processes and pods (they reload it; no restart);
    - the `tls` user's certificate is renewed before the one it replaces expires;
    - through the overlap, a new connection with the user's first certificate and the first CA
      certificate is accepted and verifies the brokers, and after the certificate's expiry it
      is refused: the clock is real;
    - acks=all producers on mutual TLS, each on the certificates of its time (the first one
      stops before they expire, a second one starts on the renewed ones), fail no delivery,
      and every acknowledged record is read back."""
    from confluent_kafka import Consumer, TopicPartition

    name, topic, user = "rotate", "rotate-t", "erin"
    env.k("apply", "-f", "-", stdin=tls_cluster(
        name, f"    validityDays: {VALIDITY_DAYS}\n    renewalDays: {RENEWAL_DAYS}", topic, user))
    writers: list[AcksAllWriter] = []
    try:
        ready(env, "kafkacluster", name, 240, f"KafkaCluster {name} Ready")
        ready(env, "topic", topic, 120, f"Topic {topic} Ready")
        ready(env, "kafkauser", user, 120, f"KafkaUser {user} Ready")
        hosts = [f"{name}-{i}.{name}-brokers.{NS}.svc" for i in range(2)]
        boot = ",".join(f"{h}:9095" for h in hosts)
        runner = env.runners[1]
        pods = {p: env.get("-n", NS, "get", "pod", p)["metadata"]["uid"] for p in (f"{name}-0", f"{name}-1")}
        pids = {p: runner.pid_of(p) for p in pods}
        assert all(pids.values()), pids
        cluster_key = secret_data(env, f"{name}-cluster-ca")["ca.key"]
        clients_key = secret_data(env, f"{name}-clients-ca")["ca.key"]
        files = {}

        def save(label: str, data: str | bytes) -> Path:
            path = tmp_path / label
            path.write_bytes(data.encode() if isinstance(data, str) else data)
            files[label] = path
            return path

        def writer(version: int) -> AcksAllWriter:
            """An acks=all producer on mutual TLS with the user's and the cluster CA's certificates
            as they are now (a client started now)."""
            s = secret_data(env, user)
            cfg = {"security.protocol": "SSL",
                   "ssl.ca.location": str(save(f"ca-for-{version}.crt", s["ca.crt"])),
                   "ssl.certificate.location": str(save(f"{user}{version}.crt", s["user.crt"])),
                   "ssl.key.location": str(save(f"{user}{version}.key", s["user.key"]))}
            w = AcksAllWriter(boot, topic, 2, f"w{version}", cfg)
            w.start()
            writers.append(w)
            return w

        v = Versions()

        def sample():
            now = time.time()
            v.note("cluster-ca", secret_data(env, f"{name}-cluster-ca-cert")["ca.crt"].decode(), now)
            v.note("clients-ca", secret_data(env, f"{name}-clients-ca")["ca.crt"].decode(), now)
            v.note("brokers", first_certificate(
                secret_data(env, f"{name}-listener-tls")["broker-keystore.pem"].decode()), now)
            v.note(user, secret_data(env, user)["user.crt"].decode(), now)
            for h in hosts:
                der = served_certificate(h, 9093)
                v.note(f"served {h}", der.hex() if der else None, time.time())

        sample()
        first_writer = writer(0)
        wait_until(lambda: len(first_writer.acked) > 50, 60, "the first producer delivering")
        ca0 = save("ca0.crt", v["cluster-ca"][0][1])
        user0 = (files[f"{user}0.crt"], files[f"{user}0.key"])
        user0_expiry = not_after(user0[0].read_bytes())
        ca0_expiry = not_after(v["cluster-ca"][0][1])
        overlap: dict[str, bool | None] = {}
        expired: bool | None = None
        stopped_first = False
        deadline = time.time() + VALIDITY_DAYS * CERT_DAY * 2 + 90
        while time.time() < deadline:
            sample()
            now = time.time()
            if len(v[user]) >= 2 and not overlap and now < min(user0_expiry, ca0_expiry) - 5:
                # The overlap: the renewed certificates are out, the first ones still valid.
                latest = save("ca-latest.crt", v["cluster-ca"][-1][1])
                s = secret_data(env, user)  # the certificate and its key from one read of the Secret
                renewed = (save(f"{user}-latest.crt", s["user.crt"]), save(f"{user}-latest.key", s["user.key"]))
                overlap = {"first certificates, new connection": tls_verifies(hosts[0], 9095, ca0, user0),
                           "renewed certificates": tls_verifies(hosts[0], 9095, latest, renewed)}
                writer(1)
            if not stopped_first and now > user0_expiry - 8:
                first_writer.stop()
                stopped_first = True  # a client keeps its certificate until just before it expires
            if expired is None and now > user0_expiry + 2:
                latest = save("ca-latest.crt", v["cluster-ca"][-1][1])
                expired = tls_verifies(hosts[0], 9095, latest, user0)
            if len(v["cluster-ca"]) >= 3 and len(v["clients-ca"]) >= 3 and expired is not None \
                    and all(len(v[f"served {h}"]) >= 3 for h in hosts):
                break
            time.sleep(1)
        for w in writers:
            w.finish()

        summary = {k: [round(t - v["cluster-ca"][0][0], 1) for t, _ in vs] for k, vs in v.seen.items()}
        assert len(v["cluster-ca"]) >= 3 and len(v["clients-ca"]) >= 3, f"two renewals of each CA: {summary}"
        # Each CA renewed on time: when its certificate fell due (renewalDays before its expiry),
        # within the seconds the operator and this 1 s sampling take; and with its key kept.
        for which in ("cluster-ca", "clients-ca"):
            for (_, prev), (seen, _) in zip(v[which], v[which][1:]):
                due = not_after(prev) - RENEWAL_DAYS * CERT_DAY
                assert due - 3 <= seen <= due + 10, f"{which} renewed {seen - due:+.1f} s from its due time"
        assert secret_data(env, f"{name}-cluster-ca")["ca.key"] == cluster_key
        assert secret_data(env, f"{name}-clients-ca")["ca.key"] == clients_key
        assert len({public_key(pem) for _, pem in v["cluster-ca"]}) == 1
        # The brokers' certificate: a new one from each renewed CA, before the previous expired,
        # and served by both brokers within seconds (a reload: same processes, same pods).
        assert len(v["brokers"]) >= 3, summary
        issued = v["brokers"]
        for i, ((_, prev), (seen, pem)) in enumerate(zip(issued, issued[1:])):
            assert seen < not_after(prev) - 10, "the brokers' certificate renewed before it expired"
            if i + 2 < len(issued) and issued[i + 2][0] - seen < 10:
                continue  # issued again within seconds (the second CA renewed a pass later)
            for h in hosts:
                served = next((t for t, der in v[f"served {h}"] if der == ssl_der(pem).hex()), None)
                assert served is not None and served - seen <= 15, f"{h} serves the renewed certificate"
        for p, uid in pods.items():
            assert env.get("-n", NS, "get", "pod", p)["metadata"]["uid"] == uid, f"{p} was recreated"
            assert runner.pid_of(p) == pids[p], f"{p}'s broker restarted"
            assert broker_log(env, p).count("TLS material changed on disk: reloaded") >= 2, p
        # The user's certificate: renewed (twice, one per clients CA) before each expired.
        assert len(v[user]) >= 2, summary
        for (_, prev), (seen, _) in zip(v[user], v[user][1:]):
            assert seen < not_after(prev) - 10, f"{user}'s certificate renewed before it expired"
        assert overlap and all(overlap.values()), f"through the overlap: {overlap}"
        assert expired is False, f"{user}'s first certificate, expired, must be refused: {expired}"
        # No failed delivery; everything acknowledged is there.
        acked = [m for w in writers for m in w.acked]
        assert all(w.failed == [] for w in writers), [w.failed[:3] for w in writers]
        assert len(writers) == 2 and all(len(w.acked) > 50 for w in writers), [len(w.acked) for w in writers]
        latest = save("ca-latest.crt", v["cluster-ca"][-1][1])
        cons = Consumer({"bootstrap.servers": ",".join(f"{h}:9093" for h in hosts), "security.protocol": "SSL",
                         "ssl.ca.location": str(latest), "group.id": f"rot-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "log_level": 2})
        cons.assign([TopicPartition(topic, p, 0) for p in range(2)])
        got = poll_values(cons, len(acked), 120)
        assert sorted(got) == sorted(acked), f"{len(got)} read back of {len(acked)} acknowledged"
        days = (v["cluster-ca"][-1][0] - v["cluster-ca"][0][0]) / CERT_DAY
        print(f"certificates on a {CERT_DAY} s day: first seen (s) {summary}; {days:.0f} certificate days, "
              f"no restart, {len(acked)} records acknowledged over mutual TLS, none failed")
    finally:
        for w in writers:
            w.stop()
        env.k("-n", NS, "delete", "kafkauser", user, "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "topic", topic, "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)


def openssl(*args: str, cwd: Path, stdin: str | None = None) -> str:
    return subprocess.run(["openssl", *args], cwd=cwd, input=stdin, capture_output=True, text=True,
                          check=True, timeout=60).stdout


def make_ca(d: Path, name: str, renew: tuple[Path, Path] | None = None) -> tuple[Path, Path]:
    """A CA `name` (EC P-256): its certificate and key files. `renew`: a CA to renew instead, a new
    certificate (`name`.crt) with its subject and key, as cert-manager renews a CA whose
    rotationPolicy is Never."""
    if renew:
        subject = openssl("x509", "-noout", "-subject", "-nameopt", "compat", "-in", str(renew[0]), cwd=d)
        subject = subject.strip().removeprefix("subject=").strip()
        key_args = ["-key", str(renew[1])]
    else:
        subject = f"/O=Corp/CN={name}"
        key_args = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", f"{name}.key"]
    openssl("req", "-x509", *key_args, "-days", "30", "-subj", subject, "-out", f"{name}.crt", cwd=d)
    return d / f"{name}.crt", renew[1] if renew else d / f"{name}.key"


def sign(d: Path, name: str, ca: tuple[Path, Path]) -> tuple[Path, Path]:
    """A client certificate CN=`name` signed by `ca`."""
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
    (d / f"{name}.ext").write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
            "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=d)
    return d / f"{name}.crt", d / f"{name}.key"


def verified_by(d: Path, ca: Path, cert_pem: bytes) -> bool:
    (d / "check.crt").write_bytes(cert_pem)
    return subprocess.run(["openssl", "verify", "-CAfile", str(ca), str(d / "check.crt")],
                          capture_output=True).returncode == 0


def test_a_cluster_on_brought_cas_never_writes_them_and_takes_their_renewal_without_restarts(env, tmp_path):
    """spec.certificates.clusterCaSecret (a Secret as cert-manager writes a CA: tls.crt, tls.key)
    and clientsCaSecret (ca.crt, ca.key), made by the administrator: both CAs show as Brought;
    the brokers serve a certificate of the brought cluster CA, clients get that CA in
    <cluster>-cluster-ca-cert, the `tls` user's certificate comes from the brought clients CA, a
    client certificate the administrator signs with it is accepted too, one from another CA is
    refused; the operator writes neither Secret. When the administrator renews the cluster CA
    (same key, as cert-manager's rotationPolicy Never does), the brokers serve a certificate of
    the renewed one within about a minute, which clients holding the previous CA certificate
    still verify; no broker restarts."""
    name, topic, user = "byo", "byo-t", "frank"
    d = tmp_path
    cluster_ca = make_ca(d, "corp-cluster-ca")
    clients_ca = make_ca(d, "corp-clients-ca")
    other_ca = make_ca(d, "elsewhere-ca")

    def brought(secret: str, ca: tuple[Path, Path], cert_manager: bool) -> str:
        crt, key = ("tls.crt", "tls.key") if cert_manager else ("ca.crt", "ca.key")
        kind = "kubernetes.io/tls" if cert_manager else "Opaque"
        b64 = lambda p: base64.b64encode(p.read_bytes()).decode()  # noqa: E731
        return f"""apiVersion: v1
kind: Secret
metadata:
  name: {secret}
  namespace: {NS}
type: {kind}
data:
  {crt}: {b64(ca[0])}
  {key}: {b64(ca[1])}
"""
    env.k("apply", "-f", "-", stdin=brought("corp-cluster-ca", cluster_ca, True) + "---\n"
          + brought("corp-clients-ca", clients_ca, False))
    made = {s: env.get("-n", NS, "get", "secret", s)["metadata"] for s in ("corp-cluster-ca", "corp-clients-ca")}
    env.k("apply", "-f", "-", stdin=tls_cluster(
        name, "    clusterCaSecret: corp-cluster-ca\n    clientsCaSecret: corp-clients-ca", topic, user))
    try:
        ready(env, "kafkacluster", name, 240, f"KafkaCluster {name} Ready")
        ready(env, "kafkauser", user, 120, f"KafkaUser {user} Ready")
        cas = {c["name"]: c for c in env.get("-n", NS, "get", "kafkacluster", name)["status"]["certificateAuthorities"]}
        assert {(c["phase"], c["secret"]) for c in cas.values()} == {
            ("Brought", "corp-cluster-ca"), ("Brought", "corp-clients-ca")}, cas
        host = f"{name}-0.{name}-brokers.{NS}.svc"
        runner = env.runners[1]
        pid = runner.pid_of(f"{name}-0")
        wait_until(lambda: tls_verifies(host, 9093, cluster_ca[0]), 90, "the brokers serving a certificate of the brought CA")
        assert secret_data(env, f"{name}-cluster-ca-cert")["ca.crt"] == cluster_ca[0].read_bytes()
        f = secret_data(env, user)
        assert verified_by(d, clients_ca[0], f["user.crt"]), "the user's certificate comes from the brought clients CA"
        frank = (d / "frank.crt", d / "frank.key")
        frank[0].write_bytes(f["user.crt"])
        frank[1].write_bytes(f["user.key"])
        grace = sign(d, "grace", clients_ca)
        mallory = sign(d, "mallory", other_ca)
        assert tls_verifies(host, 9095, cluster_ca[0], frank) is True, "the user's certificate is taken"
        assert tls_verifies(host, 9095, cluster_ca[0], grace) is True, "a certificate the brought clients CA signs is taken"
        assert tls_verifies(host, 9095, cluster_ca[0], mallory) is False, "a certificate of another CA is refused"
        assert tls_verifies(host, 9093, other_ca[0]) is False

        # The administrator renews the cluster CA: a new certificate, the same key.
        renewed = make_ca(d, "corp-cluster-ca-renewed", renew=cluster_ca)
        assert public_key(renewed[0].read_bytes()) == public_key(cluster_ca[0].read_bytes())
        env.k("apply", "-f", "-", stdin=brought("corp-cluster-ca", renewed, True))
        before = served_certificate(host, 9093)
        t0 = time.time()
        wait_until(lambda: served_certificate(host, 9093) not in (None, before), 120,
                   "the brokers serving a certificate issued from the renewed CA")
        took = time.time() - t0
        keystore = secret_data(env, f"{name}-listener-tls")["broker-keystore.pem"].decode()
        assert verified_by(d, renewed[0], first_certificate(keystore).encode())
        assert tls_verifies(host, 9093, renewed[0]) and tls_verifies(host, 9093, cluster_ca[0]), \
            "the renewed and the previous CA certificate both verify the brokers"
        assert secret_data(env, f"{name}-cluster-ca-cert")["ca.crt"] == renewed[0].read_bytes()
        assert runner.pid_of(f"{name}-0") == pid, "the broker restarted"
        # The operator wrote neither Secret: no owner, none of its annotations or labels, and
        # the content is what the administrator put there.
        for s, ca in (("corp-cluster-ca", renewed), ("corp-clients-ca", clients_ca)):
            meta = env.get("-n", NS, "get", "secret", s)["metadata"]
            assert not meta.get("ownerReferences"), meta
            assert meta.get("labels") == made[s].get("labels"), meta
            assert not [a for a in meta.get("annotations", {}) if a.startswith("skein.dev/")], meta
            data = secret_data(env, s)
            assert sorted(data) == (["tls.crt", "tls.key"] if s == "corp-cluster-ca" else ["ca.crt", "ca.key"])
            assert ca[0].read_bytes() in data.values()
        print(f"brought CAs: served, signed users, refused another CA's client; the renewed cluster CA "
              f"served {took:.0f} s after the Secret changed, broker pid {pid} unchanged")
    finally:
        env.k("-n", NS, "delete", "kafkauser", user, "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "topic", topic, "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)
        env.k("-n", NS, "delete", "secret", "corp-cluster-ca", "corp-clients-ca", "--ignore-not-found", check=False)
