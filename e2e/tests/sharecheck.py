"""Helpers the share-group modules share (test_share_groups.py, test_share_groups_cluster.py):
Kafka's share-group and config tools, their tables, the `share-consume` driver's output, and
producing keyed records. A target is anything with `bootstrap` and `client_conf()` (a broker or a
cluster of the harness)."""

from __future__ import annotations

import json
import time

from confluent_kafka import Producer

from util import kafka_tool, wait_until

SHARE_GROUPS = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"


def out(r) -> str:
    return (r.stdout.decode() + r.stderr.decode()).strip()


def share_tool(b, *args: str, check: bool = True):
    return kafka_tool(SHARE_GROUPS, "--bootstrap-server", b.bootstrap, *args, check=check)


def table(text: str) -> list[dict[str, str]]:
    """The rows of the tool's table whose header starts with GROUP (columns split on blanks; a
    missing last column, e.g. an empty ASSIGNMENT, is "")."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.split()[:1] == ["GROUP"]:
            header = line.split()
            rows = []
            for row in lines[i + 1:]:
                f = row.split()
                if not f:
                    break
                rows.append(dict(zip(header, f + [""] * (len(header) - len(f)))))
            return rows
    return []


def set_group_configs(b, group: str, configs: str) -> None:
    kafka_tool(CONFIGS, "--bootstrap-server", b.bootstrap, "--entity-type", "groups", "--entity-name", group,
               "--alter", "--add-config", configs)
    wanted = configs.split(",")
    wait_until(lambda: all(c in out(kafka_tool(CONFIGS, "--bootstrap-server", b.bootstrap, "--entity-type", "groups",
                                                "--entity-name", group, "--describe")) for c in wanted),
               timeout=15, what=f"group {group}'s configs {configs} described")


def produce(b, topic: str, n: int, tag: str, flush_s: float = 30) -> dict[tuple[int, int], tuple[str, str]]:
    """n keyed records k-<tag><i> / v-<tag><i> (idempotent, acks=all): {(partition, offset): (key, value)}."""
    acked: dict[tuple[int, int], tuple[str, str]] = {}
    errors: list[str] = []

    def cb(err, msg):
        if err:
            errors.append(str(err))
        else:
            acked[(msg.partition(), msg.offset())] = (msg.key().decode(), msg.value().decode())

    p = Producer({**b.client_conf(), "enable.idempotence": True, "acks": "all", "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=f"k-{tag}{i}", value=f"v-{tag}{i}", on_delivery=cb)
        p.poll(0)
    assert p.flush(flush_s) == 0 and not errors and len(acked) == n, (errors, len(acked))
    return acked


def parse_lines(text: str) -> tuple[list[dict], dict | None, list[dict]]:
    """share-consume's output: (records, summary or halted line, ack errors)."""
    recs, errs, last = [], [], None
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        d = json.loads(line)
        if "o" in d:
            recs.append(d)
        elif "ack_error" in d:
            errs.append(d)
        else:
            last = d
    return recs, last, errs


def wait_running(members: list, pred, timeout: float, what: str):
    """wait_until, failing at once (with its output) when a member's process is gone (members
    have `check_running()`)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        for m in members:
            m.check_running()
        try:
            v = pred()
            if v:
                return v
        except Exception as e:  # noqa: BLE001
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                                 + (f" (last error: {last!r})" if last else ""))
        time.sleep(0.5)
