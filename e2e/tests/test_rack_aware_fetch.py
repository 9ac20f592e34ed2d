"""Fetch from the closest replica (KIP-392) on a 3-broker local cluster whose brokers sit in racks
rack-1, rack-2, rack-3 (`broker.rack=rack-{id}`) with Kafka's RackAwareReplicaSelector.

A consumer naming a follower's rack (`client.rack`) is sent there by the leader
(`preferred_read_replica`) and reads every record from that follower; the follower's own
bytes-out counter proves it (a follower serves no replication fetches, so anything it sends went
to the consumer). A consumer in the leader's rack, or in a rack with no replica, reads from the
leader. librdkafka and the Java consumer (Kafka's console consumer) both follow the preference."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

import util
from brokers import LocalCluster
from conftest import TARGET, _active

pytestmark = pytest.mark.skipif(TARGET != "skein", reason="runs Skein's own local platform (skein-operator local)")

OVERRIDES = {
    "broker.rack": "rack-{id}",
    "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector",
    "broker.heartbeat.interval.ms": "500",
}
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"


@pytest.fixture
def racked(tmp_path):
    c = LocalCluster(tmp_path / "cluster", 3, OVERRIDES)
    _active.append(c)
    c.start()
    yield c
    code = c.stop()
    _active.remove(c)
    assert code == 0, f"skein-operator local exited with {code}:\n{c.log_tail(60)}"


def bytes_out(c: LocalCluster, broker_id: int, topic: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{c.metrics_port + broker_id - 1}/metrics",
                                  timeout=10).read().decode()
    m = re.search(r'^skein_topic_bytes_out_total\{topic="%s"\} (\S+)$' % re.escape(topic), text, re.M)
    return float(m[1]) if m else 0.0


def leader_and_replicas(c: LocalCluster, topic: str) -> tuple[int, list[int]]:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    p = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
    return p.leader, sorted(p.isrs)


def consume_librdkafka(c: LocalCluster, topic: str, rack: str, n: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"g-{rack}-{time.time_ns()}",
                     "client.rack": rack, "enable.auto.commit": False, "log_level": 3})
    try:
        cons.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        return got
    finally:
        cons.close()


def test_consumers_read_from_a_follower_in_their_rack(racked, topic, tmp_path):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": racked.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    util.wait_until(lambda: len(leader_and_replicas(racked, topic)[1]) == 3, 60, "3 replicas in sync")
    p = Producer({"bootstrap.servers": racked.bootstrap, "acks": "all", "linger.ms": 5})
    values = [f"value-{i:05d}".encode() for i in range(300)]
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(30) == 0
    leader, isr = leader_and_replicas(racked, topic)
    follower, other = [b for b in isr if b != leader]
    # The follower knows the final high watermark from its next fetch.
    time.sleep(1.5)

    # librdkafka in the follower's rack: every record, served by the follower.
    before = {b: bytes_out(racked, b, topic) for b in (1, 2, 3)}
    assert consume_librdkafka(racked, topic, f"rack-{follower}", len(values)) == values
    after = {b: bytes_out(racked, b, topic) for b in (1, 2, 3)}
    served = after[follower] - before[follower]
    assert served >= sum(len(v) for v in values), (before, after)
    assert after[other] == before[other], "the other follower served nothing"

    # In the leader's rack, or a rack with no replica: the leader serves, the followers nothing.
    for rack in (f"rack-{leader}", "rack-9"):
        before = {b: bytes_out(racked, b, topic) for b in (1, 2, 3)}
        assert consume_librdkafka(racked, topic, rack, len(values)) == values
        after = {b: bytes_out(racked, b, topic) for b in (1, 2, 3)}
        assert after[follower] == before[follower] and after[other] == before[other], (rack, before, after)

    # The Java consumer (Kafka's console consumer) in the other follower's rack.
    before = bytes_out(racked, other, topic)
    r = util.kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", racked.bootstrap, "--topic", topic,
                        "--from-beginning", "--max-messages", str(len(values)), "--timeout-ms", "60000",
                        "--command-property", f"client.rack=rack-{other}", timeout=120)
    assert r.stdout.decode().split() == [v.decode() for v in values]
    assert bytes_out(racked, other, topic) - before >= sum(len(v) for v in values)
