"""Committed offsets and group membership survive a broker restart (SIGTERM, restart on the same data
dir and port). A Java group member keeps running across the restart: the group still lists it
under the same member id (its membership was loaded back, it did not have to rejoin), it resumes
after its committed offsets (nothing committed is consumed again), and --describe shows the offsets.
Then, after a second restart with the member stopped, a fresh member starts at the committed offsets."""

from __future__ import annotations

import time
import uuid

import pytest

from clients import Confluent
from conftest import GROUP_OVERRIDES
from groupcheck import Member, _committed, _wait, committed_offsets_admin
from test_consumer_group_command import CGC, consume_first, describe
from util import dataset, java_cmd, kafka_tool

pytestmark = [pytest.mark.group_coordinator, pytest.mark.durability]

PARTS = 3


def members_of(bootstrap, group) -> list[str]:
    r = kafka_tool(CGC, "--bootstrap-server", bootstrap, "--describe", "--group", group, "--members", timeout=120)
    out = r.stdout.decode(errors="replace")
    return sorted(ln.split()[1] for ln in out.splitlines() if ln.split()[:1] == [group])


def end_of(acked) -> dict[int, int]:
    end = {p: 0 for p in range(PARTS)}
    for p, o in acked.values():
        end[p] = max(end[p], o + 1)
    return end


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_offsets_and_membership_survive_restart(new_broker, tmp, protocol):
    b = new_broker(GROUP_OVERRIDES)
    tag = uuid.uuid4().hex[:6]
    topic, group = f"e2e-restart-{tag}", f"e2e-restart-g-{tag}"
    prod = Confluent(b.bootstrap, tmp)
    prod.create_topic(topic, PARTS)
    recs = dataset(900, seed=5, headers=False)
    stop = tmp / "stop"
    extra = (["--protocol", "classic", "--assignor", "range", "--session-timeout-ms", "30000"] if protocol == "classic"
             else ["--protocol", "consumer"])
    m = Member("m", java_cmd("group-consume", "--bootstrap", b.bootstrap, "--topic", topic, "--group", group,
                             "--out", str(tmp / "m.jsonl"), "--stop-file", str(stop), "--timeout-ms", "150000",
                             *extra), tmp / "m.jsonl", tmp)
    try:
        _wait(lambda: m.assignment() == list(range(PARTS)), 60, "the member to own all partitions", [m])
        acked = prod.produce(topic, recs[:300], "none")
        end1 = end_of(acked)
        _wait(lambda: _committed([m]) == end1, 60, f"phase 1 committed up to {end1}", [m])
        ids_before = members_of(b.bootstrap, group)
        assert len(ids_before) == 1, ids_before

        assert b.stop() == 0 or b.name == "kafka", "broker did not exit cleanly on SIGTERM"
        t_restart = int(time.time() * 1000)
        b.start()
        d = describe(b.bootstrap, group, topic)
        assert {p: v[:3] for p, v in d.items()} == {p: (end1[p], end1[p], 0) for p in range(PARTS)}, \
            f"--describe after restart: {d}, committed before: {end1}"
        ids_after = members_of(b.bootstrap, group)
        assert ids_after == ids_before, f"group members before the restart {ids_before}, after {ids_after}"

        acked2 = prod.produce(topic, recs[300:600], "none")
        acked.update({300 + i: v for i, v in acked2.items()})
        end2 = end_of(acked)
        _wait(lambda: _committed([m]) == end2, 90, f"phase 2 committed up to {end2} after the restart", [m])
        after = [e for e in m.read() if e["ev"] == "rec" and e["t"] >= t_restart]
        firsts = {p: min(e["o"] for e in after if e["p"] == p) for p in range(PARTS)}
        assert firsts == end1, f"after the restart the member re-read from {firsts}, committed were {end1}"
        assert sorted({e["i"] for e in m.read() if e["ev"] == "rec"}) == list(range(600))
        assert members_of(b.bootstrap, group) == ids_before, "the member had to rejoin after the restart"
        stop.write_text("stop")
        m.proc.wait(60)
        assert m.proc.returncode == 0, m.diag()
    finally:
        if m.proc.poll() is None:
            m.proc.kill()

    # second restart with no member: the committed offsets alone carry the position
    acked3 = prod.produce(topic, recs[600:], "none")
    acked.update({600 + i: v for i, v in acked3.items()})
    end3 = end_of(acked)
    b.stop()
    b.start()
    assert committed_offsets_admin(b.bootstrap, group, topic, PARTS) == end2
    d = describe(b.bootstrap, group, topic)
    assert d == {p: (end2[p], end3[p], end3[p] - end2[p], "-") for p in range(PARTS)}, \
        f"--describe after the second restart: {d}; committed {end2}, log end {end3}"
    first = consume_first(b.bootstrap, group, topic, set(range(PARTS)))
    assert first == end2, f"fresh member after the restart started at {first}, committed {end2}"
