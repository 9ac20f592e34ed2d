"""Transactions with real clients (confluent-kafka / librdkafka, and kafkajs): commit and abort, what
read_committed and read_uncommitted consumers see, the last stable offset holding read_committed
readers back while a transaction is open, fencing of a zombie producer, offsets committed inside
a transaction (send_offsets_to_transaction), and recovery of it all after kill -9."""

from __future__ import annotations

import time
import uuid

import pytest

import util
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.transactions


def create_topic(bootstrap: str, topic: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    for f in fs.values():
        f.result(30)


def txn_producer(bootstrap: str, tid: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                  "transaction.timeout.ms": 60_000, "linger.ms": 5, **extra})
    p.init_transactions(30)
    return p


def read_all(bootstrap: str, topic: str, isolation: str, partitions: int = 3,
             idle_s: float = 3.0, limit_s: float = 30.0) -> list[str]:
    """Every value in the topic, read from the start until nothing arrives for idle_s."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "enable.partition.eof": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[str] = []
    deadline = time.time() + limit_s
    last = time.time()
    try:
        while time.time() < deadline and time.time() - last < idle_s:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            out.append(m.value().decode())
            last = time.time()
    finally:
        c.close()
    return out


def produce_txn(p: Producer, topic: str, values: list[str], commit: bool) -> None:
    p.begin_transaction()
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), key=str(i).encode())
    if commit:
        p.commit_transaction(30)
    else:
        p.flush(30)
        p.abort_transaction(30)


def test_read_committed_sees_exactly_the_committed_records(broker, topic):
    create_topic(broker.bootstrap, topic)
    p = txn_producer(broker.bootstrap, f"tx-{topic}")
    committed = [f"c1-{i}" for i in range(30)] + [f"c2-{i}" for i in range(10)]
    aborted = [f"a-{i}" for i in range(20)]
    produce_txn(p, topic, committed[:30], commit=True)
    produce_txn(p, topic, aborted, commit=False)
    produce_txn(p, topic, committed[30:], commit=True)

    rc = read_all(broker.bootstrap, topic, "read_committed")
    assert sorted(rc) == sorted(committed), "read_committed must see every committed record, no aborted one"
    ru = read_all(broker.bootstrap, topic, "read_uncommitted")
    assert sorted(ru) == sorted(committed + aborted), "read_uncommitted sees aborted records too"


def test_an_open_transaction_holds_read_committed_readers_at_the_last_stable_offset(broker, topic):
    create_topic(broker.bootstrap, topic, partitions=1)
    p = txn_producer(broker.bootstrap, f"tx-{topic}")
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    p.begin_transaction()
    p.produce(topic, value=b"open-1")
    p.flush(30)
    # A non-transactional record after the open transaction is not readable either.
    plain.produce(topic, value=b"plain-after")
    plain.flush(30)
    assert sorted(read_all(broker.bootstrap, topic, "read_uncommitted", 1)) == ["open-1", "plain-after"]
    assert read_all(broker.bootstrap, topic, "read_committed", 1) == []
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm", "isolation.level": "read_committed"})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    c.close()
    assert (lo, hi) == (0, 0), f"ListOffsets(read_committed) must answer the LSO, got {hi}"
    p.commit_transaction(30)
    assert read_all(broker.bootstrap, topic, "read_committed", 1) == ["open-1", "plain-after"]


def test_a_new_producer_fences_the_old_one(broker, topic):
    create_topic(broker.bootstrap, topic, partitions=1)
    tid = f"tx-{topic}"
    zombie = txn_producer(broker.bootstrap, tid)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie")
    zombie.flush(30)
    fresh = txn_producer(broker.bootstrap, tid)  # aborts the zombie's open transaction
    produce_txn(fresh, topic, ["fresh"], commit=True)
    with pytest.raises(KafkaException) as e:
        zombie.commit_transaction(30)
    assert e.value.args[0].fatal() or "fenced" in str(e.value).lower(), f"zombie not fenced: {e.value}"
    assert read_all(broker.bootstrap, topic, "read_committed", 1) == ["fresh"]


def test_offsets_committed_in_a_transaction_count_only_if_it_commits(broker, topic):
    src, dst = f"{topic}-in", f"{topic}-out"
    create_topic(broker.bootstrap, src, 1)
    create_topic(broker.bootstrap, dst, 1)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        plain.produce(src, value=f"in-{i}".encode())
    plain.flush(30)
    group = f"g-{topic}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.assign([TopicPartition(src, 0, 0)])
    p = txn_producer(broker.bootstrap, f"tx-{topic}")

    def step(n: int, commit: bool) -> None:
        got = []
        while len(got) < n:
            m = c.poll(1.0)
            if m is not None and not m.error():
                got.append(m)
        p.begin_transaction()
        for m in got:
            p.produce(dst, value=("out-" + m.value().decode()).encode())
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)

    step(10, commit=True)
    committed = c.committed([TopicPartition(src, 0)], timeout=10)[0].offset
    assert committed == 10
    step(5, commit=False)
    committed = c.committed([TopicPartition(src, 0)], timeout=10)[0].offset
    assert committed == 10, "an aborted transaction's offsets must not count"
    c.close()
    assert sorted(read_all(broker.bootstrap, dst, "read_committed", 1)) == sorted(f"out-in-{i}" for i in range(10))


def test_transactions_survive_kill_9(new_broker, topic):
    b = new_broker()
    create_topic(b.bootstrap, topic, partitions=2)
    p = txn_producer(b.bootstrap, f"tx-{topic}-a")
    produce_txn(p, topic, [f"c-{i}" for i in range(10)], commit=True)
    produce_txn(p, topic, [f"a-{i}" for i in range(10)], commit=False)
    # A second producer leaves a transaction open; its timeout is short.
    hanging = txn_producer(b.bootstrap, f"tx-{topic}-b", **{"transaction.timeout.ms": 5000})
    hanging.begin_transaction()
    hanging.produce(topic, value=b"hanging", partition=0)
    hanging.flush(30)
    time.sleep(0.5)
    b.kill9()
    b.start()
    # After recovery the aborted records stay hidden; the open transaction holds read_committed
    # readers back until the restarted coordinator aborts it for its timeout, then they move on.
    p2 = txn_producer(b.bootstrap, f"tx-{topic}-a")
    produce_txn(p2, topic, [f"after-{i}" for i in range(5)], commit=True)
    expected = [f"c-{i}" for i in range(10)] + [f"after-{i}" for i in range(5)]
    deadline = time.time() + 60
    got: list[str] = []
    while time.time() < deadline:
        got = read_all(b.bootstrap, topic, "read_committed", 2, idle_s=2)
        if sorted(got) == sorted(expected):
            break
        assert not any(v.startswith("a-") or v == "hanging" for v in got), f"aborted data visible: {got}"
        time.sleep(1)
    assert sorted(got) == sorted(expected)


def test_kafkajs_transactions_commit_abort_and_send_offsets(broker, topic):
    create_topic(broker.bootstrap, topic)
    create_topic(broker.bootstrap, f"{topic}-src", partitions=1)
    group = f"g-{topic}"
    r = util.js("txn-produce", broker.bootstrap, topic=topic, tid=f"js-{topic}", txns=6, per_txn=10,
                abort_every=2, offsets_group=group, offsets_topic=f"{topic}-src")
    assert r == {"committed": 3, "aborted": 3}
    committed = sorted(f"t{t}-r{i}" for t in range(6) if (t + 1) % 2 != 0 for i in range(10))
    assert sorted(read_all(broker.bootstrap, topic, "read_committed")) == committed
    assert len(read_all(broker.bootstrap, topic, "read_uncommitted")) == 60
    # Offsets sent in transactions 1, 3 and 5 (committed) count; 2, 4 and 6 (aborted) do not.
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    got = c.committed([TopicPartition(f"{topic}-src", 0)], timeout=10)[0].offset
    c.close()
    assert got == 5, f"committed offset {got}: the last committed transaction sent 5"
