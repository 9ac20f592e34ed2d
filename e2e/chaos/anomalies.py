"""The anomaly classes of Jepsen's Kafka "queue" checker (jepsen.tests.kafka, used for Kafka and
Redpanda), computed over a History (history.py). Our own code, after Jepsen's definitions:

- The **version order** of a partition: every offset some poll returned or some send was
  acknowledged at (sends of committed/ok operations, and of info ones when a poll saw one of
  their records), offset order, gaps (markers, aborted records) left out; the index of an offset
  is its rank in it. Polls are placed by the offsets they returned, sends by their acknowledged
  offsets.
- Dependencies between operations: **ww** T1 -> T2 when T2's record is the next one after T1's
  in a partition's version order; **wr** T1 -> T2 when T2 polled a record T1 sent; **rw**
  T1 -> T2 when T1's highest read of a partition is the record just before T2's record there.
  Aborted (fail) operations are not in the graph.

analyse(h) returns {class: {"count", "examples", "allowed", "note"}}; CLASSES says what each
means. `allowed` classes are reported but are no violation, as in Jepsen's own checker:
Kafka's transactions do not isolate writes, so concurrent transactions interleave (G0,
int-send-skip, and with inferred ww dependencies G1c); G2 (a cycle through an rw edge) says
only that a poll is no snapshot.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict

from history import FAIL, INFO, OK, Flags, History, Places, Poll, Rebalance

CLASSES = {
    "lost-write": "a record written by an ok operation (or an info one that was seen) is not seen by "
                  "any poll although polls saw later records of its partition",
    "unseen": "a record written by an ok operation was never seen by any poll (the final read included)",
    "duplicate": "a record is at more than one offset",
    "inconsistent-offsets": "an offset holds different records for different observers (sends, polls)",
    "poll-skip": "between two polls of a process (same assignment), records of a partition were skipped",
    "nonmonotonic-poll": "a process's poll starts at or before where its previous poll of that partition "
                         "ended (same assignment)",
    "int-poll-skip": "within a single poll, records of a partition were skipped",
    "int-nonmonotonic-poll": "within a single poll, a partition's records go backwards or repeat",
    "nonmonotonic-send": "a process's send lands at or before its previous send to that partition",
    "int-send-skip": "within one operation, two sends to a partition are not adjacent in the log "
                     "(allowed: other transactions interleave)",
    "int-nonmonotonic-send": "within one operation, a later send to a partition lands before an earlier one",
    "G1a": "aborted read: a poll saw a record of an aborted transaction",
    "precommitted-read": "a record was seen by its own transaction, or by a poll that returned before its "
                         "transaction asked to commit",
    "G0": "write cycle: transactions ordered by ww dependencies in a cycle (allowed: writes are not isolated)",
    "G1c": "circular information flow: a cycle of ww and wr dependencies with at least one wr (allowed "
           "with inferred ww dependencies, as in Jepsen)",
    "G2": "a cycle through an rw dependency (allowed, informational: a poll is not a snapshot across "
          "partitions)",
}
ALLOWED = {"int-send-skip", "G0", "G1c", "G2"}
NOT_IN_PLAIN = {"int-send-skip", "int-nonmonotonic-send", "G1a", "precommitted-read", "G0", "G1c", "G2"}


class Found:
    def __init__(self, limit: int):
        self.limit = limit
        self.count: dict[str, int] = defaultdict(int)
        self.examples: dict[str, list[str]] = defaultdict(list)

    def add(self, cls: str, example, n: int = 1) -> None:
        self.count[cls] += n
        if len(self.examples[cls]) < self.limit:
            self.examples[cls].append(example() if callable(example) else example)


class VersionOrder:
    """Per partition: offset -> the record there (the first one observed; others are conflicts)."""

    def __init__(self):
        self.at: dict[int, dict[int, int]] = defaultdict(dict)
        self.conflicts: dict[tuple[int, int], set[int]] = {}
        self.places = Places()
        self.offsets: dict[int, list[int]] = {}

    def add(self, p: int, o: int, v: int) -> None:
        cur = self.at[p].get(o)
        if cur is None:
            self.at[p][o] = v
        elif cur != v:
            self.conflicts.setdefault((p, o), {cur}).add(v)
        self.places.add(v, p, o)

    def freeze(self) -> None:
        self.offsets = {p: sorted(d) for p, d in self.at.items()}

    def index(self, p: int, o: int) -> int | None:
        offs = self.offsets.get(p)
        if not offs:
            return None
        i = bisect_left(offs, o)
        return i if i < len(offs) and offs[i] == o else None

    def value_at(self, p: int, i: int) -> int | None:
        offs = self.offsets.get(p)
        return self.at[p][offs[i]] if offs and 0 <= i < len(offs) else None

    def skipped(self, h: History, p: int, i1: int, i2: int, n: int = 3) -> str:
        vals = [h.name(self.value_at(p, i)) for i in range(i1 + 1, min(i2, i1 + 1 + n))]
        return ", ".join(vals) + (", ..." if i2 - i1 - 1 > n else "")


def analyse(h: History, limit: int = 10) -> dict:
    F = Found(limit)
    vo = VersionOrder()
    seen = Flags()                 # values some poll returned
    info_seen: set[int] = set()    # info operations one of whose records a poll returned
    high: dict[int, int] = {}      # partition -> highest offset polled
    n_polls = n_reads = 0

    # 1. the version order: every poll, then the sends that must have taken effect ----------
    for ev in h.events():
        if not isinstance(ev, Poll):
            continue
        n_polls += 1
        for p, o, v in ev.reads:
            n_reads += 1
            vo.add(p, o, v)
            seen.add(v)
            if o > high.get(p, -1):
                high[p] = o
            if h.any_info:
                w = h.writer(v)
                if w is not None and w[1] == INFO:
                    info_seen.add(w[0])
    for s in h.sends():
        if s.o is not None and (s.type == OK or (s.type == INFO and s.op in info_seen)):
            vo.add(s.p, s.o, s.v)
    vo.freeze()

    def place(s) -> int | None:
        """The index of a send: at its acknowledged offset, else where a poll saw its record."""
        if s.o is not None:
            i = vo.index(s.p, s.o)
            if i is not None and vo.at[s.p][s.o] == s.v:
                return i
        pl = vo.places.get(s.v)
        if pl is None:
            return None
        p, o = pl[0] >> Places.SHIFT, pl[0] & ((1 << Places.SHIFT) - 1)
        return vo.index(p, o) if p == s.p else None

    # 2. the log itself: inconsistent offsets, duplicates -------------------------------------
    for (p, o), vals in sorted(vo.conflicts.items()):
        F.add("inconsistent-offsets", lambda p=p, o=o, vals=vals:
              f"{p}/{o}: " + ", ".join(sorted(h.name(v) for v in vals)))
    dup_values = []
    for k, first in vo.places.first.items():
        last = vo.places.last[k]
        for s, x in enumerate(first):
            if x != -1 and last[s] != x:
                dup_values.append(((k << 32) | s, x, last[s]))
    for v, (x, y) in vo.places.other.items():
        if x != y:
            dup_values.append((v, x, y))
    for v, x, y in dup_values:
        F.add("duplicate", lambda v=v, x=x, y=y: f"{h.name(v)} at {_place(x)} and {_place(y)}")

    # 3. sends: lost-write, unseen, int-send-*, nonmonotonic-send --------------------------------
    last_send: dict[str, dict[int, tuple[int, int]]] = defaultdict(dict)  # proc -> p -> (index, op)
    op_sends: list = []
    n_sends = 0

    def end_op(sends) -> None:
        if not sends:
            return
        proc, op, ty = sends[0].proc, sends[0].op, sends[0].type
        if ty == FAIL:
            return
        by_p: dict[int, list[int]] = defaultdict(list)
        for s in sends:
            i = place(s)
            if i is not None:
                by_p[s.p].append(i)
        for p, idx in by_p.items():
            for i1, i2 in zip(idx, idx[1:]):
                if i2 - i1 > 1:
                    F.add("int-send-skip", lambda p=p, i1=i1, i2=i2: f"{h.op_name(op)}: partition {p} "
                          f"{h.name(vo.value_at(p, i1))} then {h.name(vo.value_at(p, i2))}, between them "
                          f"{vo.skipped(h, p, i1, i2)}")
                elif i2 - i1 < 1:
                    F.add("int-nonmonotonic-send", lambda p=p, i1=i1, i2=i2: f"{h.op_name(op)}: partition {p} "
                          f"sent {h.name(vo.value_at(p, i1))} (index {i1}) then "
                          f"{h.name(vo.value_at(p, i2))} (index {i2})")
            prev = last_send[proc].get(p)
            if prev is not None and idx[0] - prev[0] < 1:
                F.add("nonmonotonic-send", lambda p=p, prev=prev, idx=idx: f"{proc}: partition {p}: "
                      f"{h.op_name(op)} sent {h.name(vo.value_at(p, idx[0]))} (index {idx[0]}) after "
                      f"{h.op_name(prev[1])} sent {h.name(vo.value_at(p, prev[0]))} (index {prev[0]})")
            last_send[proc][p] = (idx[-1], op)

    unseen_by_p: dict[int, int] = defaultdict(int)
    for s in h.sends():
        n_sends += 1
        if op_sends and (s.op != op_sends[0].op or s.proc != op_sends[0].proc):
            end_op(op_sends)
            op_sends = []
        op_sends.append(s)
        if s.v in seen:
            continue
        if s.type == OK:
            unseen_by_p[s.p] += 1
            F.add("unseen", lambda s=s: f"{h.name(s.v)} ({h.op_name(s.op)}) partition {s.p}"
                  + (f" acknowledged at {s.o}" if s.o is not None else ""))
        if (s.type == OK or (s.type == INFO and s.op in info_seen)) and s.o is not None \
                and s.o <= high.get(s.p, -1):
            F.add("lost-write", lambda s=s: f"{h.name(s.v)} ({h.op_name(s.op)}) at {s.p}/{s.o}: never "
                  f"polled, though polls reached offset {high[s.p]}")
    end_op(op_sends)

    # 4. polls: G1a, precommitted-read, poll-skip, nonmonotonic-poll, int-poll-* -----------------
    last_read: dict[str, dict[int, tuple[int, int]]] = defaultdict(dict)  # proc -> p -> (index, op)
    for ev in h.events():
        if isinstance(ev, Rebalance):
            for p in ev.parts:  # a new assignment starts at the committed offset
                last_read[ev.proc].pop(p, None)
            continue
        by_p: dict[int, list[int]] = defaultdict(list)
        for p, o, v in ev.reads:
            i = vo.index(p, o)
            if i is not None:
                by_p[p].append(i)
            # only transactions abort, commit or read their own writes
            w = h.writer(v) if h.mode == "txn" else None
            if w is None:
                continue
            wop, wty, wproc = w
            if wty == FAIL:
                F.add("G1a", lambda p=p, o=o, v=v, wop=wop: f"{ev.proc} polled {h.name(v)} at {p}/{o}, "
                      f"written by {h.op_name(wop)}")
            elif wop == ev.op:
                F.add("precommitted-read", lambda v=v: f"{h.op_name(ev.op)} polled its own write {h.name(v)}")
            else:
                tc = h.commit_called(wop)
                if tc is not None and ev.t < tc:
                    F.add("precommitted-read", lambda p=p, o=o, v=v, wop=wop, tc=tc: f"{ev.proc} polled "
                          f"{h.name(v)} at {p}/{o} at {ev.t:.3f}, {tc - ev.t:.3f} s before "
                          f"{h.op_name(wop)} asked to commit")
        for p, idx in by_p.items():
            for i1, i2 in zip(idx, idx[1:]):
                if i2 - i1 > 1:
                    F.add("int-poll-skip", lambda p=p, i1=i1, i2=i2: f"{ev.proc}: one poll of partition {p} "
                          f"went from {h.name(vo.value_at(p, i1))} to {h.name(vo.value_at(p, i2))}, "
                          f"skipping {vo.skipped(h, p, i1, i2)}")
                elif i2 - i1 < 1:
                    F.add("int-nonmonotonic-poll", lambda p=p, i1=i1, i2=i2: f"{ev.proc}: one poll of "
                          f"partition {p} read {h.name(vo.value_at(p, i1))} (index {i1}) then "
                          f"{h.name(vo.value_at(p, i2))} (index {i2})")
            prev = last_read[ev.proc].get(p)
            if prev is not None:
                d = idx[0] - prev[0]
                if d > 1:
                    F.add("poll-skip", lambda p=p, prev=prev, idx=idx: f"{ev.proc}: partition {p}: a poll "
                          f"ended at {h.name(vo.value_at(p, prev[0]))}, the next began at "
                          f"{h.name(vo.value_at(p, idx[0]))}, skipping {vo.skipped(h, p, prev[0], idx[0])}")
                elif d < 1:
                    F.add("nonmonotonic-poll", lambda p=p, prev=prev, idx=idx: f"{ev.proc}: partition {p}: "
                          f"a poll ended at {h.name(vo.value_at(p, prev[0]))} (index {prev[0]}), the next "
                          f"began at {h.name(vo.value_at(p, idx[0]))} (index {idx[0]})")
            last_read[ev.proc][p] = (idx[-1], ev.op)

    # 5. dependency cycles ----------------------------------------------------------------------
    graph_note = ""
    if h.mode == "txn":
        edges = dependency_graph(h, vo)
        cycles(h, edges, F)
        graph_note = (f"{len(edges['ww'])} ww, {len(edges['wr'])} wr, {len(edges['rw'])} rw dependencies "
                      f"between {len(edges['nodes'])} operations")
    else:
        graph_note = "not computed in plain mode: a send is one record, so no cycle can be formed"

    out = {}
    for cls, what in CLASSES.items():
        note = ""
        if h.mode != "txn" and cls in NOT_IN_PLAIN:
            note = "n/a: plain producers have no transactions"
        if cls in ("G0", "G1c", "G2"):
            note = graph_note if h.mode == "txn" else note
        out[cls] = {"count": F.count.get(cls, 0), "examples": F.examples.get(cls, []),
                    "allowed": cls in ALLOWED, "note": note}
    out["_stats"] = {"polls": n_polls, "records_polled": n_reads, "sends": n_sends,
                     "unseen_by_partition": dict(sorted(unseen_by_p.items())),
                     "version_order_records": sum(len(d) for d in vo.at.values())}
    return out


def _place(x: int) -> str:
    return f"{x >> Places.SHIFT}/{x & ((1 << Places.SHIFT) - 1)}"


# ---------------------------------------------------------------------------------------------
# the dependency graph and its cycles

def dependency_graph(h: History, vo: VersionOrder) -> dict:
    ww: set[tuple[int, int]] = set()
    wr: set[tuple[int, int]] = set()
    rw: set[tuple[int, int]] = set()
    nodes: set[int] = set()

    def live(v):
        w = h.writer(v) if v is not None else None
        return w if w is not None and w[1] != FAIL else None

    for p, offs in vo.offsets.items():
        prev = None
        for o in offs:
            w = live(vo.at[p][o])
            if w is not None:
                nodes.add(w[0])
                if prev is not None and prev != w[0]:
                    ww.add((prev, w[0]))
            prev = w[0] if w is not None else None
    for ev in h.events():
        if not isinstance(ev, Poll):
            continue
        hi: dict[int, int] = {}
        for p, o, v in ev.reads:
            w = live(v)
            if w is not None and w[0] != ev.op:
                wr.add((w[0], ev.op))
                nodes.update((w[0], ev.op))
            i = vo.index(p, o)
            if i is not None and i > hi.get(p, -1):
                hi[p] = i
        for p, i in hi.items():
            w = live(vo.value_at(p, i + 1))
            if w is not None and w[0] != ev.op:
                rw.add((ev.op, w[0]))
                nodes.update((w[0], ev.op))
    return {"ww": ww, "wr": wr, "rw": rw, "nodes": nodes}


def scc(nodes, adj: dict[int, list[int]]) -> list[list[int]]:
    """Tarjan's strongly connected components, iterative; only those of two nodes or more."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on: set[int] = set()
    stack: list[int] = []
    out: list[list[int]] = []
    n = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(adj.get(root, ())))]
        index[root] = low[root] = n
        n += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(adj.get(w, ()))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def _path(adj: dict[int, list[int]], src: int, dst: int, within: set[int]) -> list[int] | None:
    """A shortest path src .. dst inside `within` (breadth first)."""
    prev = {src: None}
    q = [src]
    for v in q:
        if v == dst:
            break
        for w in adj.get(v, ()):
            if w in within and w not in prev:
                prev[w] = v
                q.append(w)
    if dst not in prev:
        return None
    path = [dst]
    while prev[path[-1]] is not None:
        path.append(prev[path[-1]])
    return path[::-1]


def cycles(h: History, edges: dict, F: Found) -> None:
    kinds = {}
    for k in ("ww", "wr", "rw"):
        for e in edges[k]:
            kinds.setdefault(e, k)

    def adjacency(ks) -> dict[int, list[int]]:
        adj: dict[int, list[int]] = defaultdict(list)
        for k in ks:
            for a, b in edges[k]:
                adj[a].append(b)
        return adj

    def show(cyc: list[int]) -> str:
        parts = [h.op_name(cyc[0])]
        for a, b in zip(cyc, cyc[1:]):
            parts.append(f"-{kinds.get((a, b), '?')}-> {h.op_name(b)}")
        return " ".join(parts)

    for cls, ks, via in (("G0", ("ww",), None), ("G1c", ("ww", "wr"), "wr"), ("G2", ("ww", "wr", "rw"), "rw")):
        adj = adjacency(ks)
        comps = scc(edges["nodes"], adj)
        # the first `via` edge inside each component, in one pass over the edges (a pass per
        # component took hours on a two-hour run's hundreds of thousands of components)
        comp_of = {v: i for i, comp in enumerate(comps) for v in comp}
        first_inner: dict[int, tuple[int, int]] = {}
        if via is not None:
            for a, b in edges[via]:
                i = comp_of.get(a)
                if i is not None and i == comp_of.get(b) and i not in first_inner:
                    first_inner[i] = (a, b)
        for i, comp in enumerate(comps):
            members = set(comp)
            if via is None:
                a = comp[0]
                b = next(w for w in adj[a] if w in members)
            else:
                if i not in first_inner:
                    continue
                a, b = first_inner[i]
            back = _path(adj, b, a, members)
            F.add(cls, lambda a=a, back=back: show([a] + back))
