"""Client quotas (KIP-546) with Kafka's own `kafka-configs --entity-type users|clients`: set,
described and removed through AlterClientQuotas / DescribeClientQuotas, stored by the controller;
a producer and a consumer over their byte-rate quota are throttled (throttle_time_ms, the
connection muted) to within ±20 % of it, without an error."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import SkeinBroker
from util import kafka_tool, wait_until

pytestmark = pytest.mark.quotas

RATE = 200_000  # bytes/s
# The rate is measured over an 11 s window that starts padded to 10 s (Kafka's `Rate`), so a client
# starting at full speed sends about 10 s worth at once, and again each time that burst leaves the
# window: the average holds over whole windows. The runs cover several.
RUN = 50.0


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory):
    if __import__("os").environ.get("E2E_TARGET", "skein") != "skein":
        pytest.skip("starts its own skein-broker")
    b = SkeinBroker(tmp_path_factory.mktemp("quota-broker"), {})
    b.start()
    yield b
    b.stop()


def configs(b: SkeinBroker, *args: str) -> str:
    return kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b.bootstrap, *args).stdout.decode()


def test_kafka_configs_sets_describes_and_removes_quotas(quota_broker):
    configs(quota_broker, "--alter", "--entity-type", "users", "--entity-name", "alice",
            "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    configs(quota_broker, "--alter", "--entity-type", "clients", "--entity-default",
            "--add-config", "request_percentage=50.5")
    configs(quota_broker, "--alter", "--entity-type", "users", "--entity-name", "alice",
            "--entity-type", "clients", "--entity-name", "app", "--add-config", "producer_byte_rate=1024")
    out = configs(quota_broker, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert "producer_byte_rate=1048576.0" in out and "consumer_byte_rate=2097152.0" in out, out
    out = configs(quota_broker, "--describe", "--entity-type", "clients", "--entity-default")
    assert "request_percentage=50.5" in out, out
    out = configs(quota_broker, "--describe", "--entity-type", "users", "--entity-name", "alice",
                  "--entity-type", "clients", "--entity-name", "app")
    assert "producer_byte_rate=1024.0" in out, out

    # A value Kafka refuses is refused.
    r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", quota_broker.bootstrap, "--alter",
                   "--entity-type", "users", "--entity-name", "alice", "--add-config", "producer_byte_rate=-5",
                   check=False)
    assert r.returncode != 0 and b"positive" in r.stdout + r.stderr, r

    configs(quota_broker, "--alter", "--entity-type", "users", "--entity-name", "alice",
            "--delete-config", "consumer_byte_rate")
    out = configs(quota_broker, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert "consumer_byte_rate" not in out and "producer_byte_rate=1048576.0" in out, out
    # Gone after a restart? No: the controller stores them.
    quota_broker.stop()
    quota_broker.start()
    out = configs(quota_broker, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert "producer_byte_rate=1048576.0" in out, out


def test_a_producer_over_its_quota_is_throttled_to_it_without_errors(quota_broker, topic):
    a = AdminClient({"bootstrap.servers": quota_broker.bootstrap})
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    configs(quota_broker, "--alter", "--entity-type", "clients", "--entity-name", "throttled-producer",
            "--add-config", f"producer_byte_rate={RATE}")
    wait_until(lambda: f"producer_byte_rate={RATE}.0" in configs(
        quota_broker, "--describe", "--entity-type", "clients", "--entity-name", "throttled-producer"), 30,
        "the quota visible")
    throttles: list[int] = []
    errors: list[str] = []
    acked: list[tuple[float, int]] = []

    def stats(s: str) -> None:
        for b in json.loads(s).get("brokers", {}).values():
            if b.get("throttle", {}).get("max", 0) > 0:
                throttles.append(b["throttle"]["max"])

    p = Producer({"bootstrap.servers": quota_broker.bootstrap, "client.id": "throttled-producer",
                  "acks": "all", "linger.ms": 5, "batch.size": 16384, "statistics.interval.ms": 1000,
                  "stats_cb": stats, "queue.buffering.max.kbytes": 1024})
    value = b"x" * 1000

    def cb(err, msg):
        if err:
            errors.append(str(err))
        else:
            acked.append((time.monotonic(), len(msg.value())))
    start = time.monotonic()
    while time.monotonic() - start < RUN:
        try:
            p.produce(topic, value, on_delivery=cb)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    p.purge()  # what is still queued was held back by the quota, not acknowledged late
    p.flush(60)
    assert errors == [] or all("Purged" in e for e in errors), errors[:5]
    rate = sum(n for t, n in acked if t - start <= RUN) / RUN
    assert 0.8 * RATE <= rate <= 1.2 * RATE, f"{rate:.0f} B/s against a quota of {RATE}"
    assert throttles, "no throttle_time_ms reached the client"


def test_a_consumer_over_its_quota_is_throttled_to_it(quota_broker, topic):
    a = AdminClient({"bootstrap.servers": quota_broker.bootstrap})
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": quota_broker.bootstrap, "linger.ms": 20})
    for _ in range(14000):
        p.produce(topic, b"y" * 1000)
        p.poll(0)
    p.flush(60)
    configs(quota_broker, "--alter", "--entity-type", "clients", "--entity-name", "throttled-consumer",
            "--add-config", f"consumer_byte_rate={RATE}")
    c = Consumer({"bootstrap.servers": quota_broker.bootstrap, "client.id": "throttled-consumer",
                  "group.id": f"g-{topic}", "enable.auto.commit": False, "fetch.max.bytes": 65536,
                  "message.max.bytes": 65536, "max.partition.fetch.bytes": 65536})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[float, int]] = []
    start = time.monotonic()
    while time.monotonic() - start < RUN:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append((time.monotonic(), len(m.value())))
    c.close()
    assert len(got) < 14000, "the consumer read everything: the quota held nothing back"
    rate = sum(n for _, n in got) / RUN
    assert 0.8 * RATE <= rate <= 1.2 * RATE, f"{rate:.0f} B/s against a quota of {RATE}"
