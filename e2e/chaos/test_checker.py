"""Unit tests of the chaos checker: each Jepsen class on a small synthetic history that holds it
(and nothing else), a clean history of each mode that holds none.

    e2e/chaos/unit.sh          (./test.sh runs it; pytest from the e2e venv)

Most histories are run directories written the way workload.py writes them, so parsing
(history.py) is tested with the analysis (anomalies.py) and the report (checker.py). Classes
that need an operation which both polls and sends (G1c, precommitted-read of its own write),
which our workload never makes, use history.MemoryHistory.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import anomalies  # noqa: E402
import checker  # noqa: E402
from history import FAIL, INFO, OK, MemoryHistory, RunHistory, vkey  # noqa: E402

JEPSEN = list(anomalies.CLASSES)


class Run:
    """A run directory: producers' sends and transactions, consumers' polls, the final read."""

    def __init__(self, d: Path, mode: str = "plain", consume: str = "assign", partitions: int = 2):
        self.d, self.mode, self.consume, self.partitions = d, mode, consume, partitions
        self.prod: dict[int, list[str]] = defaultdict(list)
        self.seqs: dict[int, int] = defaultdict(int)
        self.txns: dict[int, int] = defaultdict(int)
        self.cons: dict[int, list[str]] = defaultdict(list)
        self.final: dict[int, list[tuple[int, str]]] = defaultdict(list)
        self.ends: dict[int, int] = {}
        self.t = 1000.0

    def tick(self) -> float:
        self.t += 1
        return self.t

    def send(self, k: int, p: int, o: int | None) -> str:
        """Plain mode: the next record of producer k, acknowledged at p/o (None: a delivery error)."""
        s = self.seqs[k]
        self.seqs[k] += 1
        self.prod[k].append(f"A {s} {p} {o} {self.tick():.3f}" if o is not None
                            else f"E {s} {p} _MSG_TIMED_OUT {self.tick():.3f}")
        return f"p{k}-{s}"

    def txn(self, k: int, writes: list[tuple[int, int | None]], outcome: str = "committed",
            commit_at: float | None = None) -> list[str]:
        """Txn mode: a transaction of producer k writing records acknowledged at (p, o)."""
        n = self.txns[k]
        self.txns[k] += 1
        s0 = self.seqs[k]
        self.seqs[k] += len(writes)
        self.prod[k].append(f"B {n} {self.tick():.3f} " + ",".join(f"{s0 + i}:{p}" for i, (p, _) in enumerate(writes)))
        for i, (p, o) in enumerate(writes):
            if o is not None:
                self.prod[k].append(f"A {s0 + i} {p} {o} {self.tick():.3f}")
        tc = commit_at if commit_at is not None else self.tick()
        self.prod[k].append(f"O {n} {outcome} {tc:.3f} {self.tick():.3f}")
        return [f"p{k}-{s0 + i}" for i in range(len(writes))]

    def poll(self, c: int, reads: list[tuple[int, int, str]], t: float | None = None) -> None:
        self.cons[c].append(f"P {t if t is not None else self.tick():.3f} {len(reads)}")
        self.cons[c] += [f"M {p} {o} {v}" for p, o, v in reads]

    def rebalance(self, c: int, kind: str, parts: list[int]) -> None:
        self.cons[c].append(f"R {self.tick():.3f} {kind} " + " ".join(map(str, parts)))

    def log(self, p: int, records: list[tuple[int, str]], end: int | None = None) -> None:
        """The final read of partition p: (offset, value) in offset order; end: its end offset."""
        self.final[p] = records
        self.ends[p] = end if end is not None else (records[-1][0] + 1 if records else 0)

    def write(self) -> Path:
        d = self.d
        d.mkdir(parents=True, exist_ok=True)
        for k, lines in self.prod.items():
            (d / f"producer-{k}.log").write_text("\n".join(lines + [f"S {self.seqs[k]} 0 {self.tick():.3f} "
                                                                      "unresolved=0"]) + "\n")
        for c, lines in self.cons.items():
            (d / f"consumer-{c}.log").write_text("\n".join(lines) + "\n")
        with open(d / "dump.log", "w") as f:
            for p in sorted(self.final):
                for o, v in self.final[p]:
                    f.write(f"{p} {o} {v}\n")
        ends = {str(p): self.ends.get(p, 0) for p in range(self.partitions)}
        (d / "dump.json").write_text(json.dumps({"start": {str(p): 0 for p in range(self.partitions)},
                                                 "end": ends, "records": 0}))
        (d / "final-offsets.json").write_text(json.dumps(ends))
        (d / "run.json").write_text(json.dumps({"partitions": self.partitions, "producer_mode": self.mode,
                                                "consume": self.consume, "producers": len(self.prod),
                                                "consumers": len(self.cons)}))
        return d

    def check(self) -> dict:
        return checker.check(self.write())


def found(r: dict) -> dict[str, int]:
    """The Jepsen classes a report holds, with their counts."""
    return {c: x["count"] for c, x in r["anomalies"].items() if not c.startswith("_") and x["count"]}


# ---------------------------------------------------------------------------------------------
# clean histories

def clean_plain(tmp: Path) -> Run:
    r = Run(tmp, "plain", "subscribe")
    a = [r.send(1, 0, 0), r.send(2, 1, 0), r.send(1, 0, 1), r.send(2, 1, 1), r.send(1, 0, 2)]
    r.rebalance(1, "assigned", [0, 1])
    r.poll(1, [(0, 0, a[0]), (0, 1, a[2]), (1, 0, a[1])])
    r.poll(1, [(0, 2, a[4]), (1, 1, a[3])])
    r.rebalance(1, "revoked", [0, 1])
    r.rebalance(2, "assigned", [0, 1])
    r.poll(2, [(0, 1, a[2])])  # a new assignment may start lower (the committed offset)
    r.log(0, [(0, a[0]), (1, a[2]), (2, a[4])])
    r.log(1, [(0, a[1]), (1, a[3])])
    return r


def clean_txn(tmp: Path) -> Run:
    """Two producers' transactions, one aborted (its records in the log, invisible), markers
    taking offsets: partition 0 = T0 a@0, marker@1, aborted x@2, marker@3, T2 c@4, marker@5."""
    r = Run(tmp, "txn", "assign")
    a, b = r.txn(1, [(0, 0), (1, 0)])
    x, = r.txn(1, [(0, 2)], outcome="aborted")
    c, d = r.txn(1, [(0, 4), (1, 2)])
    e, f = r.txn(2, [(1, 4), (1, 5)])
    r.rebalance(1, "assigned", [0])
    r.rebalance(2, "assigned", [1])
    r.poll(1, [(0, 0, a)])
    r.poll(1, [(0, 4, c)])
    r.poll(2, [(1, 0, b), (1, 2, d)])
    r.poll(2, [(1, 4, e), (1, 5, f)])
    r.log(0, [(0, a), (4, c)], end=6)
    r.log(1, [(0, b), (2, d), (4, e), (5, f)], end=7)
    return r


def test_clean_plain_history_reports_nothing(tmp_path):
    r = clean_plain(tmp_path).check()
    assert found(r) == {} and r["ok"], r["violations"]


def test_clean_txn_history_reports_nothing(tmp_path):
    r = clean_txn(tmp_path).check()
    assert found(r) == {} and r["ok"], (r["violations"], r["examples"])
    assert r["counts"]["txn_committed"] == 3 and r["counts"]["txn_aborted"] == 1
    assert r["counts"]["acked"] == 6  # the committed records; the aborted one is not acknowledged


def test_a_transaction_split_across_polls_is_only_an_allowed_g2(tmp_path):
    """A poll may end in the middle of a committed transaction: it read T's e but not the f after
    it, so poll -rw-> T -wr-> poll. Jepsen's graph has no rw edges; ours reports G2, allowed."""
    r = clean_txn(tmp_path)
    r.cons[2] = r.cons[2][:1] + ["P 5000.0 3", "M 1 0 p1-1", "M 1 2 p1-4", "M 1 4 p2-0", "P 5001.0 1", "M 1 5 p2-1"]
    rep = r.check()
    assert found(rep) == {"G2": 1} and rep["ok"]
    assert "-rw-> p2 txn 0 (committed) -wr->" in rep["anomalies"]["G2"]["examples"][0]


# ---------------------------------------------------------------------------------------------
# each class

def test_lost_write(tmp_path):
    r = Run(tmp_path)
    a, b, c = r.send(1, 0, 0), r.send(1, 0, 1), r.send(1, 0, 2)
    r.poll(1, [(0, 0, a), (0, 2, c)])
    r.log(0, [(0, a), (2, c)], end=3)
    rep = r.check()
    # every reader skipped the lost record's offset too
    assert found(rep) == {"lost-write": 1, "unseen": 1, "int-poll-skip": 2}
    assert "p1-1" in rep["anomalies"]["lost-write"]["examples"][0]
    assert not rep["ok"] and rep["counts"]["lost"] == 1


def test_unseen(tmp_path):
    r = Run(tmp_path)
    a, b = r.send(1, 0, 0), r.send(1, 0, 1)
    r.poll(1, [(0, 0, a)])
    r.log(0, [(0, a)], end=2)
    rep = r.check()
    assert found(rep) == {"unseen": 1}  # nobody read that far: not provably a lost write
    assert "unseen" in rep["violations"]


def test_duplicate(tmp_path):
    r = Run(tmp_path)
    a, b = r.send(1, 0, 0), r.send(1, 0, 1)
    r.poll(1, [(0, 0, a), (0, 1, b), (0, 2, a)])
    r.log(0, [(0, a), (1, b), (2, a)])
    rep = r.check()
    assert found(rep) == {"duplicate": 1}
    assert rep["counts"]["duplicated"] == 1


def test_inconsistent_offsets(tmp_path):
    r = Run(tmp_path)
    a, b = r.send(1, 0, 0), r.send(1, 0, 1)
    r.poll(1, [(0, 0, a), (0, 1, "zzz")])  # a consumer saw something else at 0/1
    r.poll(2, [(0, 1, b)])
    r.log(0, [(0, a), (1, b)])
    rep = r.check()
    assert found(rep) == {"inconsistent-offsets": 1}
    assert "0/1" in rep["anomalies"]["inconsistent-offsets"]["examples"][0]


def three(r: Run) -> list[str]:
    vals = [r.send(1, 0, 0), r.send(1, 0, 1), r.send(1, 0, 2)]
    r.log(0, list(enumerate(vals)))
    return vals


def test_poll_skip(tmp_path):
    r = Run(tmp_path)
    a, b, c = three(r)
    r.poll(1, [(0, 0, a)])
    r.poll(1, [(0, 2, c)])
    r.poll(2, [(0, 1, b)])
    assert found(r.check()) == {"poll-skip": 1}


def test_poll_skip_is_not_one_across_a_rebalance(tmp_path):
    r = Run(tmp_path, consume="subscribe")
    a, b, c = three(r)
    r.rebalance(1, "assigned", [0])
    r.poll(1, [(0, 0, a)])
    r.rebalance(1, "revoked", [0])
    r.rebalance(2, "assigned", [0])
    r.poll(2, [(0, 1, b)])
    r.rebalance(2, "revoked", [0])
    r.rebalance(1, "assigned", [0])
    r.poll(1, [(0, 2, c)])
    assert found(r.check()) == {}


def test_nonmonotonic_poll(tmp_path):
    r = Run(tmp_path)
    a, b, c = three(r)
    r.poll(1, [(0, 0, a), (0, 1, b)])
    r.poll(1, [(0, 1, b), (0, 2, c)])
    assert found(r.check()) == {"nonmonotonic-poll": 1}


def test_int_poll_skip(tmp_path):
    r = Run(tmp_path)
    a, b, c = three(r)
    r.poll(1, [(0, 0, a), (0, 2, c)])
    r.poll(2, [(0, 1, b)])
    assert found(r.check()) == {"int-poll-skip": 1}


def test_int_nonmonotonic_poll(tmp_path):
    r = Run(tmp_path)
    a, b, c = three(r)
    r.poll(1, [(0, 1, b), (0, 0, a), (0, 2, c)])
    assert found(r.check()) == {"int-nonmonotonic-poll": 1, "int-poll-skip": 1}  # b..a back, a..c over b


def test_int_nonmonotonic_poll_repeating_a_record(tmp_path):
    r = Run(tmp_path)
    a, b, c = three(r)
    r.poll(1, [(0, 0, a), (0, 0, a), (0, 1, b), (0, 2, c)])
    assert found(r.check()) == {"int-nonmonotonic-poll": 1}


def test_polls_are_told_apart_by_their_p_lines(tmp_path):
    r = Run(tmp_path)
    a, b, c = three(r)
    r.poll(1, [(0, 0, a), (0, 1, b)])
    r.poll(1, [(0, 0, a)])  # two polls: a nonmonotonic poll, no int- class
    r.poll(1, [(0, 1, b), (0, 2, c)])
    assert found(r.check()) == {"nonmonotonic-poll": 1}


def test_nonmonotonic_send(tmp_path):
    r = Run(tmp_path)
    a = r.send(1, 0, 1)
    b = r.send(1, 0, 0)  # the producer's second record landed before its first
    r.poll(1, [(0, 0, b), (0, 1, a)])
    r.log(0, [(0, b), (1, a)])
    rep = r.check()
    assert found(rep) == {"nonmonotonic-send": 1}
    assert rep["counts"]["order"] == 1


def test_nonmonotonic_send_at_the_same_offset(tmp_path):
    r = Run(tmp_path)
    a, b = r.send(1, 0, 0), r.send(1, 0, 0)  # two records acknowledged at one offset
    r.poll(1, [(0, 0, a)])
    r.log(0, [(0, a)])
    rep = r.check()
    assert found(rep) == {"nonmonotonic-send": 1, "inconsistent-offsets": 1, "lost-write": 1, "unseen": 1}


def test_nonmonotonic_send_across_transactions(tmp_path):
    r = Run(tmp_path, mode="txn")
    a, = r.txn(1, [(0, 2)])
    b, = r.txn(1, [(0, 0)])
    r.poll(1, [(0, 0, b), (0, 2, a)])
    r.log(0, [(0, b), (2, a)], end=4)
    assert found(r.check()) == {"nonmonotonic-send": 1}


def test_int_send_skip_is_reported_and_allowed(tmp_path):
    r = Run(tmp_path, mode="txn")
    a, c = r.txn(1, [(0, 0), (0, 2)])
    b, = r.txn(2, [(0, 1)])  # another transaction's record between them: Kafka allows it
    r.poll(1, [(0, 0, a), (0, 1, b), (0, 2, c)])
    r.log(0, [(0, a), (1, b), (0 + 2, c)], end=5)
    rep = r.check()
    # p1's transaction -ww-> p2's (offset 0 then 1) -ww-> p1's (1 then 2): a G0 cycle, allowed too
    assert found(rep) == {"int-send-skip": 1, "G0": 1}
    assert rep["ok"], rep["violations"]


def test_int_nonmonotonic_send(tmp_path):
    r = Run(tmp_path, mode="txn")
    a, b = r.txn(1, [(0, 1), (0, 0)])
    r.poll(1, [(0, 0, b), (0, 1, a)])
    r.log(0, [(0, b), (1, a)], end=3)
    rep = r.check()
    assert found(rep) == {"int-nonmonotonic-send": 1}
    assert not rep["ok"]


def test_int_nonmonotonic_send_at_the_same_offset(tmp_path):
    r = Run(tmp_path, mode="txn")
    a, b = r.txn(1, [(0, 0), (0, 0)])
    r.poll(1, [(0, 0, a)])
    r.log(0, [(0, a)], end=2)
    rep = r.check()
    assert found(rep) == {"int-nonmonotonic-send": 1, "inconsistent-offsets": 1, "lost-write": 1, "unseen": 1}


def test_g1a_aborted_read(tmp_path):
    r = Run(tmp_path, mode="txn")
    a, = r.txn(1, [(0, 0)])
    x, = r.txn(1, [(0, 2)], outcome="aborted")
    r.poll(1, [(0, 0, a), (0, 2, x)])
    r.log(0, [(0, a), (2, x)], end=4)
    rep = r.check()
    assert found(rep) == {"G1a": 2}  # the consumer and the final read
    assert "G1a" in rep["violations"]


def test_unknown_transaction_may_be_visible_or_not(tmp_path):
    r = Run(tmp_path, mode="txn")
    a, = r.txn(1, [(0, 0)], outcome="unknown")
    b, = r.txn(1, [(0, 2)], outcome="unknown")
    r.poll(1, [(0, 0, a)])
    r.log(0, [(0, a)], end=4)
    assert found(r.check()) == {}


def test_unknown_transaction_seen_in_part_is_a_lost_write(tmp_path):
    r = Run(tmp_path, mode="txn")
    a, b = r.txn(1, [(0, 0), (0, 1)], outcome="unknown")
    c, = r.txn(1, [(0, 3)])
    r.poll(1, [(0, 0, a), (0, 3, c)])
    r.log(0, [(0, a), (3, c)], end=5)
    rep = r.check()
    assert found(rep) == {"lost-write": 1, "int-poll-skip": 2}
    assert "p1-1" in rep["anomalies"]["lost-write"]["examples"][0]


def test_precommitted_read(tmp_path):
    r = Run(tmp_path, mode="txn")
    a, = r.txn(1, [(0, 0)], commit_at=2000.0)
    r.poll(1, [(0, 0, a)], t=1500.0)  # returned before the transaction asked to commit
    r.poll(2, [(0, 0, a)], t=2500.0)
    r.log(0, [(0, a)], end=2)
    rep = r.check()
    assert found(rep) == {"precommitted-read": 1}
    assert "consumer-1" in rep["anomalies"]["precommitted-read"]["examples"][0]


def test_g0_write_cycle_is_reported_and_allowed(tmp_path):
    r = Run(tmp_path, mode="txn")
    a0, a1 = r.txn(1, [(0, 0), (1, 1)])
    b0, b1 = r.txn(2, [(0, 1), (1, 0)])  # partition 0: p1's then p2's; partition 1: p2's then p1's
    r.poll(1, [(0, 0, a0), (0, 1, b0), (1, 0, b1), (1, 1, a1)])
    r.log(0, [(0, a0), (1, b0)], end=3)
    r.log(1, [(0, b1), (1, a1)], end=3)
    rep = r.check()
    assert found(rep) == {"G0": 1}
    ex = rep["anomalies"]["G0"]["examples"][0]
    assert "-ww->" in ex and "p1 txn 0" in ex and "p2 txn 0" in ex
    assert rep["ok"]


# in-memory histories: operations that poll and send

def test_g1c_cycle_of_ww_and_wr():
    x, y, z = vkey(1, 0), vkey(2, 0), vkey(2, 1)
    ops = [
        {"proc": "t1", "type": OK, "sends": [(0, 0, x)], "reads": [(1, 0, y)]},  # T1 read T2's y
        {"proc": "t2", "type": OK, "sends": [(1, 0, y), (0, 1, z)]},             # z after T1's x
        {"proc": "final", "reads": [(0, 0, x), (0, 1, z), (1, 0, y)]},
    ]
    res = anomalies.analyse(MemoryHistory(2, ops))
    assert {c: v["count"] for c, v in res.items() if not c.startswith("_") and v["count"]} == {"G1c": 1}
    assert "-wr->" in res["G1c"]["examples"][0] and "-ww->" in res["G1c"]["examples"][0]


def test_precommitted_read_of_its_own_write():
    x = vkey(1, 0)
    ops = [{"proc": "t1", "type": OK, "sends": [(0, 0, x)], "reads": [(0, 0, x)]}]
    res = anomalies.analyse(MemoryHistory(1, ops))
    assert {c: v["count"] for c, v in res.items() if not c.startswith("_") and v["count"]} == \
        {"precommitted-read": 1}


def test_rw_dependencies_and_g2():
    """poll P reads partition 0 up to T1's record (T2's is next: P -rw-> T2), and partition 1's
    record of T3, which follows T2's there (T2 -ww-> T3 -wr-> P)."""
    t1, t2a, t2b, t3 = vkey(1, 0), vkey(2, 0), vkey(2, 1), vkey(3, 0)
    ops = [
        {"proc": "w1", "type": OK, "sends": [(0, 0, t1)]},
        {"proc": "w2", "type": OK, "sends": [(0, 1, t2a), (1, 0, t2b)]},
        {"proc": "w3", "type": OK, "sends": [(1, 1, t3)]},
        {"proc": "c", "reads": [(0, 0, t1), (1, 1, t3)]},
        {"proc": "final", "reads": [(0, 0, t1), (0, 1, t2a), (1, 0, t2b), (1, 1, t3)]},
    ]
    h = MemoryHistory(2, ops)
    res = anomalies.analyse(h)
    assert {c: v["count"] for c, v in res.items() if not c.startswith("_") and v["count"]} == {"G2": 1}
    assert res["G2"]["allowed"]
    vo = anomalies.VersionOrder()
    for op in ops:
        for p, o, v in op.get("sends", []) + op.get("reads", []):
            vo.add(p, o, v)
    vo.freeze()
    g = anomalies.dependency_graph(h, vo)
    assert (3, 1) in g["rw"]          # P read partition 0 up to t1, T2 wrote the next record
    assert (1, 2) in g["ww"] and (0, 1) in g["ww"]
    assert (2, 3) in g["wr"] and (2, 4) in g["wr"]


def test_every_class_has_a_test():
    tested = {"lost-write", "unseen", "duplicate", "inconsistent-offsets", "poll-skip", "nonmonotonic-poll",
              "int-poll-skip", "int-nonmonotonic-poll", "nonmonotonic-send", "int-send-skip",
              "int-nonmonotonic-send", "G1a", "precommitted-read", "G0", "G1c", "G2"}
    assert tested == set(JEPSEN)


@pytest.mark.parametrize("mode", ["plain", "txn"])
def test_report_names_the_modes(tmp_path, mode):
    r = (clean_plain if mode == "plain" else clean_txn)(tmp_path)
    rep = r.check()
    md = checker.markdown(rep)
    assert rep["modes"]["producers"] == mode
    assert ("transactional producers" in md) == (mode == "txn")
    assert "## Jepsen's queue classes" in md


def test_runhistory_reads_instances_and_outcomes(tmp_path):
    r = Run(tmp_path, mode="txn")
    r.txn(1, [(0, 0), (1, 0)])
    r.prod[1].append("F commit:_FENCED:fatal 1.0 new-instance")
    r.txn(1, [(0, 2)], outcome="unknown")
    r.log(0, [(0, "p1-0")])
    h = RunHistory(r.write())
    sends = list(h.sends())
    assert [(s.proc, s.type) for s in sends] == [("producer-1#0", OK), ("producer-1#0", OK), ("producer-1#1", INFO)]
    assert h.writer(vkey(1, 2))[1] == INFO and h.writer(vkey(1, 0))[1] == OK
    assert FAIL not in {s.type for s in sends}
