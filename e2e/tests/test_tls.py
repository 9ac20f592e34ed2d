"""TLS listeners: named listeners with Kafka's `listeners` / `listener.security.protocol.map`
syntax, SSL with PEM keystores (rustls in the broker), client certificates
(`ssl.client.auth=required` on one listener through `listener.name.<name>.` overrides), and the
failures a user meets: no client certificate, an untrusted one, plaintext on a TLS port, TLS on a
plaintext port, a listener whose TLS material is missing. Clients: confluent-kafka
(librdkafka), kcat and Apache Kafka's Java console tools.

Certificates are made with the openssl CLI (installed by e2e/setup.sh)."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import SkeinBroker, free_port
from pki import make_ca, make_cert
from util import consume_group, kafka_tool, produce_numbered as produce, run, wait_until

pytestmark = pytest.mark.tls


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    if shutil.which("openssl") is None:
        pytest.fail("openssl not installed: run e2e/setup.sh", pytrace=False)
    d = tmp_path_factory.mktemp("pki")
    make_ca(d, "ca")
    make_ca(d, "rogue-ca")
    make_cert(d, "server", "ca", "localhost", "DNS:localhost,IP:127.0.0.1")
    make_cert(d, "server2", "ca", "localhost", "DNS:localhost,IP:127.0.0.1")
    make_cert(d, "alice", "ca", "alice", None)
    make_cert(d, "mallory", "rogue-ca", "mallory", None)
    return d


class TlsBroker(SkeinBroker):
    """skein-broker with three listeners: PLAINTEXT, SSL (server certificate only) and MTLS (SSL
    with client certificates required)."""

    def __init__(self, workdir: Path, pki: Path):
        self.ssl_port = free_port()
        self.mtls_port = free_port()
        keystore = workdir / "keystore.pem"
        workdir.mkdir(parents=True, exist_ok=True)
        shutil.copy(pki / "server-keystore.pem", keystore)
        self.keystore = keystore
        super().__init__(workdir, {})
        listeners = (f"PLAINTEXT://127.0.0.1:{self.port},SSL://127.0.0.1:{self.ssl_port},"
                     f"MTLS://127.0.0.1:{self.mtls_port}")
        self.overrides.update({
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
            "inter.broker.listener.name": "PLAINTEXT",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki / "ca.pem"),
            "listener.name.mtls.ssl.client.auth": "required",
        })


@pytest.fixture(scope="module")
def tls_broker(pki, tmp_path_factory):
    if __import__("os").environ.get("E2E_TARGET", "skein") != "skein":
        pytest.skip("the TLS tests configure skein-broker's listeners")
    b = TlsBroker(tmp_path_factory.mktemp("tls-broker"), pki)
    b.start()
    yield b
    b.stop()


def ssl_conf(pki: Path, port: int, client: str | None = None, ca: str = "ca") -> dict:
    c = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "ssl",
         "ssl.ca.location": str(pki / f"{ca}.pem"), "ssl.endpoint.identification.algorithm": "https"}
    if client:
        c["ssl.certificate.location"] = str(pki / f"{client}.pem")
        c["ssl.key.location"] = str(pki / f"{client}.key")
    return c


def create_topic(conf: dict, topic: str, partitions: int = 3) -> None:
    a = AdminClient(conf)
    for f in a.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30).values():
        f.result(30)


def test_large_fetches_over_ssl_arrive_whole_and_at_once(tls_broker, pki, topic, tmp_path):
    """Megabyte fetch responses over TLS to Kafka's Java consumer (ConsumerPerformance): the tail
    of each response must leave the broker with it. A TLS session holds back what the socket could
    not take until it is flushed; unflushed, the consumer waited out its request timeout for the
    rest and read a few hundred records a second."""
    create_topic({"bootstrap.servers": tls_broker.bootstrap}, topic, partitions=8)
    n = 200_000
    # Kafka's own producer tool, as the benchmark (16 KiB batches: responses of many batches).
    kafka_tool("org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", str(n),
               "--record-size", "1024", "--throughput", "-1", "--command-property",
               f"bootstrap.servers={tls_broker.bootstrap}", "acks=1", timeout=120)
    conf = tmp_path / "ssl.properties"
    conf.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={pki / 'ca.pem'}\n")
    start = time.monotonic()
    out = kafka_tool("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server",
                     f"127.0.0.1:{tls_broker.ssl_port}", "--topic", topic, "--messages", str(n),
                     "--timeout", "20000", "--group", f"g-{topic}", "--command-config", str(conf),
                     timeout=120).stdout.decode()
    lines = [ln for ln in out.splitlines() if ln.strip()]
    hi = next(i for i, ln in enumerate(lines) if ln.startswith("start.time"))
    row = dict(zip([k.strip() for k in lines[hi].split(",")], [v.strip() for v in lines[hi + 1].split(",")]))
    got = int(row["data.consumed.in.nMsg"])
    assert got == n, f"{got} of {n} records in {time.monotonic() - start:.0f} s over SSL:\n{out[-1500:]}"


def test_ssl_listener_serves_produce_consume_and_admin_with_its_own_endpoints(tls_broker, pki, topic):
    conf = ssl_conf(pki, tls_broker.ssl_port)
    create_topic(conf, topic)
    # Metadata on a listener names the brokers' endpoints of that listener.
    md = AdminClient(conf).list_topics(timeout=30)
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", tls_broker.ssl_port)]
    md = AdminClient({"bootstrap.servers": tls_broker.bootstrap}).list_topics(timeout=30)
    assert [b.port for b in md.brokers.values()] == [tls_broker.port]
    assert topic in md.topics

    assert produce(conf, topic, 500) == []
    got = consume_group(conf, topic, 500, f"g-{topic}")
    assert sorted(got) == sorted(f"value-{i}".encode() for i in range(500))
    # The records are the same ones a plaintext client reads.
    plain = consume_group({"bootstrap.servers": tls_broker.bootstrap}, topic, 500, f"p-{topic}")
    assert len(plain) == 500


def test_client_certificates_are_required_where_configured(tls_broker, pki, topic):
    create_topic({"bootstrap.servers": tls_broker.bootstrap}, topic, 1)
    # With a certificate the broker's truststore accepts: served.
    assert produce(ssl_conf(pki, tls_broker.mtls_port, client="alice"), topic, 50) == []
    # Without one, or with one from another CA: refused at the handshake.
    for client in (None, "mallory"):
        conf = {**ssl_conf(pki, tls_broker.mtls_port, client=client,
                           ca="ca"), "socket.timeout.ms": 5000}
        errors = produce(conf, topic, 1, timeout=6)
        assert errors, f"a client with certificate {client!r} was served on the MTLS listener"
    # The SSL listener itself does not ask for one.
    assert produce(ssl_conf(pki, tls_broker.ssl_port), topic, 10) == []
    got = consume_group(ssl_conf(pki, tls_broker.mtls_port, client="alice"), topic, 60, f"g-{topic}")
    assert len(got) == 60


def test_wrong_protocol_on_a_port_fails_and_the_broker_keeps_serving(tls_broker, pki, topic):
    # A plaintext client on the TLS port.
    a = AdminClient({"bootstrap.servers": f"127.0.0.1:{tls_broker.ssl_port}", "socket.timeout.ms": 3000})
    with pytest.raises(KafkaException):
        a.list_topics(timeout=5)
    # A TLS client on the plaintext port: the ClientHello is not a Kafka frame.
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    with socket.create_connection(("127.0.0.1", tls_broker.port), timeout=5) as s:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with ctx.wrap_socket(s, server_hostname="localhost"):
                pass
    # A client that connects and never says hello (the handshake times out, nothing else waits).
    idle = socket.create_connection(("127.0.0.1", tls_broker.ssl_port), timeout=5)
    try:
        create_topic(ssl_conf(pki, tls_broker.ssl_port), topic, 1)
        assert produce(ssl_conf(pki, tls_broker.ssl_port), topic, 20) == []
        assert produce({"bootstrap.servers": tls_broker.bootstrap}, topic, 20) == []
    finally:
        idle.close()
    assert tls_broker.running()


def test_certificate_subjects_are_principals_mapped_by_kafkas_rules(pki, tmp_path, topic):
    """mTLS principals as Kafka makes them: the subject in RFC 2253 form, mapped by
    ssl.principal.mapping.rules, authorized by ACLs; super.users names a certificate principal
    (a ';'-separated list, since names hold commas); a subject no rule maps is turned away."""
    if __import__("os").environ.get("E2E_TARGET", "skein") != "skein":
        pytest.skip("configures skein-broker's listeners")
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)
    # openssl writes the subject in the order given; Java (and Kafka) print it the other way round.
    make_cert(pki, "app-alice", "ca", "/O=skein/OU=apps/CN=Alice", None)
    make_cert(pki, "ops-admin", "ca", "/O=skein/CN=admin", None)
    make_cert(pki, "stranger", "ca", "/O=elsewhere/CN=stranger", None)
    b = SkeinBroker(tmp_path / "broker", {})
    mtls_port = free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{b.port},MTLS://127.0.0.1:{mtls_port}"
    b.overrides.update({
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,MTLS:SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki / "server-keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.pem"),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules":
            "RULE:^CN=([A-Za-z]+),OU=apps,O=skein$/$1/L, RULE:^(CN=[a-z]+,O=skein)$/$1/",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:CN=admin,O=skein;User:nobody",
    })
    b.start()
    try:
        admin_conf = ssl_conf(pki, mtls_port, client="ops-admin")
        alice_conf = ssl_conf(pki, mtls_port, client="app-alice")
        create_topic(admin_conf, topic, 1)  # a super user by its certificate's name
        errors = produce(alice_conf, topic, 5, timeout=10)
        assert errors and any("AUTHORIZATION" in e for e in errors), errors
        a = AdminClient(admin_conf)
        acl = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
        for f in a.create_acls([acl]).values():
            f.result(30)
        # The rule lower-cased CN=Alice: the ACL for User:alice applies.
        assert produce(alice_conf, topic, 20) == []
        # A certificate the truststore accepts but no rule maps: the client is not authenticated.
        errors = produce({**ssl_conf(pki, mtls_port, client="stranger"), "socket.timeout.ms": 5000}, topic, 1,
                         timeout=6)
        assert errors, "a certificate no mapping rule applies to was served"
        assert produce(alice_conf, topic, 5) == []
        text = __import__("urllib.request").request.urlopen(
            f"http://127.0.0.1:{b.metrics_port}/metrics", timeout=10).read().decode()
        failures = [line for line in text.splitlines()
                    if line.startswith('skein_ssl_authentication_failures_total{listener="MTLS"}')]
        assert failures and float(failures[0].split()[-1]) >= 1, failures
    finally:
        b.stop()


def test_kcat_over_ssl(tls_broker, pki, topic):
    tls = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={pki / 'ca.pem'}"]
    b = f"127.0.0.1:{tls_broker.ssl_port}"
    create_topic(ssl_conf(pki, tls_broker.ssl_port), topic, 1)
    data = b"".join(f"k{i}\tv{i}\n".encode() for i in range(100))
    run(["kcat", "-P", "-b", b, *tls, "-t", topic, "-K", "\t", "-X", "acks=all"], input=data, timeout=60,
        what="kcat -P over SSL")
    r = run(["kcat", "-C", "-b", b, *tls, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%k=%s\n"],
            timeout=60, what="kcat -C over SSL")
    assert r.stdout.decode().split() == [f"k{i}=v{i}" for i in range(100)]


def test_java_console_tools_over_ssl_with_pem_stores(tls_broker, pki, topic, tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SSL\n"
                     "ssl.truststore.type=PEM\n"
                     f"ssl.truststore.location={pki / 'ca.pem'}\n"
                     "ssl.keystore.type=PEM\n"
                     f"ssl.keystore.location={pki / 'alice-keystore.pem'}\n")
    b = f"127.0.0.1:{tls_broker.mtls_port}"
    kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", b, "--command-config", str(props),
               "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1")
    lines = "".join(f"line-{i}\n" for i in range(40)).encode()
    kafka_tool("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", b, "--topic", topic,
               "--command-config", str(props), input=lines)
    r = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", b, "--topic", topic,
                   "--command-config", str(props), "--from-beginning", "--max-messages", "40",
                   "--timeout-ms", "30000")
    assert sorted(r.stdout.decode().split()) == sorted(f"line-{i}" for i in range(40))


def test_certificates_are_reloaded_when_the_file_changes(tls_broker, pki):
    def served_serial() -> int:
        ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
        with socket.create_connection(("127.0.0.1", tls_broker.ssl_port), timeout=5) as s:
            with ctx.wrap_socket(s, server_hostname="localhost") as t:
                der = t.getpeercert(binary_form=True)
        return hash(der)

    before = served_serial()
    # Rotate as Kubernetes does: the new file appears in one step.
    new = tls_broker.keystore.with_suffix(".new")
    new.write_text((pki / "server2-keystore.pem").read_text())
    new.replace(tls_broker.keystore)
    wait_until(lambda: served_serial() != before, 30, "the broker serving the new certificate")
    rotated = served_serial()
    # A file that cannot be loaded (a rotation caught half-way) does not break the listener:
    # the last good certificate stays in use.
    tls_broker.keystore.write_text("not a certificate\n")
    time.sleep(6)
    assert served_serial() == rotated
    assert produce(ssl_conf(pki, tls_broker.ssl_port), "reload-check", 5) == []


@pytest.mark.parametrize("overrides,message", [
    ({"listeners": "SSL://127.0.0.1:{p}"}, "has no certificate"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:{p}"}, "GSSAPI (Kerberos, Kafka's default) is not supported"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:{p}", "sasl.enabled.mechanisms": "PLAIN"}, "has no users"),
    ({"listeners": "X://127.0.0.1:{p}", "listener.security.protocol.map": "X:TLS"}, "unknown security protocol"),
    ({"listeners": "SSL://127.0.0.1:{p}", "ssl.keystore.location": "/nonexistent/keystore.pem"},
     "cannot read keystore"),
])
def test_a_listener_that_cannot_be_served_as_configured_stops_the_start(tmp_path, overrides, message):
    b = SkeinBroker(tmp_path / "bad", {})
    p = free_port()
    cmd = [str(b.binary), "--data-dir", str(tmp_path / "data"), "--metrics-listen", ""]
    for k, v in overrides.items():
        cmd += ["--override", f"{k}={v.format(p=p)}"]
    r = subprocess.run(cmd, capture_output=True, timeout=30)
    assert r.returncode != 0
    err = r.stderr.decode()
    assert message in err, err
    # Nothing listens in plaintext in its place.
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", p)) != 0
