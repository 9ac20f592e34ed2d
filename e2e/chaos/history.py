"""A chaos run's history, read from the logs workload.py wrote, as the Jepsen-style queue
analysis (anomalies.py) sees it: operations of processes that send records to partitions or poll
them.

- A **send** operation: in `plain` mode one record of an idempotent producer; in `txn` mode one
  transaction (its records in the order they were produced). Its type: ok (plain: acknowledged;
  txn: committed), info (plain: a delivery error or no report at all; txn: outcome unknown) or
  fail (txn: aborted). A process is one producer instance (a fatal error starts another).
- A **poll** operation: what one `consume()` call of a consumer returned (`P` lines; logs from
  before those lines count each run of `M` lines as one), or one partition of the final read
  (`dump.log`, process "dump"). Consumers' rebalances (`R` lines) come in the same stream.

Values are ints, `producer << 32 | seq` for "pN-SEQ" (negative for anything else), so that a run
of millions of records fits in arrays (`Flags`, `Places`) rather than dicts of strings.

    h = RunHistory(run_dir)        or   MemoryHistory(...) for synthetic histories (the tests)
"""

from __future__ import annotations

import json
import re
from array import array
from collections import defaultdict
from pathlib import Path
from typing import Iterator, NamedTuple

OK, INFO, FAIL = 1, 2, 3
TYPE_NAME = {OK: "ok", INFO: "info", FAIL: "fail"}
VALUE = re.compile(r"^p(\d+)-(\d+)$")
MASK = (1 << 32) - 1


def vkey(k: int, s: int) -> int:
    return (k << 32) | s


class Send(NamedTuple):
    proc: str     # the producer instance, e.g. "producer-1#0"
    op: int       # the operation (a transaction, or in plain mode the record itself)
    type: int     # OK, INFO, FAIL
    p: int        # partition
    o: int | None  # offset acknowledged, if any
    v: int        # value


class Poll(NamedTuple):
    proc: str
    op: int
    t: float                              # when the call returned (time.time())
    reads: list[tuple[int, int, int]]     # (partition, offset, value), in the order returned


class Rebalance(NamedTuple):
    proc: str
    t: float
    kind: str          # "assigned" | "revoked"
    parts: list[int]


class Flags:
    """A set of values: a bytearray per producer, a set for the rest."""

    def __init__(self):
        self.by_k: dict[int, bytearray] = {}
        self.other: set[int] = set()

    def add(self, v: int) -> None:
        if v < 0:
            self.other.add(v)
            return
        b = self.by_k.setdefault(v >> 32, bytearray())
        s = v & MASK
        if s >= len(b):
            b.extend(bytes(s + 1 - len(b) + 4096))
        b[s] = 1

    def __contains__(self, v: int) -> bool:
        if v < 0:
            return v in self.other
        b = self.by_k.get(v >> 32)
        s = v & MASK
        return b is not None and s < len(b) and b[s] == 1


class Places:
    """value -> (first, last) place, a place being partition << 40 | offset."""

    SHIFT = 40

    def __init__(self):
        self.first: dict[int, array] = {}
        self.last: dict[int, array] = {}
        self.other: dict[int, list[int]] = {}

    def _arrs(self, v: int) -> tuple[array, array, int]:
        k, s = v >> 32, v & MASK
        f = self.first.setdefault(k, array("q"))
        la = self.last.setdefault(k, array("q"))
        if s >= len(f):
            n = s + 1 - len(f) + 4096
            f.extend([-1] * n)
            la.extend([-1] * n)
        return f, la, s

    def add(self, v: int, p: int, o: int) -> bool:
        """Records v at p/o; whether v was seen at another place before."""
        x = (p << self.SHIFT) | o
        if v < 0:
            f = self.other.setdefault(v, [x, x])
            f[1] = x if f[0] != x else f[1]
            return f[0] != x
        f, la, s = self._arrs(v)
        if f[s] == -1:
            f[s] = la[s] = x
            return False
        if f[s] != x:
            la[s] = x
            return True
        return False

    def get(self, v: int) -> tuple[int, int] | None:
        if v < 0:
            r = self.other.get(v)
            return (r[0], r[1]) if r else None
        f = self.first.get(v >> 32)
        s = v & MASK
        if f is None or s >= len(f) or f[s] == -1:
            return None
        return f[s], self.last[v >> 32][s]


class History:
    """What anomalies.py needs; RunHistory and MemoryHistory implement it."""

    partitions: int
    any_info: bool = True     # whether some send is of type INFO
    mode: str = "plain"       # plain | txn (how send operations were made)
    consume: str = "subscribe"

    def sends(self) -> Iterator[Send]:
        """Every send, each process's operations in the order they were issued, an operation's
        sends together and in their order."""
        raise NotImplementedError

    def events(self) -> Iterator[Poll | Rebalance]:
        """Every poll and rebalance, each process's in its order."""
        raise NotImplementedError

    def writer(self, v: int) -> tuple[int, int, str] | None:
        """(operation, type, process) of the send of value v, if some process sent it."""
        raise NotImplementedError

    def commit_called(self, op: int) -> float | None:
        """When the commit of transaction op was asked for (None: never, or not a transaction)."""
        return None

    def name(self, v: int) -> str:
        return f"p{v >> 32}-{v & MASK}" if v >= 0 else f"foreign#{-v}"

    def op_name(self, op: int) -> str:
        return f"op {op}"


class MemoryHistory(History):
    """A history given as lists (synthetic histories for the tests). Each op is a dict:
    {"proc", "type": OK|INFO|FAIL, "sends": [(p, o|None, v)], "reads": [(p, o, v)], "t",
    "commit_called"}; sends and reads may both be there (a transaction that polls too).
    `rebalances` are (proc, t, kind, parts) placed before the op with the same index in `at`."""

    def __init__(self, partitions: int, ops: list[dict], rebalances: list[tuple] = (),
                 mode: str = "txn", consume: str = "assign"):
        self.partitions, self.ops, self.mode, self.consume = partitions, ops, mode, consume
        self.rebalances = list(rebalances)
        self._writer = {}
        for i, op in enumerate(ops):
            for _p, _o, v in op.get("sends", []):
                self._writer.setdefault(v, (i, op.get("type", OK), op["proc"]))

    def sends(self):
        for i, op in enumerate(self.ops):
            for p, o, v in op.get("sends", []):
                yield Send(op["proc"], i, op.get("type", OK), p, o, v)

    def events(self):
        for i, op in enumerate(self.ops):
            for (proc, t, kind, parts, *at) in self.rebalances:
                if (at[0] if at else 0) == i:
                    yield Rebalance(proc, t, kind, list(parts))
            if "reads" in op:
                yield Poll(op["proc"], i, op.get("t", float(i)), list(op.get("reads", [])))

    def writer(self, v):
        return self._writer.get(v)

    def commit_called(self, op):
        return self.ops[op].get("commit_called")

    def op_name(self, op):
        o = self.ops[op]
        return f"op {op} ({o['proc']})"


class Txn(NamedTuple):
    producer: int
    k: int              # its number in the producer's log
    inst: int           # producer instance
    seqs: list[int]
    parts: list[int]
    outcome: str        # committed | aborted | unknown
    t_begin: float
    t_end_called: float | None
    t_done: float | None
    error: str

    @property
    def type(self) -> int:
        return OK if self.outcome == "committed" else FAIL if self.outcome == "aborted" else INFO


class ProducerLog:
    """One producer's log, in arrays indexed by seq."""

    def __init__(self, k: int):
        self.k = k
        self.pos = array("q")        # place acknowledged (partition << 40 | offset), -2 without offset, -1 none
        self.part = array("h")       # partition it was sent to (-1: not known)
        self.acked = bytearray()     # a delivery report without error
        self.errored = bytearray()   # a delivery report with an error
        self.inst = array("i")       # producer instance that sent it
        self.txn = array("i")        # index into txns (-1: none)
        self.txns: list[Txn] = []
        self.errors: dict[str, int] = defaultdict(int)
        self.fatals: dict[str, int] = defaultdict(int)
        self.sent = 0
        self.unresolved = 0
        self.finished = False
        self.twice: list[int] = []
        self.ack_times: dict[int, list[float]] = defaultdict(list)
        self.first_ack: float | None = None
        self.last_ack: float | None = None

    def grow(self, s: int) -> None:
        if s >= len(self.pos):
            n = s + 1 - len(self.pos) + 4096
            self.pos.extend([-1] * n)
            self.part.extend([-1] * n)
            self.acked.extend(bytes(n))
            self.errored.extend(bytes(n))
            self.inst.extend([0] * n)
            self.txn.extend([-1] * n)

    def status(self, s: int) -> int:
        """OK, INFO or FAIL for seq s; 0 for a seq never sent."""
        if s >= len(self.pos):
            return 0
        t = self.txn[s]
        if t >= 0:
            return self.txns[t].type
        if self.acked[s]:
            return OK
        return INFO if s < self.sent or self.errored[s] else 0


def read_producer(path: Path, k: int) -> ProducerLog:
    pl = ProducerLog(k)
    inst = 0
    next_inst: list[tuple[int, int]] = []  # plain mode: (first seq, instance) from F lines' next=
    txn_index: dict[int, int] = {}
    max_seq = -1
    for line in open(path):
        f = line.split()
        if not f:
            continue
        tag = f[0]
        if tag == "A":
            s, p, t = int(f[1]), int(f[2]), float(f[4])
            o = int(f[3]) if f[3].lstrip("-").isdigit() else -2
            pl.grow(s)
            if pl.acked[s]:
                pl.twice.append(s)
            pl.acked[s] = 1
            pl.part[s] = p
            pl.pos[s] = (p << Places.SHIFT) | o if o >= 0 else -2
            pl.ack_times[p].append(t)
            pl.first_ack = t if pl.first_ack is None else min(pl.first_ack, t)
            pl.last_ack = t if pl.last_ack is None else max(pl.last_ack, t)
            max_seq = max(max_seq, s)
            if pl.txn[s] < 0 and not next_inst:
                pl.inst[s] = inst  # logs without next=: the instance current at the report
        elif tag == "E":
            s = int(f[1])
            pl.grow(s)
            pl.errored[s] = 1
            pl.part[s] = int(f[2])
            pl.errors[f[3]] += 1
            max_seq = max(max_seq, s)
        elif tag == "F":
            pl.fatals[f[1]] += 1
            inst += 1
            m = re.search(r"next=(\d+)", line)
            if m:
                next_inst.append((int(m.group(1)), inst))
        elif tag == "B":
            n, t = int(f[1]), float(f[2])
            writes = [tuple(map(int, w.split(":"))) for w in f[3].split(",")] if len(f) > 3 else []
            idx = len(pl.txns)
            txn_index[n] = idx
            pl.txns.append(Txn(k, n, inst, [s for s, _ in writes], [p for _, p in writes], "unknown",
                               t, None, None, ""))
            for s, p in writes:
                pl.grow(s)
                pl.txn[s] = idx
                pl.part[s] = p
                pl.inst[s] = inst
                max_seq = max(max_seq, s)
        elif tag == "O":
            idx = txn_index.get(int(f[1]))
            if idx is not None:
                pl.txns[idx] = pl.txns[idx]._replace(
                    outcome=f[2], t_end_called=float(f[3]), t_done=float(f[4]),
                    error=f[5] if len(f) > 5 else "")
        elif tag == "S":
            pl.sent = int(f[1])
            pl.finished = True
            m = re.search(r"unresolved=(\d+)", line)
            pl.unresolved = int(m.group(1)) if m else 0
    if not pl.finished:
        pl.sent = max_seq + 1
    # plain mode: a record's instance is the one current when it was produced (F lines say from
    # which seq on the next instance produced)
    for first, i in next_inst:
        for s in range(first, len(pl.inst)):
            if pl.txn[s] < 0:
                pl.inst[s] = i
    return pl


class RunHistory(History):
    """The history of a run directory (the logs of workload.py)."""

    def __init__(self, d: Path):
        self.d = d
        self.meta = json.loads((d / "run.json").read_text()) if (d / "run.json").exists() else {}
        self.partitions = self.meta.get("partitions", 6)
        self.producers: dict[int, ProducerLog] = {}
        for f in d.glob("producer-*.log"):
            m = re.match(r"producer-(\d+)\.log$", f.name)
            if m:
                self.producers[int(m.group(1))] = read_producer(f, int(m.group(1)))
        self.producers = dict(sorted(self.producers.items()))
        any_txn = any(pl.txns for pl in self.producers.values())
        self.mode = self.meta.get("producer_mode", "txn" if any_txn else "plain")
        self.consume = self.meta.get("consume", "subscribe")
        self.any_info = any(pl.errored.count(1) or pl.unresolved or not pl.finished
                            or any(t.type == INFO for t in pl.txns) for pl in self.producers.values())
        self.foreign: dict[str, int] = {}
        # transaction op ids: producer << 32 | index; plain op ids: the value itself; polls
        # from 1 << 62 (their process noted here, for reports)
        self.poll_proc: dict[int, str] = {}

    def value(self, raw: str) -> int:
        k, _, s = raw[1:].partition("-")  # "pK-S", without a regex: millions of them
        if raw[:1] == "p" and k.isdigit() and s.isdigit() and int(k) in self.producers:
            return (int(k) << 32) | int(s)
        return -self.foreign.setdefault(raw, len(self.foreign) + 1)

    def name(self, v: int) -> str:
        if v >= 0:
            return f"p{v >> 32}-{v & MASK}"
        for raw, i in self.foreign.items():
            if -i == v:
                return repr(raw[:60])
        return "?"

    def op_name(self, op: int) -> str:
        if op >= 1 << 62:
            return f"{self.poll_proc.get(op, '?')}'s poll #{op - (1 << 62)}"
        k, i = op >> 32, op & MASK
        pl = self.producers.get(k)
        if self.mode == "txn" and pl and i < len(pl.txns):
            t = pl.txns[i]
            return f"p{k} txn {t.k} ({t.outcome})"
        return f"send p{k}-{i}"

    def sends(self):
        for k, pl in self.producers.items():
            if self.mode == "txn":
                for i, t in enumerate(pl.txns):
                    ty = t.type
                    for s, p in zip(t.seqs, t.parts):
                        x = pl.pos[s]
                        o = x & ((1 << Places.SHIFT) - 1) if x >= 0 else None
                        yield Send(f"producer-{k}#{t.inst}", vkey(k, i), ty, p, o, vkey(k, s))
            else:
                for s in range(min(pl.sent, len(pl.pos))):
                    ty = pl.status(s)
                    if not ty:
                        continue
                    x = pl.pos[s]
                    o = x & ((1 << Places.SHIFT) - 1) if x >= 0 else None
                    p = pl.part[s] if pl.part[s] >= 0 else s % self.partitions
                    yield Send(f"producer-{k}#{pl.inst[s]}", vkey(k, s), ty, p, o, vkey(k, s))

    def writer(self, v):
        if v < 0:
            return None
        k, s = v >> 32, v & MASK
        pl = self.producers.get(k)
        if pl is None:
            return None
        ty = pl.status(s)
        if not ty:
            return None
        if self.mode == "txn":
            t = pl.txn[s] if s < len(pl.txn) else -1
            if t < 0:
                return None
            return vkey(k, t), ty, f"producer-{k}#{pl.txns[t].inst}"
        return v, ty, f"producer-{k}#{pl.inst[s] if s < len(pl.inst) else 0}"

    def commit_called(self, op):
        if self.mode != "txn" or op >= 1 << 62:
            return None
        pl = self.producers.get(op >> 32)
        i = op & MASK
        if pl is None or i >= len(pl.txns):
            return None
        t = pl.txns[i]
        return t.t_end_called if t.outcome != "aborted" else None

    def consumer_logs(self) -> list[Path]:
        return sorted(self.d.glob("consumer-*.log"))

    def events(self):
        n = 0
        for cf in self.consumer_logs():
            proc = cf.stem
            batch: list[tuple[int, int, int]] = []
            t_batch = 0.0
            for line in open(cf):
                f = line.rstrip("\n").split(" ", 3)
                tag = f[0]
                if tag == "M":
                    p, o = int(f[1]), int(f[2])
                    batch.append((p, o, self.value(f[3] if len(f) > 3 else "")))
                    continue
                if batch:  # a poll is the run of M lines after a P line (older logs: any run)
                    n += 1
                    self.poll_proc[(1 << 62) + n] = proc
                    yield Poll(proc, (1 << 62) + n, t_batch, batch)
                    batch = []
                if tag == "P":
                    t_batch = float(f[1])
                elif tag == "R" and len(f) > 2:
                    parts = [int(x) for x in " ".join(f[3:]).split()] if len(f) > 3 else []
                    yield Rebalance(proc, float(f[1]), f[2], parts)
            if batch:
                n += 1
                self.poll_proc[(1 << 62) + n] = proc
                yield Poll(proc, (1 << 62) + n, t_batch, batch)
        # the final read: a process of its own, a poll per partition
        dump = self.d / "dump.log"
        if dump.exists():
            cur, batch = None, []
            for line in open(dump):
                f = line.rstrip("\n").split(" ", 2)
                p, o = int(f[0]), int(f[1])
                if p != cur and batch:
                    n += 1
                    self.poll_proc[(1 << 62) + n] = "dump"
                    yield Poll("dump", (1 << 62) + n, float("inf"), batch)
                    batch = []
                cur = p
                batch.append((p, o, self.value(f[2] if len(f) > 2 else "")))
            if batch:
                n += 1
                self.poll_proc[(1 << 62) + n] = "dump"
                yield Poll("dump", (1 << 62) + n, float("inf"), batch)
