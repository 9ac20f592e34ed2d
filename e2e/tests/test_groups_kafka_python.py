"""kafka-python consumer groups (classic protocol; kafka-python has no KIP-848 client) with the
range, roundrobin and cooperative-sticky assignors: three members (subprocesses) share a
6-partition topic, one is SIGKILLed, the survivors take over (see groupcheck.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from groupcheck import run_failover

pytestmark = pytest.mark.group_coordinator

MEMBER = Path(__file__).resolve().parent / "kp_member.py"


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_kafka_python_three_members_one_killed(group_broker, tmp, assignor):
    def cmd(name, topic, group, events, stop):
        return [sys.executable, str(MEMBER), "--bootstrap", group_broker.bootstrap, "--topic", topic,
                "--group", group, "--out", str(events), "--stop-file", str(stop), "--assignor", assignor,
                "--timeout-ms", "150000", "--session-timeout-ms", "10000"]

    summary = run_failover(group_broker.bootstrap, tmp, cmd, f"kp-{assignor}")
    print(f"kafka-python {assignor}: {summary}")
