"""Transactions with the Java clients (kafka-clients' KafkaProducer/KafkaConsumer) and Kafka's own
`kafka-transactions` tool (TransactionsCommand):

- commit and abort: read_committed sees exactly the committed records, read_uncommitted all;
- consume-transform-produce with sendOffsetsToTransaction on a 3-broker cluster while the
  transaction coordinator is SIGKILLed: every input record is in the output exactly once;
- a second instance with the same transactional.id fences the first (ProducerFencedException);
- `kafka-transactions list / describe / find-hanging / abort` on a hanging transaction."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import util
from util import java, java_cmd, kafka_tool

pytestmark = pytest.mark.transactions

TXN_TOOL = "org.apache.kafka.tools.TransactionsCommand"


def create(bootstrap: str, topic: str, partitions: int, rf: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=rf)]).values():
        f.result(60)


def values(bootstrap: str, topic: str, partitions: int, isolation: str, idle_s: float = 4.0) -> list[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"v-{time.time_ns()}", "isolation.level": isolation,
                  "enable.auto.commit": False, "log_level": 3})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out, last, deadline = [], time.time(), time.time() + 120
    try:
        while time.time() - last < idle_s and time.time() < deadline:
            m = c.poll(0.3)
            if m is not None and not m.error():
                out.append(m.value().decode())
                last = time.time()
    finally:
        c.close()
    return out


def java_hash(s: str) -> int:
    h = 0
    for ch in s.encode("utf-16-be").decode("utf-16-be"):
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def txn_partition(tid: str, partitions: int = 50) -> int:
    h = java_hash(tid)
    return 0 if h == -(1 << 31) else abs(h) % partitions


def test_java_producer_commit_and_abort(broker, topic, tmp):
    create(broker.bootstrap, topic, 3)
    r = java("txn-produce", broker.bootstrap, topic=topic, tid=f"j-{topic}", txns=9, per_txn=20, abort_every=3)
    assert r == {"committed": 6, "aborted": 3}
    committed = {f"t{t}-r{i}" for t in range(9) if (t + 1) % 3 != 0 for i in range(20)}
    aborted = {f"t{t}-r{i}" for t in range(9) if (t + 1) % 3 == 0 for i in range(20)}
    rc = values(broker.bootstrap, topic, 3, "read_committed")
    assert sorted(rc) == sorted(committed)
    ru = values(broker.bootstrap, topic, 3, "read_uncommitted")
    assert sorted(ru) == sorted(committed | aborted)
    # The Java consumer (read_committed) drops the aborted records as well.
    out = tmp / "java-consume.jsonl"
    util.run(java_cmd("consume", "--bootstrap", broker.bootstrap, "--topic", topic, "--out", str(out),
                      "--isolation", "read_committed"), timeout=120, what="java consume")
    got = [bytes.fromhex(json.loads(ln)["v"]).decode() for ln in out.read_text().splitlines() if ln]
    assert sorted(got) == sorted(committed)


def test_kafka_transactions_tool_lists_describes_and_aborts_a_hanging_transaction(broker, topic):
    create(broker.bootstrap, topic, 1)
    tid = f"hang-{topic}"
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid,
                  "transaction.timeout.ms": 600_000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"hanging")
    p.flush(30)
    listed = kafka_tool(TXN_TOOL, "--bootstrap-server", broker.bootstrap, "list").stdout.decode()
    assert tid in listed and "Ongoing" in listed, listed
    described = kafka_tool(TXN_TOOL, "--bootstrap-server", broker.bootstrap, "describe",
                           "--transactional-id", tid).stdout.decode()
    assert "Ongoing" in described and f"{topic}-0" in described, described
    hanging = kafka_tool(TXN_TOOL, "--bootstrap-server", broker.bootstrap, "find-hanging",
                         "--broker-id", "1", "--max-transaction-timeout", "0").stdout.decode()
    # Open, but its coordinator knows it as Ongoing with that producer: not hanging.
    assert topic not in hanging, hanging
    # Abort it as an operator would, by partition and start offset: the partition's LSO moves on.
    kafka_tool(TXN_TOOL, "--bootstrap-server", broker.bootstrap, "abort", "--topic", topic,
               "--partition", "0", "--start-offset", "0")
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"after")
    plain.flush(30)
    assert values(broker.bootstrap, topic, 1, "read_committed") == ["after"]


def leader(c, topic: str, partition: int) -> int:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    md = admin.list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None or partition not in t.partitions:
        return -1
    return t.partitions[partition].leader


def test_consume_transform_produce_survives_a_killed_coordinator_and_fences_a_zombie(cluster3, tmp):
    c = cluster3
    src, dst, group, tid = "ctp-in", "ctp-out", "ctp-group", "ctp-app"
    create(c.bootstrap, src, 3, rf=3)
    create(c.bootstrap, dst, 3, rf=3)
    n = 3000
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True, "log_level": 3})
    for i in range(n):
        p.produce(src, key=str(i).encode(), value=f"in-{i}".encode())
    p.flush(60)

    args = ["--in", src, "--out", dst, "--group", group, "--tid", tid, "--timeout-ms", "150000"]

    def start(name: str, *extra: str) -> subprocess.Popen:
        # stderr to a file: a full pipe would block the client's logging.
        return subprocess.Popen(java_cmd("txn-copy", "--bootstrap", c.bootstrap, *args, *extra),
                                stdout=subprocess.PIPE, stderr=open(tmp / f"{name}.err", "wb"))

    def result(proc: subprocess.Popen, name: str) -> dict:
        out, _ = proc.communicate(timeout=240)
        lines = out.decode().strip().splitlines()
        assert lines, f"{name} printed nothing:\n{(tmp / f'{name}.err').read_text()[-3000:]}"
        return json.loads(lines[-1])

    first = start("first", "--count", str(n))
    # Kill the broker coordinating the transactional id once it is in use.
    part = txn_partition(tid)
    util.wait_until(lambda: leader(c, "__transaction_state", part) >= 0, 60, "__transaction_state has a leader")
    time.sleep(2)
    coordinator = leader(c, "__transaction_state", part)
    c.signal_broker(coordinator, signal.SIGKILL)
    util.wait_until(lambda: leader(c, "__transaction_state", part) not in (-1, coordinator), 60,
                    "a new transaction coordinator")
    r = result(first, "first")
    assert not r["fenced"] and r["copied"] >= n, f"copy stopped early: {r}"

    # A zombie: an instance runs, a second one with the same transactional id starts while input
    # keeps arriving; the first one's next transaction is fenced, the second copies the rest.
    zombie = start("zombie", "--count", "1000000")
    time.sleep(3)
    fresh = start("fresh", "--count", "1000000", "--idle-ms", "8000")
    produced = [n]

    def feed():
        deadline = time.time() + 90
        while zombie.poll() is None and time.time() < deadline:
            i = produced[0]
            p.produce(src, key=str(i).encode(), value=f"in-{i}".encode())
            produced[0] += 1
            p.poll(0)
            time.sleep(0.01)
        p.flush(60)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    z = result(zombie, "zombie")
    feeder.join()
    assert z["fenced"], f"the zombie was not fenced: {z}"
    f = result(fresh, "fresh")
    assert not f["fenced"] and f["copied"] > 0, f"the new instance did not take over: {f}"
    total = produced[0]

    got = values(c.bootstrap, dst, 3, "read_committed", idle_s=6)
    want = [f"copy:in-{i}" for i in range(total)]
    dups = len(got) - len(set(got))
    missing = set(want) - set(got)
    assert dups == 0, f"{dups} duplicates in the output"
    assert not missing, f"{len(missing)} input records never reached the output, e.g. {sorted(missing)[:5]}"
