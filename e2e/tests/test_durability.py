"""Restart (SIGTERM) and crash (kill -9) of a dedicated broker on the same data dir."""

from __future__ import annotations

import threading
import time

import pytest

from clients import ALL
from util import PARTITIONS, dataset, verify, wait_until

pytestmark = pytest.mark.durability

# small segments so a restart has to reload several segments per partition
SMALL_SEGMENTS = {"log.segment.bytes": "1048576"}


def test_restart_sigterm(new_broker, topic, tmp):
    b = new_broker(SMALL_SEGMENTS)
    c = ALL["confluent-kafka"](b.bootstrap, tmp)
    c.create_topic(topic, PARTITIONS)
    recs = dataset(30_000, seed=31, ts_base=int(time.time() * 1000) - 600_000)
    acked = c.produce(topic, recs[:20_000], "none")
    rc = b.stop()
    assert rc is not None, "broker did not exit within 30 s of SIGTERM (had to be SIGKILLed)"
    b.start()
    c = ALL["confluent-kafka"](b.bootstrap, tmp)  # fresh handles for the new process
    verify(recs[:20_000], c.consume(topic), acked=acked, what="after SIGTERM restart")
    more = c.produce(topic, recs[20_000:], "lz4")
    acked.update({20_000 + i: po for i, po in more.items()})
    verify(recs, ALL["java"](b.bootstrap, tmp).consume(topic), acked=acked,
           what="appended after restart, read by java")


def test_crash_kill9_acks1(new_broker, topic, tmp):
    """A confluent-kafka producer (acks=1, no retries, no idempotence) writes continuously to 3
    partitions; the broker is kill -9'd mid-write and restarted on the same data dir. Every
    acknowledged record must be at its acknowledged (partition, offset) (so acknowledged records are
    in acknowledgement order per partition); no record appears twice; nothing appears that was not
    sent to that partition; offsets are contiguous from 0. (Send order is not checked: without
    idempotence librdkafka itself may reorder a partition's first batches.)"""
    from confluent_kafka import Producer

    b = new_broker(SMALL_SEGMENTS)
    ALL["confluent-kafka"](b.bootstrap, tmp).create_topic(topic, PARTITIONS)
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": 1, "enable.idempotence": False,
                  "message.send.max.retries": 0, "linger.ms": 2, "message.timeout.ms": 15000,
                  "reconnect.backoff.max.ms": 500, "log_level": 2})
    acked: dict[int, tuple[int, int]] = {}
    failed: dict[int, str] = {}
    sent = 0
    stop = threading.Event()
    phase = {"name": "before-kill"}
    acked_in: dict[str, int] = {}

    def cb(i):
        def f(err, msg):
            if err is None:
                acked[i] = (msg.partition(), msg.offset())
                acked_in[phase["name"]] = acked_in.get(phase["name"], 0) + 1
            else:
                failed[i] = str(err)
        return f

    def value(i):
        return f"crash-{i:09d}".encode()

    def producer_loop():
        nonlocal sent
        while not stop.is_set():
            i = sent
            try:
                p.produce(topic, key=str(i).encode(), value=value(i), partition=i % PARTITIONS, on_delivery=cb(i))
                sent += 1
            except BufferError:
                p.poll(0.05)
                continue
            if i % 200 == 0:
                p.poll(0)
                time.sleep(0.001)  # keep the rate bounded (a few tens of thousands per second at most)

    t = threading.Thread(target=producer_loop, daemon=True)
    t.start()
    try:
        wait_until(lambda: len(acked) >= 20_000, 60, "20 000 acknowledged records before the crash",
                   interval=0.05)
        b.kill9()
        phase["name"] = "down"
        time.sleep(1.0)
        phase["name"] = "after-restart"
        b.start()
        wait_until(lambda: acked_in.get("after-restart", 0) >= 5_000, 60,
                   "5 000 acknowledged records after the restart", interval=0.1)
    finally:
        stop.set()
        t.join(10)
        left = p.flush(30)
    assert left == 0, f"{left} records still undelivered after flush"
    assert acked_in.get("before-kill", 0) > 0 and acked_in.get("after-restart", 0) > 0, acked_in

    got = ALL["confluent-kafka"](b.bootstrap, tmp).consume(topic)
    problems = []
    at = {(g["p"], g["o"]): g for g in got}
    for i, (part, off) in acked.items():
        g = at.get((part, off))
        if g is None:
            problems.append(f"acknowledged record {i} missing at {part}/{off}")
        elif bytes.fromhex(g["v"]) != value(i):
            problems.append(f"at {part}/{off}: {bytes.fromhex(g['v'])!r}, acknowledged {value(i)!r}")
    seen: dict[int, tuple[int, int]] = {}
    expect_off: dict[int, int] = {}
    for g in sorted(got, key=lambda g: (g["p"], g["o"])):
        v = bytes.fromhex(g["v"])
        if not v.startswith(b"crash-"):
            problems.append(f"unexpected record at {g['p']}/{g['o']}: {v[:40]!r}")
            continue
        i = int(v[6:])
        if i >= sent or i % PARTITIONS != g["p"]:
            problems.append(f"record {i} at {g['p']}/{g['o']} was never sent to that partition")
        if i in seen:
            problems.append(f"record {i} twice: {seen[i]} and {(g['p'], g['o'])}")
        seen[i] = (g["p"], g["o"])
        if g["o"] != expect_off.get(g["p"], 0):
            problems.append(f"partition {g['p']}: offset {g['o']} after {expect_off.get(g['p'], 0) - 1}")
        expect_off[g["p"]] = g["o"] + 1
    unacked_present = sum(1 for i in seen if i not in acked)
    summary = (f"sent {sent}, acknowledged {len(acked)} ({acked_in}), failed {len(failed)}, "
               f"in log {len(got)} (of which not acknowledged: {unacked_present})")
    print(summary)
    assert not problems, summary + f"\n{len(problems)} problem(s):\n  " + "\n  ".join(problems[:25])
