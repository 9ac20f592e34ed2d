"""The checker of a chaos run (Jepsen style: judge the history afterwards).

    checker.py RUN_DIR [--report PATH]

Reads the logs workload.py and chaos.py wrote in RUN_DIR and checks:

  lost          every acknowledged record is in the final log
  duplicated    no value (acknowledged or not) appears twice in the final log
  moved         an acknowledged record sits at the partition and offset it was acknowledged at
  order         per producer and partition, offsets follow the send order
  foreign       nothing in the log that no producer sent
  consumed      every acknowledged record was consumed by the group at least once
  dirty-reads   every record the group consumed is in the final log at that offset with that value
  commits       the group's committed offsets never go backwards (monitor polls and the
                members' acknowledged commits), and never pass the high watermark
  group-done    at the end, the committed offset of every partition is its end offset

"Acknowledged" is a delivery report without error (plain producers) or a record of a committed
transaction (--producer-mode txn). Then the classes of Jepsen's Kafka queue checker, over the
history as history.py reads it (anomalies.py: lost-write, unseen, duplicate, inconsistent-offsets,
poll-skip, nonmonotonic-poll, int-poll-skip, int-nonmonotonic-poll, nonmonotonic-send,
int-send-skip, int-nonmonotonic-send, G1a, precommitted-read, G0, G1c, G2), each a violation unless
Jepsen allows it too (int-send-skip, G0, G1c, G2),
and measures unavailability per partition: stretches of at least 1 s in which no producer
write to it was acknowledged while the producers were writing (the producers send to every
partition continuously), and the time the monitor saw it without a leader.

Writes report.json and report.md (or PATH / PATH.json) and exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from array import array
from collections import Counter, defaultdict
from pathlib import Path

import anomalies
from history import INFO, OK, RunHistory

GAP = 1.0  # seconds without an acknowledgement that count as unavailable
VALUE = re.compile(r"^p(\d+)-(\d+)$")
SHIFT = 40  # position = partition << SHIFT | offset
NO_OFFSET = -2


def pos(p: int, o: int) -> int:
    return (p << SHIFT) | o


def unpos(x: int) -> tuple[int, int]:
    return x >> SHIFT, x & ((1 << SHIFT) - 1)


class Run:
    def __init__(self, d: Path):
        self.d = d
        self.meta = json.loads((d / "run.json").read_text())
        self.P = self.meta["partitions"]

    def producers(self) -> list[int]:
        return sorted(int(m.group(1)) for f in self.d.glob("producer-*.log")
                      if (m := re.match(r"producer-(\d+)\.log", f.name)))

    def consumers(self) -> list[Path]:
        return sorted(self.d.glob("consumer-*.log"))


def check(d: Path) -> dict:
    run = Run(d)
    P = run.P
    problems: dict[str, list[str]] = defaultdict(list)
    counts: Counter = Counter()

    # -- producers (history.py reads their logs) ----------------------------------------------
    # acked[k][s]: where record s of producer k must be (pos), NO_OFFSET when it must be in the
    # log but its offset is not known, -1 when it need not be. Acknowledged means: plain mode,
    # a delivery report without error; txn mode, in a committed transaction. errored: records
    # that may be in the log or not, but at most once (a delivery error, no report, a
    # transaction of unknown outcome); aborted transactions' records must not be visible (G1a).
    hist = RunHistory(d)
    txn_mode = hist.mode == "txn"
    acked: dict[int, array] = {}
    errors: Counter = Counter()
    fatals: Counter = Counter()
    ack_times: dict[int, list[float]] = defaultdict(list)
    errored: dict[int, set[int]] = defaultdict(set)
    sent_total = acked_total = unresolved = 0
    first_ack = last_ack = None
    outcomes: Counter = Counter()
    for k, pl in hist.producers.items():
        arr = array("q", [-1]) * len(pl.pos)
        for s in range(len(pl.pos)):
            st = pl.status(s)
            if st == OK:
                x = pl.pos[s]
                arr[s] = NO_OFFSET if x < 0 else x
                acked_total += 1
                if x < 0 and (x == NO_OFFSET or not txn_mode):
                    counts["acked_without_offset"] += 1
                    if len(problems["acked-without-offset"]) < 10:
                        problems["acked-without-offset"].append(f"p{k}-{s} partition {pl.part[s]}")
            elif st == INFO:
                errored[k].add(s)
        for s in pl.twice:
            problems["producer"].append(f"p{k}-{s} acknowledged twice")
        for p, ts in pl.ack_times.items():
            ack_times[p].extend(ts)
        if pl.first_ack is not None:
            first_ack = pl.first_ack if first_ack is None else min(first_ack, pl.first_ack)
            last_ack = pl.last_ack if last_ack is None else max(last_ack, pl.last_ack)
        errors.update(pl.errors)
        fatals.update(pl.fatals)
        outcomes.update(t.outcome for t in pl.txns)
        sent_total += pl.sent
        unresolved += pl.unresolved
        if not pl.finished:
            problems["harness"].append(f"producer {k} did not finish its log")
        acked[k] = arr
    counts.update(sent=sent_total, acked=acked_total, delivery_errors=sum(errors.values()),
                  unresolved=unresolved, fatal_producer_errors=sum(fatals.values()))
    if txn_mode:
        counts.update({f"txn_{o}": n for o, n in outcomes.items()})

    # -- the final log -----------------------------------------------------------------------
    found: dict[int, array] = {k: array("q", [-1]) * len(a) for k, a in acked.items()}
    dumpinfo = json.loads((d / "dump.json").read_text()) if (d / "dump.json").exists() else None
    if dumpinfo is None:
        problems["harness"].append("no final read of the topic (dump.json missing)")
    by_offset: dict[int, dict[int, int]] = defaultdict(dict)  # p -> o -> (k << 32 | s), -1 foreign
    last_seq: dict[tuple[int, int], tuple[int, int]] = {}
    dups: list[str] = []
    n_dump = 0
    if (d / "dump.log").exists():
        for line in open(d / "dump.log"):
            f = line.rstrip("\n").split(" ", 2)
            p, o, v = int(f[0]), int(f[1]), f[2] if len(f) > 2 else ""
            n_dump += 1
            m = VALUE.match(v)
            if not m or int(m.group(1)) not in found:
                counts["foreign"] += 1
                if len(problems["foreign"]) < 10:
                    problems["foreign"].append(f"{p}/{o}: {v[:60]!r}")
                by_offset[p][o] = -1
                continue
            k, s = int(m.group(1)), int(m.group(2))
            by_offset[p][o] = (k << 32) | s
            arr = found[k]
            if s >= len(arr):
                arr.extend([-1] * (s + 1 - len(arr)))
            if arr[s] != -1:
                counts["duplicated"] += 1
                if len(dups) < 20:
                    p0, o0 = unpos(arr[s])
                    dups.append(f"p{k}-{s} at {p0}/{o0} and {p}/{o}")
            else:
                arr[s] = pos(p, o)
            prev = last_seq.get((k, p))
            if prev is not None and s < prev[0]:
                counts["order"] += 1
                if len(problems["order"]) < 10:
                    problems["order"].append(f"partition {p}: p{k}-{s} at offset {o} after p{k}-{prev[0]} "
                                             f"at offset {prev[1]}")
            last_seq[(k, p)] = (max(s, prev[0]) if prev else s, o)
    problems["duplicated"] = dups
    counts["final_records"] = n_dump

    lost: list[str] = []
    moved: list[str] = []
    for k, arr in acked.items():
        fa = found[k]
        for s, x in enumerate(arr):
            if x == -1:
                continue
            y = fa[s] if s < len(fa) else -1
            if y == -1:
                counts["lost"] += 1
                if len(lost) < 20:
                    at = "without an offset" if x == NO_OFFSET else f"at {'/'.join(map(str, unpos(x)))}"
                    lost.append(f"p{k}-{s} acknowledged {at}")
            elif x != NO_OFFSET and y != x:
                counts["moved"] += 1
                if len(moved) < 20:
                    moved.append(f"p{k}-{s} acknowledged at {'/'.join(map(str, unpos(x)))}, "
                                 f"found at {'/'.join(map(str, unpos(y)))}")
    problems["lost"] = lost
    problems["moved"] = moved
    # records the producers gave up on but which made it anyway (allowed, once)
    counts["indeterminate_written"] = sum(
        1 for k, ss in errored.items() for s in ss if s < len(found[k]) and found[k][s] != -1)

    # -- the consumer group --------------------------------------------------------------------
    consumed = {k: bytearray(len(a)) for k, a in acked.items()}
    commits_by_member: dict[str, list[tuple[float, int, int]]] = defaultdict(list)
    consumer_errors: Counter = Counter()
    rebalances = 0
    n_consumed = 0
    for cf in run.consumers():
        for line in open(cf):
            f = line.split()
            if not f:
                continue
            if f[0] == "M":
                p, o, v = int(f[1]), int(f[2]), f[3] if len(f) > 3 else ""
                n_consumed += 1
                m = VALUE.match(v)
                key = by_offset.get(p, {}).get(o)
                if m:
                    k, s = int(m.group(1)), int(m.group(2))
                    if k in consumed and s < len(consumed[k]):
                        consumed[k][s] = 1
                    if key != (k << 32) | s:
                        counts["dirty_reads"] += 1
                        if len(problems["dirty-reads"]) < 10:
                            problems["dirty-reads"].append(
                                f"{cf.stem} consumed {v} at {p}/{o}; the final log has "
                                f"{'nothing' if key is None else 'another record'} there")
                else:
                    counts["dirty_reads"] += 1
            elif f[0] == "C":
                commits_by_member[cf.stem].append((float(f[1]), int(f[2]), int(f[3])))
            elif f[0] == "X":
                consumer_errors[f[2].split(":")[0] if ":" in f[2] else f[2]] += 1
            elif f[0] == "R" and f[2] == "assigned":
                rebalances += 1
    counts["consumed"] = n_consumed
    unconsumed: list[str] = []
    for k, arr in acked.items():
        c = consumed[k]
        for s, x in enumerate(arr):
            if x != -1 and (s >= len(c) or not c[s]):
                counts["unconsumed"] += 1
                if len(unconsumed) < 10:
                    unconsumed.append(f"p{k}-{s} at {'/'.join(map(str, unpos(found[k][s])))}")
    problems["consumed"] = unconsumed

    # committed offsets: the monitor's polls (the coordinator's answer to OffsetFetch)
    polled: dict[int, list[tuple[float, int]]] = defaultdict(list)
    leader_events: dict[int, list[tuple[float, int]]] = defaultdict(list)
    hw_seen: dict[int, int] = {}
    if (d / "monitor.log").exists():
        for line in open(d / "monitor.log"):
            f = line.split()
            if f and f[0] == "G":
                polled[int(f[2])].append((float(f[1]), int(f[3])))
            elif f and f[0] == "T":
                leader_events[int(f[2])].append((float(f[1]), int(f[3])))
            elif f and f[0] == "H":
                hw_seen[int(f[2])] = max(hw_seen.get(int(f[2]), -1), int(f[3]))
    back: list[str] = []
    for p, seq in polled.items():
        hi = None
        for t, o in seq:
            if o < 0 and hi is not None:
                back.append(f"partition {p}: committed offset {hi} gone (OffsetFetch answered {o}) "
                            f"at {t:.3f}")
            elif hi is not None and o < hi:
                back.append(f"partition {p}: committed offset went back from {hi} to {o} at {t:.3f}")
            if o >= 0:
                hi = o if hi is None else max(hi, o)
    counts["commit_regressions"] = len(back)
    # the members' acknowledged commits, in the order the coordinator acknowledged them
    all_commits = sorted((t, p, o, m) for m, lst in commits_by_member.items() for t, p, o in lst)
    hi_c: dict[int, tuple[int, str]] = {}
    n_commit_back = 0
    for t, p, o, m in all_commits:
        if p in hi_c and o < hi_c[p][0]:
            n_commit_back += 1
            if len(back) < 20:
                back.append(f"partition {p}: {m} committed {o} at {t:.3f} after {hi_c[p][1]} had "
                            f"committed {hi_c[p][0]}")
        if p not in hi_c or o >= hi_c[p][0]:
            hi_c[p] = (o, m)
    ends = {int(p): o for p, o in (dumpinfo or {}).get("end", {}).items()}
    for p, seq in polled.items():
        for t, o in seq:
            if p in ends and o > ends[p]:
                counts["commit_beyond_end"] += 1
                back.append(f"partition {p}: committed offset {o} beyond the end offset {ends[p]} at {t:.3f}")
                break
    counts["member_commit_regressions"] = n_commit_back
    problems["commits"] = back[:20]
    final = json.loads((d / "final-offsets.json").read_text()) if (d / "final-offsets.json").exists() else {}
    behind = [f"partition {p}: committed {final.get(str(p))}, end {e}" for p, e in sorted(ends.items())
              if final.get(str(p)) != e]
    problems["group-done"] = behind

    # -- unavailability ----------------------------------------------------------------------------
    t0 = first_ack or run.meta.get("workload_start", 0)  # not the clients' start-up
    t1 = run.meta.get("producers_stopped", last_ack or 0)
    unavail = {}
    stretches = []  # (length, start, partition)
    for p in range(P):
        ts = sorted(t for t in ack_times.get(p, []) if t0 <= t <= t1)
        pts = [t0] + ts + [t1]
        gaps = [b - a for a, b in zip(pts, pts[1:]) if b - a >= GAP]
        stretches += [(b - a, a, p) for a, b in zip(pts, pts[1:]) if b - a >= GAP]
        # leaderless time as the monitor saw it
        ev = leader_events.get(p, [])
        nl = 0.0
        for i, (t, ldr) in enumerate(ev):
            if ldr < 0:
                end = ev[i + 1][0] if i + 1 < len(ev) else t1
                nl += max(0.0, min(end, t1) - max(t, t0))
        unavail[p] = {"write_unavailable_s": round(sum(gaps), 1), "stretches": len(gaps),
                      "longest_s": round(max(gaps, default=0.0), 1), "leaderless_s": round(nl, 1)}

    # -- faults ----------------------------------------------------------------------------------
    faults = [json.loads(ln) for ln in open(d / "faults.jsonl")] if (d / "faults.jsonl").exists() else []
    by_kind = Counter(f["kind"] for f in faults)
    # the longest write stalls (merged across partitions) and the faults around them
    stalls = []
    for length, start, p in sorted(stretches, reverse=True):
        if len(stalls) >= 5:
            break
        if any(abs(start - s0) < 1.0 for _, s0, _, _ in stalls):
            stalls = [(max(l0, length), s0, ps + [p], fs) if abs(start - s0) < 1.0 else (l0, s0, ps, fs)
                      for l0, s0, ps, fs in stalls]
            continue
        near = [f"{f['kind']} {f['target']} at {f['start'] - start:+.1f}s..{f['end'] - start:+.1f}s"
                for f in faults if f["end"] >= start - 10 and f["start"] <= start + length]
        stalls.append((length, start, [p], near))
    skipped = Counter(f["kind"] for f in faults if f.get("skipped"))
    # the end-txn fault's proxies: what they did, and how the brokers answered the late copies
    end_txn = {"held": 0, "copies": 0, "answers": Counter(), "versions": Counter()}
    for f in sorted(d.glob("end-txn-*.jsonl")):
        for ln in open(f):
            e = json.loads(ln)
            end_txn["versions"][f"v{e.get('version')}"] += 1
            if e["action"] == "delay":
                end_txn["held"] += 1
            else:
                end_txn["copies"] += 1
                err = e.get("error")
                end_txn["answers"][ERROR_NAMES.get(err, str(err))] += 1

    violations = {k: counts[k] for k in ("lost", "duplicated", "moved", "order", "foreign", "unconsumed",
                                         "dirty_reads", "commit_regressions", "member_commit_regressions",
                                         "commit_beyond_end")
                  if counts[k]}
    if problems["group-done"]:
        violations["group_not_done"] = len(problems["group-done"])
    if problems["harness"]:
        violations["harness"] = len(problems["harness"])
    if problems["producer"]:
        violations["producer_log"] = len(problems["producer"])
    for h in run.meta.get("harness_problems", []):
        problems["harness"].append(h)
        violations["harness"] = violations.get("harness", 0) + 1

    # -- Jepsen's queue classes (anomalies.py) ------------------------------------------------------
    jepsen = anomalies.analyse(hist)
    for cls, r in jepsen.items():
        if not cls.startswith("_") and r["count"] and not r["allowed"]:
            violations[cls] = r["count"]
    return {
        "run": run.meta,
        "faults": {"total": len(faults) - sum(skipped.values()), "by_kind": dict(sorted(by_kind.items())),
                   "skipped": dict(skipped),
                   "end_txn": {k: dict(v) if isinstance(v, Counter) else v for k, v in end_txn.items()}},
        "counts": dict(counts),
        "delivery_errors": dict(errors),
        "fatal_producer_errors": dict(fatals),
        "consumer_errors": dict(consumer_errors),
        "rebalances_seen": rebalances,
        "unavailability": unavail,
        "longest_stalls": [{"seconds": round(l, 1), "start": round(s0, 3), "partitions": sorted(ps),
                            "faults_around": fs} for l, s0, ps, fs in stalls],
        "modes": {"producers": hist.mode, "consume": hist.consume},
        "anomalies": jepsen,
        "violations": violations,
        "examples": {k: v for k, v in problems.items() if v},
        "ok": not violations,
    }


# Kafka's error codes an EndTxn may be answered with
ERROR_NAMES = {0: "NONE", 15: "COORDINATOR_NOT_AVAILABLE", 14: "COORDINATOR_LOAD_IN_PROGRESS", 16: "NOT_COORDINATOR",
               47: "INVALID_PRODUCER_EPOCH", 48: "INVALID_TXN_STATE", 49: "INVALID_PRODUCER_ID_MAPPING",
               51: "CONCURRENT_TRANSACTIONS", 90: "PRODUCER_FENCED", 2: "CORRUPT_MESSAGE",
               7: "REQUEST_TIMED_OUT", 53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}


def markdown(r: dict) -> str:
    m = r["run"]
    c = r["counts"]
    out = [f"# Chaos run {m.get('name', '')}", "",
           f"- Skein {m.get('git', '?')}, seed {m.get('seed')}, nemesis {m.get('nemesis_seconds', 0):.0f} s "
           f"(requested {m.get('duration')} s), whole run {m.get('total_seconds', 0):.0f} s",
           f"- topic `{m.get('topic')}`: {m.get('partitions')} partitions, RF 3, min.insync.replicas=2; "
           f"{m.get('producers')} " + ("transactional producers " +
                                       ("(the Java client, transaction version 2; " if m.get("producer_client") == "java"
                                        else "(librdkafka, transaction version 1; ") + "2-6 records a transaction, 1 in "
                                       f"{m.get('abort_every', 5)} aborted)" if r["modes"]["producers"] == "txn"
                                       else "idempotent acks=all producers") +
           f" at {m.get('rate')} records/s each, {m.get('consumers')} read_committed consumers "
           + ("assigned a fixed share of the partitions each, committing to the group"
              if r["modes"]["consume"] == "assign" else "in a group (subscribe)"),
           f"- fault kinds enabled: {', '.join(m.get('faults', []))}",
           *([f"- tiered storage on SeaweedFS (S3): " + ", ".join(f"{k.replace('_', ' ')} {v}"
                                                               for k, v in m["tiering"].items())]
             if m.get("tiering") else []), "",
           f"**Result: {'PASS' if r['ok'] else 'FAIL'}**" +
           ("" if r["ok"] else " — " + ", ".join(f"{k}={v}" for k, v in r["violations"].items())), "",
           "## Faults", "", "| kind | count |", "| --- | ---: |"]
    for k, n in r["faults"]["by_kind"].items():
        sk = r["faults"]["skipped"].get(k, 0)
        out.append(f"| {k} | {n - sk}{f' (+{sk} skipped)' if sk else ''} |")
    out += [f"| **total** | **{r['faults']['total']}** |", "", "## Checks", "",
            "| check | result |", "| --- | --- |",
            f"| acknowledged records lost | {c.get('lost', 0)} of {c.get('acked', 0)} |",
            f"| records duplicated in the log | {c.get('duplicated', 0)} |",
            f"| acknowledged records not at their acknowledged offset | {c.get('moved', 0)} |",
            f"| per-partition send order broken | {c.get('order', 0)} |",
            f"| foreign records | {c.get('foreign', 0)} |",
            f"| acknowledged records never consumed by the group | {c.get('unconsumed', 0)} |",
            f"| consumed records not in the final log at that offset | {c.get('dirty_reads', 0)} |",
            f"| committed offset went backwards (OffsetFetch polls) | {c.get('commit_regressions', 0)} |",
            f"| a member's acknowledged commit below an earlier one | {c.get('member_commit_regressions', 0)} |",
            f"| committed offset beyond the end offset | {c.get('commit_beyond_end', 0)} |",
            f"| group at the end offsets when done | {'yes' if 'group-done' not in r['examples'] else 'no'} |",
            "", "## Jepsen's queue classes", "",
            "As jepsen.tests.kafka defines them (see README.md); *allowed* ones are reported, not failed.", "",
            "| class | count | |", "| --- | ---: | --- |"]
    for cls, x in r.get("anomalies", {}).items():
        if cls.startswith("_"):
            continue
        out.append(f"| {cls} | {x['count']} | {'allowed' if x['allowed'] else ''}"
                   f"{'; ' if x['allowed'] and x['note'] else ''}{x['note']} |")
    et = r["faults"].get("end_txn", {})
    if et and (et.get("held") or et.get("copies")):
        out += ["", f"EndTxn through the proxies ({', '.join(f'{k}: {n}' for k, n in sorted(et['versions'].items()))}): "
                f"{et['held']} held, {et['copies']} sent again late, the copies answered "
                + ", ".join(f"{k} {n}" for k, n in sorted(et["answers"].items()))]
    out += ["", "## Workload", "",
            f"sent {c.get('sent', 0)}, acknowledged {c.get('acked', 0)} ({c.get('acked_without_offset', 0)} without an offset), delivery errors "
            f"{c.get('delivery_errors', 0)} {r['delivery_errors'] or ''}, unresolved at exit {c.get('unresolved', 0)}, "
            f"fatal producer errors {c.get('fatal_producer_errors', 0)} {r['fatal_producer_errors'] or ''}; "
            f"given up but written anyway (once): {c.get('indeterminate_written', 0)}; final log "
            f"{c.get('final_records', 0)} records; consumed by the group {c.get('consumed', 0)} "
            f"(rebalances seen by members: {r['rebalances_seen']}); consumer errors {r['consumer_errors'] or 0}"
            + ("; transactions: " + ", ".join(f"{c.get('txn_' + o, 0)} {o}" for o in ("committed", "aborted", "unknown"))
               if r["modes"]["producers"] == "txn" else ""),
            "", "## Unavailability per partition", "",
            f"Writes: stretches of ≥ {GAP:.0f} s without an acknowledged write while the producers wrote. "
            "Leaderless: the monitor's metadata showed leader -1.", "",
            "| partition | writes unavailable (s) | stretches | longest (s) | leaderless (s) |",
            "| ---: | ---: | ---: | ---: | ---: |"]
    for p, u in sorted(r["unavailability"].items(), key=lambda x: int(x[0])):
        out.append(f"| {p} | {u['write_unavailable_s']} | {u['stretches']} | {u['longest_s']} | "
                   f"{u['leaderless_s']} |")
    if r.get("longest_stalls"):
        out += ["", "Longest write stalls (time 0 = the last acknowledged write before it) and the faults "
                "active from 10 s before:", ""]
        for st in r["longest_stalls"]:
            out.append(f"- {st['seconds']} s from {st['start']:.3f}, partitions {st['partitions']}: "
                       + ("; ".join(st["faults_around"]) or "no fault"))
    if r["examples"]:
        out += ["", "## Examples", ""]
        for k, v in r["examples"].items():
            out.append(f"- **{k}**:")
            out += [f"  - {x}" for x in v[:10]]
    shown = [(cls, x) for cls, x in r.get("anomalies", {}).items() if not cls.startswith("_") and x["examples"]]
    if shown:
        out += ["", "## Examples of Jepsen's classes", ""]
        for cls, x in shown:
            out.append(f"- **{cls}**{' (allowed)' if x['allowed'] else ''}: {x['count']}")
            out += [f"  - {e}" for e in x["examples"][:10]]
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--report", type=Path)
    a = ap.parse_args()
    r = check(a.run_dir)
    md_path = a.report or (a.run_dir / "report.md")
    md_path.parent.mkdir(parents=True, exist_ok=True)
    md_path.write_text(markdown(r))
    md_path.with_suffix(".json").write_text(json.dumps(r, indent=1))
    print(markdown(r))
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
