"""SASL: SASL_PLAINTEXT and SASL_SSL listeners with PLAIN (users from the listener's JAAS config)
and SCRAM-SHA-256/512 (users managed with Kafka's own `kafka-configs --entity-type users`, stored
salted by the controller), re-authentication (KIP-368), and the failures a user meets: a wrong
password, an unknown mechanism, requests before authentication, truncated frames. Clients:
confluent-kafka (librdkafka), kcat, kafka-python, kafkajs and Apache Kafka's Java tools."""

from __future__ import annotations

import shutil
import socket
import struct
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from brokers import SkeinBroker, free_port
from pki import make_ca, make_cert
from util import consume_group, js, kafka_tool, produce_numbered as produce, run, wait_until

pytestmark = pytest.mark.sasl

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
SCRAM_PASSWORD = "scram-pa$$word"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    if shutil.which("openssl") is None:
        pytest.fail("openssl not installed: run e2e/setup.sh", pytrace=False)
    d = tmp_path_factory.mktemp("sasl-pki")
    make_ca(d, "ca")
    make_cert(d, "server", "ca", "localhost", "DNS:localhost,IP:127.0.0.1")
    return d


def jaas_plain(users: dict[str, str]) -> str:
    entries = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {entries};"


class SaslBroker(SkeinBroker):
    """skein-broker with PLAINTEXT (replication, bootstrap for admin), SASL_PLAINTEXT, SASL_SSL
    (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 on both) and REAUTH (SASL_PLAINTEXT whose sessions last
    2 s: connections.max.reauth.ms)."""

    def __init__(self, workdir: Path, pki: Path):
        self.sasl_port, self.sasl_ssl_port, self.reauth_port = free_port(), free_port(), free_port()
        super().__init__(workdir, {})
        listeners = (f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},"
                     f"SASL_SSL://127.0.0.1:{self.sasl_ssl_port},REAUTH://127.0.0.1:{self.reauth_port}")
        mechanisms = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
        self.overrides.update({
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map":
                "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,REAUTH:SASL_PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": mechanisms,
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas_plain(PLAIN_USERS),
            "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas_plain(PLAIN_USERS),
            "listener.name.reauth.plain.sasl.jaas.config": jaas_plain(PLAIN_USERS),
            "listener.name.reauth.connections.max.reauth.ms": "2000",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki / "server-keystore.pem"),
        })


@pytest.fixture(scope="module")
def sasl_broker(pki, tmp_path_factory):
    if __import__("os").environ.get("E2E_TARGET", "skein") != "skein":
        pytest.skip("the SASL tests configure skein-broker's listeners")
    b = SaslBroker(tmp_path_factory.mktemp("sasl-broker"), pki)
    b.start()
    yield b
    b.stop()


def kafka_configs(bootstrap: str, *args: str, config: Path | None = None):
    extra = ["--command-config", str(config)] if config else []
    return kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap, *extra, *args)


@pytest.fixture(scope="module")
def scram_users(sasl_broker):
    """SCRAM users `scram256` and `scram512` made with kafka-configs over the PLAINTEXT listener."""
    kafka_configs(sasl_broker.bootstrap, "--alter", "--entity-type", "users", "--entity-name", "scram256",
                  "--add-config", f"SCRAM-SHA-256=[iterations=8192,password={SCRAM_PASSWORD}]")
    kafka_configs(sasl_broker.bootstrap, "--alter", "--entity-type", "users", "--entity-name", "scram512",
                  "--add-config", f"SCRAM-SHA-512=[password={SCRAM_PASSWORD}]")
    return {"SCRAM-SHA-256": "scram256", "SCRAM-SHA-512": "scram512"}


def conf(broker: SaslBroker, pki: Path, mechanism: str, user: str, password: str, tls: bool = False,
         port: int | None = None) -> dict:
    c = {"bootstrap.servers": f"127.0.0.1:{port or (broker.sasl_ssl_port if tls else broker.sasl_port)}",
         "security.protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
         "sasl.username": user, "sasl.password": password}
    if tls:
        c["ssl.ca.location"] = str(pki / "ca.pem")
    return c


def credentials(mechanism: str, scram_users: dict) -> tuple[str, str]:
    if mechanism == "PLAIN":
        return "alice", PLAIN_USERS["alice"]
    return scram_users[mechanism], SCRAM_PASSWORD


def create_topic(bootstrap: str, topic: str, partitions: int = 3) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap})
    for f in a.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30).values():
        f.result(30)


def sasl_metric(broker: SaslBroker, listener: str, mechanism: str, result: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10).read().decode()
    want = f'skein_sasl_authentications_total{{listener="{listener}",mechanism="{mechanism}",result="{result}"}}'
    for line in text.splitlines():
        if line.startswith(want):
            return float(line.split()[-1])
    return 0.0


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("tls", [False, True], ids=["sasl_plaintext", "sasl_ssl"])
def test_confluent_kafka_produces_consumes_and_administers_over_sasl(sasl_broker, pki, scram_users, topic,
                                                                     mechanism, tls):
    user, password = credentials(mechanism, scram_users)
    c = conf(sasl_broker, pki, mechanism, user, password, tls)
    before = sasl_metric(sasl_broker, "SASL_SSL" if tls else "SASL_PLAINTEXT", mechanism, "success")
    a = AdminClient(c)
    for f in a.create_topics([NewTopic(topic, 3, 1)], operation_timeout=30).values():
        f.result(30)
    md = a.list_topics(timeout=30)
    assert topic in md.topics
    # Metadata names the brokers' endpoints of the listener asked on.
    assert [b.port for b in md.brokers.values()] == [sasl_broker.sasl_ssl_port if tls else sasl_broker.sasl_port]
    assert produce(c, topic, 300) == []
    got = consume_group(c, topic, 300, f"g-{topic}")
    assert sorted(got) == sorted(f"value-{i}".encode() for i in range(300))
    after = sasl_metric(sasl_broker, "SASL_SSL" if tls else "SASL_PLAINTEXT", mechanism, "success")
    assert after > before, "successful authentications are counted"


def test_kafka_configs_manages_scram_users_and_logins_follow(sasl_broker, pki, scram_users, topic):
    b = sasl_broker.bootstrap
    kafka_configs(b, "--alter", "--entity-type", "users", "--entity-name", "carol",
                  "--add-config", "SCRAM-SHA-256=[iterations=4096,password=carol-1],SCRAM-SHA-512=[password=carol-1]")
    out = kafka_configs(b, "--describe", "--entity-type", "users", "--entity-name", "carol").stdout.decode()
    assert "SCRAM-SHA-256=iterations=4096" in out and "SCRAM-SHA-512=iterations=4096" in out, out
    assert "carol-1" not in out
    out = kafka_configs(b, "--describe", "--entity-type", "users").stdout.decode()
    assert "scram256" in out and "scram512" in out and "carol" in out, out

    create_topic(b, topic, 1)
    carol = conf(sasl_broker, pki, "SCRAM-SHA-512", "carol", "carol-1")
    assert produce(carol, topic, 10) == []
    # A new password: the old one stops working, the new one works.
    kafka_configs(b, "--alter", "--entity-type", "users", "--entity-name", "carol",
                  "--add-config", "SCRAM-SHA-512=[password=carol-2]")
    wait_until(lambda: produce(conf(sasl_broker, pki, "SCRAM-SHA-512", "carol", "carol-2"), topic, 1, 8) == [], 30,
               "the new password accepted")
    assert produce({**carol, "socket.timeout.ms": 3000}, topic, 1, timeout=5), "the old password still works"
    # Deleted: no login with that mechanism; the other one still works.
    kafka_configs(b, "--alter", "--entity-type", "users", "--entity-name", "carol",
                  "--delete-config", "SCRAM-SHA-512")
    out = kafka_configs(b, "--describe", "--entity-type", "users", "--entity-name", "carol").stdout.decode()
    assert "SCRAM-SHA-512" not in out and "SCRAM-SHA-256=iterations=4096" in out, out
    wait_until(lambda: produce(conf(sasl_broker, pki, "SCRAM-SHA-512", "carol", "carol-2"), topic, 1, 5) != [], 30,
               "the deleted credential refused")
    assert produce(conf(sasl_broker, pki, "SCRAM-SHA-256", "carol", "carol-1"), topic, 1) == []


def test_broker_configs_never_show_secrets(sasl_broker):
    """kafka-configs --describe --entity-type brokers --all: the JAAS configurations (with the
    PLAIN users' passwords) are listed as sensitive, without their values, as Kafka lists
    PASSWORD-typed configs; the other settings show their values."""
    out = kafka_configs(sasl_broker.bootstrap, "--describe", "--entity-type", "brokers",
                        "--entity-name", "1", "--all").stdout.decode()
    assert "listener.name.sasl_plaintext.plain.sasl.jaas.config=null sensitive=true" in out, out
    assert "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512 sensitive=false" in out, out
    for password in PLAIN_USERS.values():
        assert password not in out, out


def test_admin_api_validation_of_scram_credentials(sasl_broker):
    a = AdminClient({"bootstrap.servers": sasl_broker.bootstrap})
    ok = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10000)
    futures = a.alter_user_scram_credentials([
        UserScramCredentialUpsertion("dave", ok, b"dave-pw"),
        UserScramCredentialUpsertion("eve", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"eve-pw"),
    ])
    futures["dave"].result(30)
    with pytest.raises(KafkaException) as e:
        futures["eve"].result(30)
    assert "iterations" in str(e.value).lower(), e.value
    described = a.describe_user_scram_credentials(["dave", "nobody"])
    info = described["dave"].result(30)
    assert [(c.mechanism, c.iterations) for c in info.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_256, 10000)]
    with pytest.raises(KafkaException) as e:
        described["nobody"].result(30)
    assert "does not exist" in str(e.value), e.value


def test_kafka_python_with_scram_over_sasl_ssl(sasl_broker, pki, scram_users, topic):
    from kafka import KafkaConsumer, KafkaProducer
    create_topic(sasl_broker.bootstrap, topic, 2)
    common = dict(bootstrap_servers=f"127.0.0.1:{sasl_broker.sasl_ssl_port}", security_protocol="SASL_SSL",
                  ssl_cafile=str(pki / "ca.pem"), sasl_mechanism="SCRAM-SHA-512",
                  sasl_plain_username=scram_users["SCRAM-SHA-512"], sasl_plain_password=SCRAM_PASSWORD)
    p = KafkaProducer(acks="all", **common)
    for i in range(100):
        p.send(topic, f"kp-{i}".encode())
    p.flush(30)
    p.close()
    c = KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", consumer_timeout_ms=20000,
                      **common)
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == 100:
            break
    c.close()
    assert sorted(got) == sorted(f"kp-{i}".encode() for i in range(100))


@pytest.mark.parametrize("mechanism,tls", [("scram-sha-256", False), ("scram-sha-512", True), ("plain", True)])
def test_kafkajs_over_sasl(sasl_broker, pki, scram_users, topic, tmp, mechanism, tls):
    user, password = credentials(mechanism.upper(), scram_users)
    auth = {"sasl_mechanism": mechanism, "sasl_username": user, "sasl_password": password}
    if tls:
        auth["ssl_ca"] = str(pki / "ca.pem")
    bootstrap = f"127.0.0.1:{sasl_broker.sasl_ssl_port if tls else sasl_broker.sasl_port}"
    js("create-topic", bootstrap, topic=topic, partitions=2, **auth)
    data = tmp / "in.tsv"
    data.write_text("".join(f"{f'k{i}'.encode().hex()}\t{f'js-{i}'.encode().hex()}\t-\t-\n" for i in range(50)))
    js("produce", bootstrap, topic=topic, input=data, out=tmp / "acked.jsonl", **auth)
    js("consume-group", bootstrap, topic=topic, group=f"g-{topic}", out=tmp / "got.jsonl", expected=50, **auth)
    assert len((tmp / "got.jsonl").read_text().splitlines()) == 50


def test_java_console_tools_with_scram_over_sasl_ssl(sasl_broker, pki, scram_users, topic, tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_SSL\n"
                     "sasl.mechanism=SCRAM-SHA-256\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                     f'username="{scram_users["SCRAM-SHA-256"]}" password="{SCRAM_PASSWORD}";\n'
                     "ssl.truststore.type=PEM\n"
                     f"ssl.truststore.location={pki / 'ca.pem'}\n")
    b = f"127.0.0.1:{sasl_broker.sasl_ssl_port}"
    kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", b, "--command-config", str(props),
               "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1")
    lines = "".join(f"line-{i}\n" for i in range(40)).encode()
    kafka_tool("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", b, "--topic", topic,
               "--command-config", str(props), input=lines)
    r = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", b, "--topic", topic,
                   "--command-config", str(props), "--from-beginning", "--max-messages", "40",
                   "--timeout-ms", "30000", "--group", f"g-{topic}")
    assert sorted(r.stdout.decode().split()) == sorted(f"line-{i}" for i in range(40))
    # kafka-configs itself over SASL_SSL, authenticated as a SCRAM user.
    out = kafka_configs(b, "--describe", "--entity-type", "users", "--entity-name", "scram512",
                        config=props).stdout.decode()
    assert "SCRAM-SHA-512=iterations=4096" in out, out


def test_kcat_with_plain_over_sasl_ssl(sasl_broker, pki, topic):
    auth = ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={pki / 'ca.pem'}",
            "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice", "-X", f"sasl.password={PLAIN_USERS['alice']}"]
    b = f"127.0.0.1:{sasl_broker.sasl_ssl_port}"
    create_topic(sasl_broker.bootstrap, topic, 1)
    data = b"".join(f"k{i}\tv{i}\n".encode() for i in range(100))
    run(["kcat", "-P", "-b", b, *auth, "-t", topic, "-K", "\t", "-X", "acks=all"], input=data, timeout=60,
        what="kcat -P over SASL_SSL")
    r = run(["kcat", "-C", "-b", b, *auth, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%k=%s\n"],
            timeout=60, what="kcat -C over SASL_SSL")
    assert r.stdout.decode().split() == [f"k{i}=v{i}" for i in range(100)]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_a_wrong_password_is_refused_counted_and_nobody_else_is_affected(sasl_broker, pki, scram_users, topic,
                                                                         mechanism):
    create_topic(sasl_broker.bootstrap, topic, 1)
    user, password = credentials(mechanism, scram_users)
    before = sasl_metric(sasl_broker, "SASL_PLAINTEXT", mechanism, "failure")
    errors = []
    bad = Producer({**conf(sasl_broker, pki, mechanism, user, "not-" + password),
                    "error_cb": lambda e: errors.append(e.str())})
    bad.produce(topic, b"never")
    deadline = time.time() + 10
    while not errors and time.time() < deadline:
        bad.poll(0.2)
    # The broker's own message reaches the application.
    assert any("Authentication failed" in e for e in errors), errors
    wait_until(lambda: sasl_metric(sasl_broker, "SASL_PLAINTEXT", mechanism, "failure") > before, 10,
               "the failure counted in skein_sasl_authentications_total")
    # Everyone else is served meanwhile.
    assert produce(conf(sasl_broker, pki, mechanism, user, password), topic, 20) == []
    assert produce({"bootstrap.servers": sasl_broker.bootstrap}, topic, 20) == []
    # The log line names the failure, never the password tried.
    log = sasl_broker.log_path.read_text(errors="replace")
    assert "SASL authentication failed" in log
    assert "not-" + password not in log


# ------------------------------------------------------------------------------------------
# The protocol sequence, with frames written by hand (what no well-behaved client sends).


class Wire:
    def __init__(self, port: int):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.corr = 0

    def send(self, api: int, version: int, body: bytes, client_id: bytes = b"raw") -> None:
        self.corr += 1
        header = struct.pack(">hhih", api, version, self.corr, len(client_id)) + client_id
        frame = header + body
        self.s.sendall(struct.pack(">i", len(frame)) + frame)

    def recv(self) -> bytes:
        size = struct.unpack(">i", self._exact(4))[0]
        body = self._exact(size)
        assert struct.unpack(">i", body[:4])[0] == self.corr
        return body[4:]

    def _exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.s.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return out

    def closed_by_broker(self) -> bool:
        try:
            self.s.settimeout(5)
            return self.s.recv(1) == b""
        except ConnectionResetError:
            return True

    def handshake(self, mechanism: str) -> tuple[int, list[str]]:
        m = mechanism.encode()
        self.send(17, 1, struct.pack(">h", len(m)) + m)
        r = self.recv()
        code, n = struct.unpack(">hi", r[:6])
        mechs, at = [], 6
        for _ in range(n):
            ln = struct.unpack(">h", r[at:at + 2])[0]
            mechs.append(r[at + 2:at + 2 + ln].decode())
            at += 2 + ln
        return code, mechs

    def authenticate(self, token: bytes) -> tuple[int, str | None, int]:
        """SaslAuthenticate v1: (error code, message, session lifetime ms)."""
        self.send(36, 1, struct.pack(">i", len(token)) + token)
        r = self.recv()
        code, ln = struct.unpack(">hh", r[:4])
        msg = r[4:4 + ln].decode() if ln >= 0 else None
        at = 4 + max(ln, 0)
        blen = struct.unpack(">i", r[at:at + 4])[0]
        at += 4 + max(blen, 0)
        lifetime = struct.unpack(">q", r[at:at + 8])[0]
        return code, msg, lifetime

    def metadata(self) -> bytes:
        self.send(3, 1, struct.pack(">i", -1))
        return self.recv()

    def close(self) -> None:
        self.s.close()


def test_requests_out_of_the_sasl_sequence_close_the_connection(sasl_broker, topic):
    # A request before authentication.
    w = Wire(sasl_broker.sasl_port)
    w.send(3, 1, struct.pack(">i", -1))
    assert w.closed_by_broker(), "Metadata before SASL authentication was served"
    # An unknown mechanism: Kafka's error 33 with the enabled ones, then closed.
    w = Wire(sasl_broker.sasl_port)
    assert w.handshake("GSSAPI") == (33, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    assert w.closed_by_broker()
    # A request between handshake and authentication.
    w = Wire(sasl_broker.sasl_port)
    assert w.handshake("PLAIN")[0] == 0
    w.send(3, 1, struct.pack(">i", -1))
    assert w.closed_by_broker()
    # Garbage as the PLAIN token: SASL_AUTHENTICATION_FAILED (58) with a message, then closed.
    w = Wire(sasl_broker.sasl_port)
    assert w.handshake("PLAIN")[0] == 0
    code, msg, _ = w.authenticate(b"garbage")
    assert code == 58 and "PLAIN" in (msg or ""), (code, msg)
    assert w.closed_by_broker()
    # A truncated SaslAuthenticate frame (the size promises more than is sent), then gone.
    w = Wire(sasl_broker.sasl_port)
    assert w.handshake("SCRAM-SHA-256")[0] == 0
    w.s.sendall(struct.pack(">i", 200) + struct.pack(">hhi", 36, 1, 99) + b"\x00")
    w.close()
    # A v0 handshake (before KIP-152): the token follows as a bare frame, answered bare.
    w = Wire(sasl_broker.sasl_port)
    m = b"PLAIN"
    w.send(17, 0, struct.pack(">h", len(m)) + m)
    assert struct.unpack(">h", w.recv()[:2])[0] == 0
    token = b"\0alice\0" + PLAIN_USERS["alice"].encode()
    w.s.sendall(struct.pack(">i", len(token)) + token)
    assert w._exact(4) == b"\0\0\0\0", "PLAIN's empty answer"
    assert len(w.metadata()) > 0
    w.close()
    w = Wire(sasl_broker.sasl_port)
    w.send(17, 0, struct.pack(">h", len(m)) + m)
    w.recv()
    bad = b"\0alice\0wrong"
    w.s.sendall(struct.pack(">i", len(bad)) + bad)
    assert w.closed_by_broker(), "a wrong bare PLAIN token was accepted"
    # SaslHandshake on a listener without SASL: ILLEGAL_SASL_STATE (34), the connection stays.
    w = Wire(sasl_broker.port)
    assert w.handshake("PLAIN")[0] == 34
    assert len(w.metadata()) > 0
    w.close()
    # The right credentials on a fresh connection still work, as do other clients.
    w = Wire(sasl_broker.sasl_port)
    assert w.handshake("PLAIN")[0] == 0
    code, msg, lifetime = w.authenticate(b"\0alice\0" + PLAIN_USERS["alice"].encode())
    assert (code, lifetime) == (0, 0), (code, msg)
    assert len(w.metadata()) > 0
    w.close()
    assert sasl_broker.running()


def test_sessions_expire_without_reauthentication_and_clients_reauthenticate(sasl_broker, pki, scram_users, topic):
    """KIP-368 with connections.max.reauth.ms=2000 on the REAUTH listener."""
    w = Wire(sasl_broker.reauth_port)
    assert w.handshake("PLAIN")[0] == 0
    code, msg, lifetime = w.authenticate(b"\0alice\0" + PLAIN_USERS["alice"].encode())
    assert (code, lifetime) == (0, 2000), (code, msg, lifetime)
    assert len(w.metadata()) > 0
    # Re-authenticating in time keeps the connection; as another user is refused.
    assert w.handshake("PLAIN")[0] == 0
    assert w.authenticate(b"\0alice\0" + PLAIN_USERS["alice"].encode())[0] == 0
    assert len(w.metadata()) > 0
    time.sleep(2.5)
    w.send(3, 1, struct.pack(">i", -1))
    assert w.closed_by_broker(), "a request after the session expired was served"
    w = Wire(sasl_broker.reauth_port)
    assert w.handshake("PLAIN")[0] == 0
    assert w.authenticate(b"\0alice\0" + PLAIN_USERS["alice"].encode())[0] == 0
    assert w.handshake("PLAIN")[0] == 0
    code, msg, _ = w.authenticate(b"\0admin\0" + PLAIN_USERS["admin"].encode())
    assert code == 58 and "Cannot change principals" in (msg or ""), (code, msg)
    assert w.closed_by_broker()

    # A producer that keeps writing across several session lifetimes loses nothing.
    create_topic(sasl_broker.bootstrap, topic, 1)
    user = scram_users["SCRAM-SHA-256"]
    before = sasl_metric(sasl_broker, "REAUTH", "SCRAM-SHA-256", "success")
    c = conf(sasl_broker, pki, "SCRAM-SHA-256", user, SCRAM_PASSWORD, port=sasl_broker.reauth_port)
    errors: list[str] = []
    p = Producer({**c, "acks": "all", "enable.idempotence": True})
    deadline = time.time() + 7
    sent = 0
    while time.time() < deadline:
        p.produce(topic, f"r-{sent}".encode(), on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
        sent += 1
        p.poll(0.01)
    assert p.flush(30) == 0
    assert errors == [], errors[:5]
    assert sasl_metric(sasl_broker, "REAUTH", "SCRAM-SHA-256", "success") - before >= 3, \
        "the client authenticated once in 7 s although sessions last 2 s"
    got = consume_group(conf(sasl_broker, pki, "SCRAM-SHA-256", user, SCRAM_PASSWORD), topic, sent, f"g-{topic}")
    assert len(got) == sent
