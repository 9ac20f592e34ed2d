"""Zero-copy fetch (`socket.sendfile.enable`, on by default): record bytes sent from the segment files with
sendfile reach real clients (librdkafka through confluent-kafka, kafka-python) exactly as written —
large batches and small ones, several partitions in one response, a read_committed reader whose
aborted transactions are found from the batch headers — and replication between brokers that send
from their files loses nothing."""

from __future__ import annotations

import hashlib
import re
import subprocess
import time
import urllib.request
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

SENDFILE = {"socket.sendfile.enable": "true"}


def value_of(i: int, size: int) -> bytes:
    """Deterministic, incompressible-looking bytes: any corruption or misplaced range shows."""
    out = bytearray()
    seed = f"record-{i}".encode()
    while len(out) < size:
        seed = hashlib.sha256(seed).digest()
        out += seed
    return bytes(out[:size])


def produce(bootstrap: str, topic: str, n: int, partitions: int, **extra) -> dict[int, list[tuple[int, bytes]]]:
    """n records (every tenth small, the rest 20-60 KB, in batches of several), round robin over
    the partitions; returns what each partition holds in order, as (index, value)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                  "message.max.bytes": 2_000_000, **extra})
    want: dict[int, list[tuple[int, bytes]]] = {q: [] for q in range(partitions)}
    for i in range(n):
        size = 200 if i % 10 == 0 else 20_000 + (i * 7919) % 40_000
        v = value_of(i, size)
        q = i % partitions
        p.produce(topic, key=str(i).encode(), value=v, partition=q)
        want[q].append((i, v))
        p.poll(0)
    assert p.flush(60) == 0
    return want


def create(bootstrap: str, topic: str, partitions: int, rf: int = 1, **configs) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=rf,
                                           config=configs)]).values():
        f.result(30)


def read_confluent(bootstrap: str, topic: str, partitions: int, n: int, isolation: str = "read_uncommitted",
                   **extra) -> dict[int, list[tuple[int, bytes]]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"sf-{uuid.uuid4().hex[:8]}",
                  "isolation.level": isolation, "enable.auto.commit": False, **extra})
    c.assign([TopicPartition(topic, q, 0) for q in range(partitions)])
    got: dict[int, list[tuple[int, bytes]]] = {q: [] for q in range(partitions)}
    deadline = time.time() + 90
    count = 0
    try:
        while count < n and time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            got[m.partition()].append((int(m.key()), m.value()))
            count += 1
    finally:
        c.close()
    return got


def read_kafka_python(bootstrap: str, topic: str, partitions: int, n: int) -> dict[int, list[tuple[int, bytes]]]:
    from kafka import KafkaConsumer, TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      max_partition_fetch_bytes=4 << 20, fetch_max_bytes=16 << 20)
    c.assign([KTP(topic, q) for q in range(partitions)])
    c.seek_to_beginning()
    got: dict[int, list[tuple[int, bytes]]] = {q: [] for q in range(partitions)}
    deadline = time.time() + 90
    count = 0
    try:
        while count < n and time.time() < deadline:
            for tp, msgs in c.poll(timeout_ms=500).items():
                for m in msgs:
                    got[tp.partition].append((int(m.key), m.value))
                    count += 1
    finally:
        c.close()
    return got


def assert_same(got, want, who: str) -> None:
    for q in want:
        assert len(got[q]) == len(want[q]), f"{who}: partition {q} has {len(got[q])} of {len(want[q])} records"
        for (gi, gv), (wi, wv) in zip(got[q], want[q]):
            assert gi == wi, f"{who}: partition {q} has record {gi} where {wi} belongs"
            assert gv == wv, f"{who}: partition {q} record {wi} differs ({len(gv)} vs {len(wv)} bytes)"


def sent_from_files(metrics_port: int) -> int:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    m = re.search(r"^skein_fetch_sendfile_bytes_total (\d+)", text, re.M)
    assert m, "skein_fetch_sendfile_bytes_total is missing"
    return int(m.group(1))


def test_sendfile_fetches_reach_real_clients_intact(new_broker, topic):
    b = new_broker(SENDFILE)
    create(b.bootstrap, topic, 3, **{"max.message.bytes": "2097152"})
    want = produce(b.bootstrap, topic, 600, 3)
    n = sum(len(v) for v in want.values())
    # Skein's own counter (under E2E_TARGET=kafka the data checks alone run: Kafka always
    # sends from its files).
    skein = hasattr(b, "metrics_port")
    assert not skein or sent_from_files(b.metrics_port) == 0
    # Small fetches (one partition's bytes in several responses) and large ones.
    assert_same(read_confluent(b.bootstrap, topic, 3, n, **{"fetch.max.bytes": 300_000, "message.max.bytes": 200_000,
                                                            "max.partition.fetch.bytes": 100_000}),
                want, "confluent-kafka, small fetches")
    assert_same(read_confluent(b.bootstrap, topic, 3, n), want, "confluent-kafka")
    assert_same(read_kafka_python(b.bootstrap, topic, 3, n), want, "kafka-python")
    # The three reads went out from the files, not through a copy: most of their bytes.
    total = sum(len(v) for q in want.values() for _, v in q)
    assert not skein or sent_from_files(b.metrics_port) > 2 * total


def test_sendfile_read_committed_skips_aborted_transactions(new_broker, topic):
    b = new_broker(SENDFILE)
    create(b.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"sf-{topic}", "linger.ms": 50})
    p.init_transactions(30)
    committed, aborted = [], []
    for round_ in range(6):
        p.begin_transaction()
        keep = round_ % 2 == 0
        for i in range(40):
            idx = round_ * 100 + i
            p.produce(topic, key=str(idx).encode(), value=value_of(idx, 30_000), partition=0)
            (committed if keep else aborted).append(idx)
        if keep:
            p.commit_transaction(30)
        else:
            p.flush(30)
            p.abort_transaction(30)
    got = read_confluent(b.bootstrap, topic, 1, len(committed), "read_committed")
    assert [i for i, _ in got[0]] == committed
    assert all(v == value_of(i, 30_000) for i, v in got[0])
    everything = read_confluent(b.bootstrap, topic, 1, len(committed) + len(aborted))
    assert sorted(i for i, _ in everything[0]) == sorted(committed + aborted)


def test_sendfile_replication_copies_every_byte(tmp_path, topic):
    """Three brokers that send from their files to each other too: after acks=all records (min ISR
    3, so every replica has each one) every replica's segment file is byte for byte the leader's."""
    from brokers import LocalCluster

    c = LocalCluster(tmp_path / "cluster", 3, dict(SENDFILE))
    c.start()
    try:
        create(c.bootstrap, topic, 2, rf=3, **{"min.insync.replicas": "3", "max.message.bytes": "2097152"})
        want = produce(c.bootstrap, topic, 300, 2, acks="all")
        n = sum(len(v) for v in want.values())
        assert_same(read_confluent(c.bootstrap, topic, 2, n), want, "leaders")
        for q in range(2):
            files = [c.data_dir / f"broker-{i}" / f"{topic}-{q}" / f"{0:020d}.log" for i in (1, 2, 3)]
            deadline = time.time() + 30
            while len({f.stat().st_size for f in files}) > 1 and time.time() < deadline:
                time.sleep(0.2)
            digests = {hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
            assert len(digests) == 1, f"partition {q}: the three replicas' logs differ"
            assert files[0].stat().st_size > 4_000_000
    finally:
        c.stop(60)


def socket_buffers(port: int) -> list[tuple[int, int]]:
    """(receive, send) buffer sizes of the broker's established client connections on `port`, as
    `ss` shows them (the kernel doubles what SO_RCVBUF / SO_SNDBUF asked for)."""
    out = subprocess.run(["ss", "-tmnH", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout
    return [(int(rb), int(tb)) for rb, tb in re.findall(r"skmem:\(r\d+,rb(\d+),t\d+,tb(\d+)", out)]


def test_socket_buffers_follow_the_broker_settings(new_broker, topic):
    """socket.send.buffer.bytes defaults to Kafka's 100 KiB (a fixed send buffer sends fetched bytes
    with less CPU than the kernel's auto-tuned one); both keys take a size, or -1 for the OS."""
    for overrides, want_send, want_receive in [
        ({}, 102_400, None),
        ({"socket.send.buffer.bytes": "300000", "socket.receive.buffer.bytes": "250000"}, 300_000, 250_000),
    ]:
        b = new_broker(overrides)
        port = int(b.bootstrap.rsplit(":", 1)[1])
        create(b.bootstrap, topic, 1)
        p = Producer({"bootstrap.servers": b.bootstrap})
        try:
            # A delivered record: the producer holds a connection to the partition's leader.
            p.produce(topic, b"x")
            assert p.flush(30) == 0
            seen = socket_buffers(port)
            assert seen, f"no established connection on port {port}"
            for rb, tb in seen:
                assert tb == 2 * want_send, f"{overrides}: send buffer {tb}, expected {2 * want_send}"
                if want_receive:
                    assert rb == 2 * want_receive, f"{overrides}: receive buffer {rb}, expected {2 * want_receive}"
        finally:
            del p
            b.stop()
