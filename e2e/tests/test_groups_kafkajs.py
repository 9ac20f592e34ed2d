"""kafkajs consumer groups (classic protocol, the RoundRobin assigner -- the only one kafkajs ships):
three members (node subprocesses) share a 6-partition topic, one is SIGKILLed, the survivors take
over (see groupcheck.py)."""

from __future__ import annotations

import pytest

from brokers import E2E_DIR
from groupcheck import run_failover

pytestmark = pytest.mark.group_coordinator


def test_kafkajs_three_members_one_killed(group_broker, tmp):
    def cmd(name, topic, group, events, stop):
        return ["node", str(E2E_DIR / "js" / "client.js"), "group-member", "--bootstrap", group_broker.bootstrap,
                "--topic", topic, "--group", group, "--out", str(events), "--stop-file", str(stop),
                "--timeout-ms", "150000", "--session-timeout-ms", "6000"]

    summary = run_failover(group_broker.bootstrap, tmp, cmd, "kafkajs-roundrobin")
    print(f"kafkajs roundrobin: {summary}")
