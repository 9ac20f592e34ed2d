"""Java kafka-clients consumer groups (classic range / roundrobin / cooperative-sticky, KIP-848
consumer protocol with the uniform and range server-side assignors): three members share a
6-partition topic, one is SIGKILLed, the survivors take over its partitions after the session
timeout; every record is consumed at least once and, with commits after processing, nothing
committed is consumed twice (see groupcheck.py)."""

from __future__ import annotations

import pytest

from groupcheck import run_failover
from util import java_cmd

pytestmark = pytest.mark.group_coordinator

CASES = {
    "classic-range": ["--protocol", "classic", "--assignor", "range"],
    "classic-roundrobin": ["--protocol", "classic", "--assignor", "roundrobin"],
    "classic-cooperative-sticky": ["--protocol", "classic", "--assignor", "cooperative-sticky"],
    "consumer-uniform": ["--protocol", "consumer", "--remote-assignor", "uniform"],
    "consumer-range": ["--protocol", "consumer", "--remote-assignor", "range"],
}


@pytest.mark.parametrize("case", list(CASES))
def test_java_three_members_one_killed(group_broker, tmp, case):
    def cmd(name, topic, group, events, stop):
        return java_cmd("group-consume", "--bootstrap", group_broker.bootstrap, "--topic", topic, "--group", group,
                        "--out", str(events), "--stop-file", str(stop), "--timeout-ms", "150000",
                        "--session-timeout-ms", "6000", *CASES[case])

    summary = run_failover(group_broker.bootstrap, tmp, cmd, f"java-{case}")
    print(f"java {case}: {summary}")
