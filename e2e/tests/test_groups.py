"""Consumption through a consumer group. Needs the broker's group coordinator (FindCoordinator,
JoinGroup, SyncGroup, Heartbeat, OffsetCommit/OffsetFetch, LeaveGroup). kafkajs can consume only this
way, so its consumer side is tested here and nowhere else."""

from __future__ import annotations

import os
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


FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"


def test_a_step_of_the_coordinators_wall_clock_expires_no_member(new_broker, tmp):
    """The coordinator's wall clock jumps 120 s ahead (NTP, `date -s`), then back. Session
    deadlines run on a monotonic clock, as Kafka's coordinator timers do: the member, which
    heartbeats every 500 ms with a 6 s session, keeps its partitions (no revocation, no new
    generation). The broker runs under libfaketime (e2e/setup.sh installs it), which moves only
    its CLOCK_REALTIME; on the wall clock the jump expired the member at once."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    assert os.path.exists(FAKETIME), "libfaketime missing: run e2e/setup.sh"
    clock = tmp / "clock"
    clock.write_text("+0\n")

    def under_faketime(b):
        command = b.command
        b.command = lambda: ["env", f"LD_PRELOAD={FAKETIME}", f"FAKETIME_TIMESTAMP_FILE={clock}",
                             "FAKETIME_CACHE_DURATION=1", "FAKETIME_DONT_FAKE_MONOTONIC=1", *command()]

    b = new_broker({"group.initial.rebalance.delay.ms": "0"}, before_start=under_faketime)
    topic = f"clock-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(60)
    events: list[str] = []
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{topic}", "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest", "log_level": 3})
    c.subscribe([topic], on_assign=lambda _c, ps: events.append(f"assign {len(ps)}"),
                on_revoke=lambda _c, ps: events.append(f"revoke {len(ps)}"),
                on_lost=lambda _c, ps: events.append(f"lost {len(ps)}"))

    def poll_for(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            c.poll(0.2)

    try:
        deadline = time.monotonic() + 60
        while events != ["assign 2"] and time.monotonic() < deadline:
            c.poll(0.2)
        assert events == ["assign 2"], events
        poll_for(3)
        clock.write_text("+120\n")
        poll_for(8)  # libfaketime reads the file again within a second
        clock.write_text("+0\n")
        poll_for(8)
        assert events == ["assign 2"], f"the clock step made the group rebalance: {events}"
    finally:
        c.close()
