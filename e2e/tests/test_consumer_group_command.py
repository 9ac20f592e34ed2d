"""Kafka's ConsumerGroupCommand (the class behind kafka-consumer-groups.sh): --describe shows the
committed offset, log-end offset and LAG per partition; --reset-offsets --to-earliest / --to-datetime /
--shift-by --execute move an inactive group, and a consumer of that group then starts exactly there."""

from __future__ import annotations

import datetime as dt
import time
import uuid

import pytest

from clients import Confluent
from groupcheck import committed_offsets_admin
from util import dataset, kafka_tool

pytestmark = [pytest.mark.group_coordinator, pytest.mark.cli]

CGC = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PARTS = 3


def cgc(bootstrap, *args) -> str:
    r = kafka_tool(CGC, "--bootstrap-server", bootstrap, *args, timeout=120)
    return r.stdout.decode(errors="replace")


def table(out: str, group: str, topic: str) -> dict[int, list[str]]:
    """Rows of a --describe / --reset-offsets table for (group, topic), by partition."""
    rows = {}
    for ln in out.splitlines():
        f = ln.split()
        if len(f) >= 4 and f[0] == group and f[1] == topic:
            rows[int(f[2])] = f[3:]
    return rows


def describe(bootstrap, group, topic) -> dict[int, tuple[int, int, int, str]]:
    """partition -> (CURRENT-OFFSET, LOG-END-OFFSET, LAG, CONSUMER-ID)"""
    out = cgc(bootstrap, "--describe", "--group", group)
    rows = table(out, group, topic)
    assert rows, f"--describe printed no rows for {group}/{topic}:\n{out}"
    return {p: (int(r[0]), int(r[1]), int(r[2]), r[3]) for p, r in rows.items()}


def reset(bootstrap, group, topic, *how) -> dict[int, int]:
    out = cgc(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, *how, "--execute")
    rows = table(out, group, topic)
    assert sorted(rows) == list(range(PARTS)), f"--reset-offsets {how} printed:\n{out}"
    return {p: int(r[0]) for p, r in rows.items()}


def consume_first(bootstrap, group, topic, expect_parts: set[int], timeout=60) -> dict[int, int]:
    """A group member (subscribe) reads until it has a record from every partition in expect_parts;
    returns the first offset it got per partition. Commits nothing; closes (leaves) at the end."""
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "latest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000, "log_level": 3})
    first: dict[int, int] = {}
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while set(first) != expect_parts:
            assert time.monotonic() < deadline, f"group {group} member got first offsets {first} only"
            for m in c.consume(500, timeout=0.5):
                assert not m.error(), m.error()
                first.setdefault(m.partition(), m.offset())
    finally:
        c.close()
    return first


def test_consumer_group_command_describe_lag_and_reset(group_broker, tmp):
    b = group_broker.bootstrap
    tag = uuid.uuid4().hex[:6]
    topic, group = f"e2e-cgc-{tag}", f"e2e-cgc-g-{tag}"
    prod = Confluent(b, tmp)
    prod.create_topic(topic, PARTS)
    ts0 = (int(time.time()) - 3600) * 1000
    n = 300
    recs = dataset(n, seed=77, headers=False, ts_base=ts0, ts_step=1000)  # record i at ts0 + i s
    acked = prod.produce(topic, recs, "none")
    end = {p: 1 + max(o for pp, o in acked.values() if pp == p) for p in range(PARTS)}
    assert all(v > 20 for v in end.values()), end

    # consume everything as a group member, commit M_p = 2/3 of each partition
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": b, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000, "log_level": 3})
    c.subscribe([topic])
    got, deadline = 0, time.monotonic() + 60
    while got < n:
        assert time.monotonic() < deadline, f"group consumer read {got} of {n}"
        for m in c.consume(500, timeout=0.5):
            assert not m.error(), m.error()
            got += 1
    committed = {p: end[p] * 2 // 3 for p in range(PARTS)}
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in committed.items()], asynchronous=False)
    # --describe while the member is active: offsets, lag, and the member owns the partitions
    d = describe(b, group, topic)
    assert {p: v[:3] for p, v in d.items()} == {p: (committed[p], end[p], end[p] - committed[p])
                                                for p in range(PARTS)}, d
    assert all(v[3] != "-" for v in d.values()), f"active member not shown as CONSUMER-ID: {d}"
    c.close()

    # inactive group: --describe still shows offsets and lag, no consumer
    d = describe(b, group, topic)
    assert d == {p: (committed[p], end[p], end[p] - committed[p], "-") for p in range(PARTS)}, d

    # --to-earliest
    assert reset(b, group, topic, "--to-earliest") == {p: 0 for p in range(PARTS)}
    assert committed_offsets_admin(b, group, topic, PARTS) == {p: 0 for p in range(PARTS)}
    d = describe(b, group, topic)
    assert {p: v[:3] for p, v in d.items()} == {p: (0, end[p], end[p]) for p in range(PARTS)}, d
    assert consume_first(b, group, topic, set(range(PARTS))) == {p: 0 for p in range(PARTS)}

    # --to-datetime: the first offset per partition with timestamp >= that of record k
    k = 200
    when = dt.datetime.fromtimestamp((ts0 + k * 1000) / 1000, tz=dt.timezone.utc)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.000") + "Z"
    want = {p: min([o for i, (pp, o) in acked.items() if pp == p and i >= k], default=end[p]) for p in range(PARTS)}
    assert reset(b, group, topic, "--to-datetime", stamp) == want
    assert committed_offsets_admin(b, group, topic, PARTS) == want
    assert consume_first(b, group, topic, {p for p in range(PARTS) if want[p] < end[p]}) == \
        {p: o for p, o in want.items() if o < end[p]}

    # --shift-by -5 (clamped at the log start) and +1000 (clamped at the log end)
    want2 = {p: max(0, want[p] - 5) for p in range(PARTS)}
    assert reset(b, group, topic, "--shift-by", "-5") == want2
    assert consume_first(b, group, topic, set(range(PARTS))) == want2
    assert reset(b, group, topic, "--shift-by", "1000") == end
    d = describe(b, group, topic)
    assert d == {p: (end[p], end[p], 0, "-") for p in range(PARTS)}, d
