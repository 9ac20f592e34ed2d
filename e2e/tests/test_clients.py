"""Real Kafka clients against the broker: admin, produce/consume with every codec, cross-client,
offsets by timestamp. Consumption uses manual assignment (no consumer group) everywhere except
kafkajs, which can only consume through a group (see test_groups.py)."""

from __future__ import annotations

import time
import zlib

import pytest

import util
from clients import ALL, Kcat
from util import N_RECORDS, PARTITIONS, dataset, verify, wait_until

ROUNDTRIP = [(n, codec) for n, c in ALL.items() for codec in c.codecs]
ADMIN_CLIENTS = [n for n, c in ALL.items() if c.has_admin]
# (producer, consumer, codec): every client writes for and reads from another one at least once
CROSS = [
    ("java", "confluent-kafka", "zstd"),
    ("kafka-python", "java", "lz4"),
    ("kcat", "kafka-python", "snappy"),
    ("confluent-kafka", "kcat", "gzip"),
    ("kafkajs", "java", "snappy"),
    ("confluent-kafka", "kafka-python", "zstd"),
    ("java", "kcat", "lz4"),
    ("kafka-python", "confluent-kafka", "gzip"),
]


@pytest.fixture
def mk(broker, tmp):
    return lambda name: ALL[name](broker.bootstrap, tmp)


def seed_of(*parts) -> int:
    return zlib.crc32("/".join(parts).encode())


def partitions_seen_by_confluent(mk, topic) -> int:
    md = mk("confluent-kafka")._admin().list_topics(topic, timeout=30)
    t = md.topics[topic]
    assert t.error is None, f"metadata error for {topic}: {t.error}"
    return len(t.partitions)


# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ADMIN_CLIENTS)
def test_admin_create_list_delete(name, mk, topic):
    """Create a 3-partition topic with the client's admin API, see it listed (and with 3 partitions
    in another client's metadata), delete it, see it gone."""
    c = mk(name)
    c.create_topic(topic, PARTITIONS)
    wait_until(lambda: topic in c.list_topics(), 30, f"{name} to list {topic}")
    assert partitions_seen_by_confluent(mk, topic) == PARTITIONS
    c.delete_topic(topic)
    wait_until(lambda: topic not in c.list_topics(), 30, f"{name} to stop listing deleted {topic}")
    wait_until(lambda: topic not in mk("confluent-kafka").list_topics(), 30,
               f"deleted {topic} to disappear from confluent-kafka metadata")


def test_kcat_metadata_lists_topic(mk, topic):
    """kcat has no admin API: create with confluent-kafka, list with kcat -L, delete, gone in kcat -L."""
    admin, kcat = mk("confluent-kafka"), mk("kcat")
    admin.create_topic(topic, PARTITIONS)
    wait_until(lambda: topic in kcat.list_topics(), 30, f"kcat -L to list {topic}")
    admin.delete_topic(topic)
    wait_until(lambda: topic not in kcat.list_topics(), 30, f"kcat -L to stop listing {topic}")


# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,codec", ROUNDTRIP, ids=[f"{n}-{c}" for n, c in ROUNDTRIP])
def test_roundtrip(name, codec, mk, topic):
    """10 000 keyed records (headers, timestamps where the client can set them) produced with CODEC
    and read back byte-identical, exactly once, in order per partition. Read back by the same client
    with manual assignment; kafkajs (group-only consumer) is read back by confluent-kafka here."""
    c = mk(name)
    (c if c.has_admin else mk("confluent-kafka")).create_topic(topic, PARTITIONS)
    ts0 = int(time.time() * 1000) - 600_000
    recs = dataset(N_RECORDS, seed=seed_of(name, codec), ascii_only=c.ascii_only,
                   ts_base=None if name == "kcat" else ts0)
    acked = c.produce(topic, recs, codec)
    if acked:
        assert len(acked) == len(recs), f"{len(acked)} of {len(recs)} acknowledged"
    reader = c if c.has_manual_assign else mk("confluent-kafka")
    got = reader.consume(topic)
    verify(recs, got, acked=acked or None,
           expect_headers=[(Kcat.HEADER[0], Kcat.HEADER[1].encode())] if name == "kcat" else None,
           what=f"{name} {codec} -> {reader.name}")


@pytest.mark.parametrize("producer,consumer,codec", CROSS, ids=[f"{p}-to-{c}-{z}" for p, c, z in CROSS])
def test_cross_client(producer, consumer, codec, mk, topic):
    p, c = mk(producer), mk(consumer)
    (p if p.has_admin else mk("confluent-kafka")).create_topic(topic, PARTITIONS)
    ascii_only = p.ascii_only or c.ascii_only
    ts0 = int(time.time() * 1000) - 600_000
    recs = dataset(N_RECORDS, seed=seed_of(producer, consumer), ascii_only=ascii_only,
                   ts_base=None if producer == "kcat" else ts0, tag="x")
    acked = p.produce(topic, recs, codec)
    got = c.consume(topic)
    verify(recs, got, acked=acked or None,
           expect_headers=[(Kcat.HEADER[0], Kcat.HEADER[1].encode())] if producer == "kcat" else None,
           what=f"{producer} -> {consumer} ({codec})")


# ------------------------------------------------------------------------------------------
def _timed_topic(mk, topic, n=100, step=10):
    """1-partition topic with n records at timestamps ts0 + i*step (written by confluent-kafka)."""
    admin = mk("confluent-kafka")
    admin.create_topic(topic, 1)
    ts0 = int(time.time() * 1000) - 3_600_000
    recs = dataset(n, seed=7, ts_base=ts0, ts_step=step)
    admin.produce(topic, recs, "none")
    return ts0


@pytest.mark.parametrize("name", list(ALL))
def test_offsets_for_times(name, mk, topic):
    """ListOffsets: earliest, latest, and the first offset whose timestamp >= T."""
    ts0 = _timed_topic(mk, topic)
    queries = {ts0 - 60_000: 0, ts0: 0, ts0 + 505: 51, ts0 + 990: 99, ts0 + 991: None, ts0 + 3_600_000: None}
    got = mk(name).offsets(topic, 0, list(queries))
    assert got["earliest"] == 0, got
    assert got["latest"] == 100, got
    for ts, want in queries.items():
        have = got["times"][ts]
        if name == "kafkajs" and want is None:
            # kafkajs fetchTopicOffsetsByTimestamp answers the high watermark when no record is that late
            assert have in (None, 100), f"ts0+{ts - ts0}: {have}"
        else:
            assert have == want, f"{name}: offset for ts0{ts - ts0:+d} is {have}, want {want} (all: {got})"


def test_admin_list_offsets_confluent(mk, topic):
    """AdminClient.list_offsets (confluent-kafka): earliest / latest / for_timestamp."""
    ts0 = _timed_topic(mk, topic)
    got = mk("confluent-kafka").admin_list_offsets(topic, 0, [ts0 + 505, ts0 + 5000])
    assert got == {"earliest": 0, "latest": 100, "times": {ts0 + 505: 51, ts0 + 5000: None}}, got
