"""Consumer-group rebalancing with confluent-kafka (librdkafka): three members share a 6-partition
topic, one is killed (SIGKILL, no LeaveGroup), the survivors take its partitions after the session
timeout. Run for the classic protocol with the eager (range) and cooperative (cooperative-sticky)
assignors, and for the KIP-848 consumer protocol (server-side uniform and range assignors)."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import time
import uuid

import pytest

pytestmark = pytest.mark.group_coordinator

PARTS = 6


def _member(bootstrap, topic, group, conf_extra, q, name, log_path):
    import logging
    from confluent_kafka import Consumer
    # librdkafka's group (cgrp) debug log goes to a file: shown if the test fails.
    logger = logging.getLogger(f"rdkafka-{name}")
    handler = logging.FileHandler(log_path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "debug": "cgrp", **conf_extra}
    c = Consumer(conf, logger=logger)
    c.subscribe([topic])
    last = None
    while True:
        c.poll(0.2)
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            last = now
            q.put((name, now))


def _wait_for(view, pred, timeout, queues):
    """Collects the members' reports until `pred(view)` holds. One queue per
    member: a multiprocessing.Queue's writers share a lock, and a member
    SIGKILLed right after a put (its feeder thread still holding that lock)
    would silence every other member of a shared queue."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for q in queues.values():
            try:
                while True:
                    name, parts = q.get_nowait()
                    view[name] = parts
            except queue.Empty:
                pass
            except (EOFError, OSError):
                pass  # the killed member's queue
        if pred(view):
            return True
        time.sleep(0.1)
    return False


def _group_state(admin, group) -> str:
    """The coordinator's view of the group, for the failure message."""
    try:
        d = admin.describe_consumer_groups([group])[group].result(10)
        members = [(m.member_id, sorted(tp.partition for tp in m.assignment.topic_partitions))
                   for m in d.members]
        return f"group {group}: state {d.state}, members {members}"
    except Exception as e:  # diagnostics only
        return f"group {group}: describe failed: {e}"


def _covers(view, names):
    got = [p for n in names for p in view.get(n, [])]
    return sorted(got) == list(range(PARTS)) and all(view.get(n) for n in names)


CASES = {
    "classic-range": {"partition.assignment.strategy": "range", "session.timeout.ms": 6000},
    "classic-cooperative": {"partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 6000},
    "consumer-uniform": {"group.protocol": "consumer", "group.remote.assignor": "uniform"},
    "consumer-range": {"group.protocol": "consumer", "group.remote.assignor": "range"},
}


@pytest.mark.parametrize("case", list(CASES))
def test_confluent_three_members_one_killed(new_broker, case, tmp_path):
    overrides = {"group.consumer.session.timeout.ms": "6000", "group.consumer.heartbeat.interval.ms": "1000"}
    broker = new_broker(overrides)
    from confluent_kafka.admin import AdminClient, NewTopic
    topic = f"e2e-rebal-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTS, 1)])[topic].result(30)
    group = f"e2e-{case}-{uuid.uuid4().hex[:6]}"
    ctx = mp.get_context("spawn")
    names = ["m0", "m1", "m2"]
    queues = {n: ctx.Queue() for n in names}
    logs = {n: tmp_path / f"{n}.rdkafka.log" for n in names}
    procs = {n: ctx.Process(target=_member, daemon=True,
                            args=(broker.bootstrap, topic, group, CASES[case], queues[n], n, str(logs[n])))
             for n in names}
    for p in procs.values():
        p.start()
    view: dict[str, list[int]] = {}
    try:
        ok = _wait_for(view, lambda v: _covers(v, names) and all(len(v[n]) == 2 for n in names), 60,
                       queues)
        assert ok, f"three members never shared {PARTS} partitions 2/2/2: {view}"
        os.kill(procs["m1"].pid, signal.SIGKILL)
        procs["m1"].join(5)
        view.pop("m1", None)
        ok = _wait_for(view, lambda v: _covers(v, ["m0", "m2"]) and all(len(v[n]) == 3 for n in ["m0", "m2"]),
                       60, {n: queues[n] for n in ("m0", "m2")})
        if not ok:
            clients = "\n".join(f"--- {n} (librdkafka cgrp debug, last 60 lines)\n" + "\n".join(
                logs[n].read_text(errors="replace").splitlines()[-60:]) for n in ("m0", "m2"))
            raise AssertionError(
                f"survivors did not take over the killed member's partitions: {view}\n"
                f"{_group_state(admin, group)}\n" + "\n".join(
                    line for line in broker.log_tail(400).splitlines() if group in line)[-4000:] + "\n" + clients)
    finally:
        for p in procs.values():
            if p.is_alive():
                p.kill()
