"""Streams groups (KIP-1071) with Kafka Streams 4.4 and `kafka-streams-groups.sh`.

Two instances of a Kafka Streams application (`streams-count` in e2e/java: a per-key count with an
in-memory store and its changelog topic, exactly_once_v2) run with `group.protocol=streams`, so the
broker, not the client, runs the group: it checks the topology against the topics, creates the
changelog topic, assigns the three tasks and moves them when an instance leaves.

- both instances together hold each of the three tasks exactly once, the group is Stable, the tool
  lists it (also under `--state stable`) and describes its members, its state (assignor `sticky`)
  and its topology; the changelog topic exists with three partitions;
- every record is counted once (read_committed);
- when one instance closes (it leaves the group), the other takes all three tasks over;
- when both are gone the group is Empty, and `--delete` removes it.

The broker's streams-group timings are lowered (`group.streams.initial.rebalance.delay.ms` 0,
heartbeats every second). Runs against Apache Kafka 4.4 too (E2E_TARGET=kafka), where streams
groups are on by default (`streams.version` 1)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from test_streams_eos import last_counts
from util import java_cmd, kafka_tool, wait_until

STREAMS_GROUPS = "org.apache.kafka.tools.streams.StreamsGroupCommand"
APP = "sg-count-app"
IN, OUT = "sg-in", "sg-out"


def tool(b, *args: str, check: bool = True) -> str:
    r = kafka_tool(STREAMS_GROUPS, "--bootstrap-server", b.bootstrap, *args, check=check)
    return r.stdout.decode() + r.stderr.decode()


def active_tasks(b) -> dict[str, list[int]]:
    """Each member's active tasks of subtopology 0, from `--describe --members`."""
    out = tool(b, "--describe", "--members", "--group", APP)
    tasks: dict[str, list[int]] = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) < 3 or cols[0] != APP:
            continue
        m = re.search(r"ACTIVE: 0:\[([\d,]*)\]", line)
        tasks[cols[1]] = sorted(int(t) for t in m.group(1).split(",") if t) if m else []
    return tasks


def start(b, tmp: Path, n: int) -> tuple[subprocess.Popen, Path]:
    stop = tmp / f"stop-{n}"
    p = subprocess.Popen(
        java_cmd("streams-count", "--bootstrap", b.bootstrap, "--in", IN, "--out", OUT, "--app-id", APP,
                 "--state-dir", str(tmp / f"state-{n}"), "--stop-file", str(stop), "--timeout-ms", "300000",
                 "--replication", "1", "--group-protocol", "streams"),
        stdout=subprocess.PIPE, stderr=open(tmp / f"app-{n}.err", "wb"))
    return p, stop


def stop_app(p: subprocess.Popen, stop: Path, tmp: Path, n: int) -> None:
    stop.touch()
    out, _ = p.communicate(timeout=90)
    assert '"error":null' in out.decode(), \
        f"instance {n}: {out.decode()}\n{(tmp / f'app-{n}.err').read_text(errors='replace')[-3000:]}"


def test_streams_group_is_run_by_the_broker(group_broker, tmp_path):
    b = group_broker
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic(IN, num_partitions=3, replication_factor=1),
                                  NewTopic(OUT, num_partitions=3, replication_factor=1)]).values():
        f.result(60)
    apps = [start(b, tmp_path, n) for n in range(2)]
    try:
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "log_level": 3})
        for i in range(300):
            p.produce(IN, key=f"k{i % 30}".encode(), value=b"v")
        assert p.flush(60) == 0

        def split() -> bool:
            t = active_tasks(b)
            return len(t) == 2 and all(t.values()) and sorted(x for v in t.values() for x in v) == [0, 1, 2]
        wait_until(split, 120, "the two instances to hold the three tasks between them")
        wait_until(lambda: last_counts(b.bootstrap, OUT) == {f"k{i}": 10 for i in range(30)}, 120,
                   "every key counted once")
        state = tool(b, "--describe", "--state", "--group", APP)
        assert re.search(rf"{APP}\s+\S+ \(\d+\)\s+sticky\s+Stable\s+2", state), state
        assert APP in tool(b, "--list").split()
        assert APP in tool(b, "--list", "--state", "stable").split()
        assert APP not in tool(b, "--list", "--state", "empty").split()
        md = admin.list_topics(timeout=10)
        changelog = f"{APP}-counts-changelog"
        assert changelog in md.topics and len(md.topics[changelog].partitions) == 3, sorted(md.topics)
        # One instance leaves: the other takes every task over.
        stop_app(*apps[0], tmp_path, 0)

        def taken_over() -> bool:
            t = active_tasks(b)
            return len(t) == 1 and list(t.values())[0] == [0, 1, 2]
        wait_until(taken_over, 90, "the remaining instance to hold the three tasks")
        p.produce(IN, key=b"k0", value=b"v")
        assert p.flush(60) == 0
        wait_until(lambda: last_counts(b.bootstrap, OUT).get("k0") == 11, 90, "k0 counted again")
        stop_app(*apps[1], tmp_path, 1)
    finally:
        for proc, stop in apps:
            stop.touch()
            if proc.poll() is None:
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
    wait_until(lambda: APP in tool(b, "--list", "--state", "empty").split(), 60, "the group to be empty")
    out = tool(b, "--delete", "--group", APP)
    assert "successful" in out, out
    wait_until(lambda: APP not in tool(b, "--list").split(), 30, "the group to be gone")
