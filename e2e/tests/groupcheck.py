"""A consumer-group failover scenario shared by the per-client tests (Java, kafka-python, kafkajs).

Each member is a subprocess that logs JSON events to its own file, flushed line by line:
    {"t": ms, "ev": "assigned", "parts": [...]}     its whole assignment, whenever it changes
    {"t": ms, "ev": "rec", "p": p, "o": o, "i": i}  a processed record (i = dataset index from the value)
    {"t": ms, "ev": "commit", "offsets": {"p": next offset}}   after the commit succeeded
    {"t": ms, "ev": "commit_failed", "error": "..."}
Members process a poll's records first, then commit them (commit after processing), and stop when
the stop file appears.

Scenario (`run_failover`): three members join a 6-partition topic and settle 2/2/2; phase 1 records
are produced, consumed and committed; member m1 is SIGKILLed (no LeaveGroup); phase 2 records are
produced; the two survivors must take over all 6 partitions (3/3) after the session timeout and
consume + commit everything. Then:
  * every produced record was consumed at least once, at the offset its produce was acknowledged at;
  * no record is consumed after a commit at a higher offset for its partition was logged by any
    member (nothing committed is consumed twice) -- in particular survivors resume the killed
    member's partitions exactly at its last committed offsets;
  * the group's committed offsets (OffsetFetch, read back with an admin client) are the end offsets.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

from util import dataset

PARTS = 6
N1 = 600  # phase 1 (before the kill)
N2 = 600  # phase 2 (after the kill)


class Member:
    def __init__(self, name: str, cmd: list[str], events: Path, tmp: Path):
        self.name = name
        self.events = events
        self.stdout = tmp / f"{name}.stdout"
        self.stderr = tmp / f"{name}.stderr"
        with open(self.stdout, "wb") as o, open(self.stderr, "wb") as e:
            self.proc = subprocess.Popen(cmd, stdout=o, stderr=e, stdin=subprocess.DEVNULL, start_new_session=True)

    def read(self) -> list[dict]:
        try:
            text = self.events.read_text()
        except FileNotFoundError:
            return []
        out = []
        for ln in text.split("\n"):
            if not ln.strip():
                continue
            try:
                out.append(json.loads(ln))
            except json.JSONDecodeError:
                pass  # a line cut by SIGKILL (or still being written)
        return out

    def assignment(self) -> list[int] | None:
        a = [e["parts"] for e in self.read() if e["ev"] == "assigned"]
        return a[-1] if a else None

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def diag(self) -> str:
        def tail(p, n=40):
            try:
                return "\n".join(p.read_text(errors="replace").splitlines()[-n:])
            except FileNotFoundError:
                return ""
        evs = self.read()
        assigns = [(e["t"], e["parts"]) for e in evs if e["ev"] == "assigned"]
        fails = [e for e in evs if e["ev"] == "commit_failed"][:3]
        return (f"--- {self.name} (exit {self.proc.poll()}): {sum(e['ev'] == 'rec' for e in evs)} records, "
                f"assignments {assigns}, commit failures {fails}\nstderr:\n{tail(self.stderr)}\n"
                f"stdout:\n{tail(self.stdout, 5)}")


def _end_offsets(acked: dict[int, tuple[int, int]]) -> dict[int, int]:
    end = {p: 0 for p in range(PARTS)}
    for p, o in acked.values():
        end[p] = max(end[p], o + 1)
    return end


def _committed(members: list[Member]) -> dict[int, int]:
    c: dict[int, int] = {}
    for m in members:
        for e in m.read():
            if e["ev"] == "commit":
                for p, o in e["offsets"].items():
                    c[int(p)] = max(c.get(int(p), 0), o)
    return c


def _wait(pred, timeout: float, what: str, members: list[Member]):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        for m in members:
            if m.proc.poll() is not None:
                raise AssertionError(f"member {m.name} exited early while waiting for {what}\n{m.diag()}")
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n" + "\n".join(m.diag() for m in members))


def _spread(members: list[Member], each: int) -> bool:
    a = [m.assignment() for m in members]
    return (all(x is not None and len(x) == each for x in a)
            and sorted(p for x in a for p in x) == list(range(PARTS)))


def committed_offsets_admin(bootstrap: str, group: str, topic: str, parts: int = PARTS) -> dict[int, int]:
    """OffsetFetch for the whole topic through confluent-kafka's AdminClient."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient
    a = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(parts)])
    deadline = time.monotonic() + 60
    while True:  # librdkafka's admin does not retry COORDINATOR_LOAD_IN_PROGRESS (just after a restart)
        try:
            res = a.list_consumer_group_offsets([req], request_timeout=30)[group].result(timeout=60)
            return {tp.partition: tp.offset for tp in res.topic_partitions}
        except Exception as e:  # noqa: BLE001
            if "LOAD_IN_PROGRESS" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def run_failover(bootstrap: str, tmp: Path, member_cmd, label: str, *, session_timeout_s: float = 6.0) -> dict:
    """member_cmd(name, topic, group, events_path, stop_file) -> argv. Returns a small summary."""
    from clients import Confluent
    tag = uuid.uuid4().hex[:6]
    topic = f"e2e-failover-{label}-{tag}"
    group = f"e2e-g-{label}-{tag}"
    prod = Confluent(bootstrap, tmp)
    prod.create_topic(topic, PARTS)
    recs = dataset(N1 + N2, seed=48, headers=False)
    stop = tmp / f"stop-{tag}"
    members = [Member(n, member_cmd(n, topic, group, tmp / f"{n}-{tag}.jsonl", stop), tmp / f"{n}-{tag}.jsonl", tmp)
               for n in ("m0", "m1", "m2")]
    try:
        _wait(lambda: _spread(members, 2), 90, "three members to share the 6 partitions 2/2/2", members)
        acked = prod.produce(topic, recs[:N1], "none")
        end1 = _end_offsets(acked)
        _wait(lambda: all(_committed(members).get(p, 0) == end1[p] for p in range(PARTS)), 60,
              f"phase 1 consumed and committed up to {end1}", members)
        killed, survivors = members[1], [members[0], members[2]]
        killed_parts = killed.assignment()
        killed_commits = _committed([killed])
        assert sorted(killed_commits) == killed_parts and all(
            killed_commits[p] == end1[p] for p in killed_parts), \
            f"m1 should have committed its partitions {killed_parts} up to {end1}: {killed_commits}"
        t_kill = time.monotonic()
        killed.kill9()
        acked2 = prod.produce(topic, recs[N1:], "none")
        acked.update({N1 + i: po for i, po in acked2.items()})
        end = _end_offsets(acked)
        _wait(lambda: _spread(survivors, 3), 60 + session_timeout_s,
              "the survivors to own all 6 partitions 3/3", survivors)
        t_takeover = time.monotonic() - t_kill
        _wait(lambda: all(_committed(survivors).get(p, 0) == end[p] for p in range(PARTS)), 60,
              f"everything consumed and committed by the survivors up to {end}", survivors)
        final_assign = {m.name: m.assignment() for m in survivors}
        stop.write_text("stop")
        for m in survivors:
            try:
                m.proc.wait(60)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{m.name} did not stop within 60s\n{m.diag()}") from None
            assert m.proc.returncode == 0, f"{m.name} exited with {m.proc.returncode}\n{m.diag()}"

        # --- the guarantees -----------------------------------------------------------------
        events = [(m.name, e) for m in members for e in m.read()]
        recs_ev = [(n, e) for n, e in events if e["ev"] == "rec"]
        problems = []
        seen = {}
        for n, e in recs_ev:
            if e["i"] is None or e["i"] not in acked:
                problems.append(f"{n} consumed an unknown record {e}")
                continue
            if acked[e["i"]] != (e["p"], e["o"]):
                problems.append(f"{n}: record {e['i']} at {(e['p'], e['o'])}, acknowledged at {acked[e['i']]}")
            seen.setdefault(e["i"], []).append(n)
        missing = [i for i in range(N1 + N2) if i not in seen]
        if missing:
            problems.append(f"{len(missing)} of {N1 + N2} records never consumed, e.g. {missing[:10]}")
        # Nothing committed is consumed again: a record consumed at (p, o) at time t must not have a
        # commit > o for p logged (by anyone) before t.
        commits = sorted((e["t"], n, int(p), o) for n, e in events if e["ev"] == "commit"
                         for p, o in e["offsets"].items())
        for n, e in recs_ev:
            for t, cn, p, o in commits:
                if t >= e["t"]:
                    break
                if p == e["p"] and o > e["o"]:
                    problems.append(f"{n} consumed {p}/{e['o']} at t={e['t']} although {cn} had committed "
                                    f"offset {o} for partition {p} at t={t}")
                    break
        for p in killed_parts:
            first = min((e["o"] for n, e in recs_ev if n != "m1" and e["p"] == p), default=None)
            if first != killed_commits[p]:
                problems.append(f"killed member's partition {p}: survivors started at offset {first}, "
                                f"its last commit was {killed_commits[p]}")
        fetched = committed_offsets_admin(bootstrap, group, topic)
        if fetched != end:
            problems.append(f"OffsetFetch after the survivors stopped: {fetched}, want the end offsets {end}")
        if problems:
            raise AssertionError(f"[{label}] {len(problems)} problem(s):\n  " + "\n  ".join(problems[:20]) + "\n"
                                 + "\n".join(m.diag() for m in members))
        dups = sum(len(v) - 1 for v in seen.values())
        return {"takeover_s": round(t_takeover, 1), "final": final_assign, "redelivered": dups}
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.proc.kill()
                m.proc.wait(10)
