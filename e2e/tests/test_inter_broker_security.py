"""Replication over a secured inter-broker listener, on a three-broker local cluster:

- `skein-operator local --tls`: every Kafka port is SSL with client certificates required, the
  brokers replicate over it with their own certificates, and the client settings the operator
  writes work for confluent-kafka, kcat and Kafka's Java tools; a client without a certificate is
  turned away; the control plane is mutual TLS (the sessions open, a plaintext peer is refused).
- SASL: `sasl.mechanism.inter.broker.protocol` PLAIN, and SCRAM-SHA-512 whose broker credential is
  created with AlterUserScramCredentials after the start (replication waits for it, as in Kafka).

Each checks what only working replication gives: acks=all with min.insync.replicas=3 succeeds and
every partition's ISR is all three brokers."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic, UserScramCredentialUpsertion, ScramCredentialInfo, \
    ScramMechanism

from brokers import LocalCluster
from util import kafka_tool, run, wait_until

pytestmark = pytest.mark.tls


@pytest.fixture(autouse=True)
def _skein_only():
    if __import__("os").environ.get("E2E_TARGET", "skein") != "skein":
        pytest.skip("configures a local Skein cluster")


def replicated_round_trip(conf: dict, topic: str, n: int = 2000) -> None:
    """Creates `topic` (3 partitions, 3 replicas, min.insync.replicas=3), produces n records with
    acks=all, checks every ISR is full, consumes them all."""
    a = AdminClient(conf)
    for f in a.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "3"})]).values():
        f.result(60)
    errors: list[str] = []
    p = Producer({**conf, "acks": "all", "enable.idempotence": True, "message.timeout.ms": 60000})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), on_delivery=lambda e, m: errors.append(str(e)) if e else None)
        p.poll(0)
    assert p.flush(90) == 0
    assert errors == [], errors[:5]

    def isr_full():
        parts = a.list_topics(topic, timeout=10).topics[topic].partitions
        return all(sorted(pm.isrs) == [1, 2, 3] for pm in parts.values())
    wait_until(isr_full, 30, "every ISR to hold the three brokers")
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = set(), time.time() + 60
    try:
        while len(got) < n and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.add(m.value())
    finally:
        c.close()
    assert len(got) == n


def test_local_tls_serves_and_replicates_over_mutual_tls(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", tls=True)
    cluster.start()
    try:
        conf = cluster.client_conf()
        replicated_round_trip(conf, "tls-orders")
        tls_dir = cluster.data_dir / "tls"
        # kcat with the written client settings.
        r = run(["kcat", "-F", str(tls_dir / "client-librdkafka.properties"), "-b", cluster.bootstrap, "-C",
                 "-t", "tls-orders", "-c", "10", "-e", "-q"], timeout=60, what="kcat -C")
        assert len(r.stdout.decode().split()) == 10
        # Kafka's Java tools with the written client.properties (PEM stores).
        r = kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", cluster.bootstrap,
                       "--command-config", str(tls_dir / "client.properties"), "--describe", "--topic", "tls-orders")
        out = r.stdout.decode()
        assert out.count("Isr: ") == 3 and "ReplicationFactor: 3" in out, out
        # No client certificate: turned away at the handshake.
        bare = {k: v for k, v in conf.items() if not k.startswith("ssl.certificate") and not k.startswith("ssl.key")}
        errors: list[str] = []
        p = Producer({**bare, "message.timeout.ms": 5000, "socket.timeout.ms": 5000})
        p.produce("tls-orders", b"x", on_delivery=lambda e, m: errors.append(str(e)) if e else None)
        p.flush(10)
        assert errors, "a client without a certificate was served"
        # The control port speaks TLS only: a plaintext HTTP/2 client gets no SETTINGS frame back.
        import socket
        with socket.create_connection(("127.0.0.1", cluster.control_port), timeout=10) as s:
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
            try:
                reply = s.recv(64)
            except (ConnectionResetError, socket.timeout):
                reply = b""
        assert reply[:1] != b"\x00", f"the control port answered plaintext HTTP/2: {reply!r}"
        wait_until(lambda: "control-plane connection refused" in "".join(
            cluster.broker_log(i).read_text(errors="replace") for i in (1, 2, 3)), 15,
            "the broker to log the refused control-plane peer")
    finally:
        cluster.stop()


USERS = {"broker": "broker-secret", "admin": "admin-secret"}


def sasl_cluster(workdir: Path, mechanism: str) -> LocalCluster:
    users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    overrides = {
        # The listener `--listen` makes (named PLAINTEXT) speaks SASL_PLAINTEXT.
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": mechanism,
        "listener.name.plaintext.plain.sasl.jaas.config":
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="broker" password="{USERS["broker"]}" {users};',
        "listener.name.plaintext.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="broker" password="{USERS["broker"]}";',
    }
    client = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "admin",
              "sasl.password": USERS["admin"]}
    return LocalCluster(workdir, overrides=overrides, client_conf=client)


def test_replication_over_sasl_plain(tmp_path):
    cluster = sasl_cluster(tmp_path / "cluster", "PLAIN")
    cluster.start()
    try:
        replicated_round_trip(cluster.client_conf(), "sasl-plain")
    finally:
        cluster.stop()


def test_replication_over_sasl_scram_waits_for_the_brokers_credential(tmp_path):
    cluster = sasl_cluster(tmp_path / "cluster", "SCRAM-SHA-512")
    cluster.start()
    try:
        conf = cluster.client_conf()
        a = AdminClient(conf)
        for f in a.create_topics([NewTopic("sasl-scram-early", 1, 3)]).values():
            f.result(60)
        # Without the broker's SCRAM credential the followers cannot authenticate: each broker says
        # why, and nothing reaches three replicas.
        def logged():
            logs = "".join(cluster.broker_log(i).read_text(errors="replace") for i in (1, 2, 3))
            return "cannot authenticate to the leader" in logs
        wait_until(logged, 20, "a broker to log that it cannot authenticate to the leader")
        errors: list[str] = []
        p = Producer({**conf, "acks": "all", "message.timeout.ms": 5000})
        p.produce("sasl-scram-early", b"early", on_delivery=lambda e, m: errors.append(str(e)) if e else None)
        p.flush(15)
        assert errors, "acks=all was acknowledged while no follower could fetch"
        cred = UserScramCredentialUpsertion("broker", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                            USERS["broker"].encode())
        for f in a.alter_user_scram_credentials([cred]).values():
            f.result(30)
        replicated_round_trip(conf, "sasl-scram")
    finally:
        cluster.stop()
