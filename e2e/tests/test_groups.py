"""Consumption through a consumer group. Needs the broker's group coordinator (FindCoordinator,
JoinGroup, SyncGroup, Heartbeat, OffsetCommit/OffsetFetch, LeaveGroup). kafkajs can consume only this
way, so its consumer side is tested here and nowhere else."""

from __future__ import annotations

import time
import uuid

import pytest

from clients import ALL
from util import N_RECORDS, PARTITIONS, dataset, verify

pytestmark = pytest.mark.group_coordinator


@pytest.mark.parametrize("codec", ["gzip", "lz4"])
def test_kafkajs_group_consumer(broker, topic, tmp, codec):
    """confluent-kafka writes 10 000 records; a kafkajs consumer group (one member) reads them all."""
    prod = ALL["confluent-kafka"](broker.bootstrap, tmp)
    prod.create_topic(topic, PARTITIONS)
    recs = dataset(N_RECORDS, seed=21, ts_base=int(time.time() * 1000) - 60_000)
    acked = prod.produce(topic, recs, codec)
    got = ALL["kafkajs"](broker.bootstrap, tmp).consume_group(topic, f"e2e-js-{uuid.uuid4().hex[:6]}", len(recs))
    verify(recs, got, acked=acked, what=f"confluent-kafka {codec} -> kafkajs group")


def test_confluent_group_subscribe_commit(broker, topic, tmp):
    """confluent-kafka subscribe() + commit(); a second consumer in the same group resumes at the
    committed offsets (reads nothing old, then gets newly produced records)."""
    from confluent_kafka import Consumer
    c = ALL["confluent-kafka"](broker.bootstrap, tmp)
    c.create_topic(topic, PARTITIONS)
    recs = dataset(1000, seed=22)
    c.produce(topic, recs[:600], "none")
    group = f"e2e-ck-{uuid.uuid4().hex[:6]}"
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 10000, "log_level": 4,
            "error_cb": lambda e: errors.append(str(e))}
    errors: list[str] = []

    def read(n, timeout=30):
        cons = Consumer(conf)
        cons.subscribe([topic])
        out, deadline = [], time.monotonic() + timeout
        try:
            while len(out) < n and time.monotonic() < deadline:
                for m in cons.consume(500, timeout=0.5):
                    assert not m.error(), f"consumer error: {m.error()}"
                    out.append({"p": m.partition(), "o": m.offset(), "k": m.key().hex(), "v": m.value().hex(),
                                "h": [[k, v.hex()] for k, v in (m.headers() or [])], "ts": m.timestamp()[1]})
            if out:
                cons.commit(asynchronous=False)
        finally:
            cons.close()
        return out

    first = read(600)
    assert len(first) == 600, f"first member read {len(first)} of 600 (a group consumer needs FindCoordinator/JoinGroup/SyncGroup/OffsetCommit); client errors: {errors[:5]}"
    c.produce(topic, recs[600:], "none")
    second = read(400)
    assert len(second) == 400, (f"after commit, second member read {len(second)} of 400 new records; "
                                f"client errors: {errors[:5]}")
    verify(recs, sorted(first + second, key=lambda g: (g["p"], g["o"])), what="group resume")
