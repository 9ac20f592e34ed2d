#!/usr/bin/env python3
"""Producer latency on a partition while the log cleaner compacts it (issue #20: "A test
compacts a 1 GiB partition while a producer's p99 latency on it stays within 2x of idle").

    e2e/.venv/bin/python e2e/bench/compaction_latency.py                  # 1 GiB, Skein (1-2 min)
    e2e/.venv/bin/python e2e/bench/compaction_latency.py --quick          # 64 MiB (under a minute)
    e2e/.venv/bin/python e2e/bench/compaction_latency.py --system kafka   # the same on Apache Kafka

A benchmark, not a test: it reports, it asserts nothing. Steps:

  1. One broker (skein-broker from $SKEIN_BROKER_BIN, or Apache Kafka from e2e/.cache with
     --system kafka) on free loopback ports, data in a temporary directory under
     e2e/bench/.work/, with `log.cleaner.backoff.ms=1000` and the benchmark's other broker
     settings (bench.py COMMON_BROKER_SETTINGS) but small segments.
  2. Topic `compacted`, 1 partition, RF 1, created with cleanup.policy=delete (retention -1),
     min.cleanable.dirty.ratio=0.01 and segment.bytes small, so that the cleaner does not touch it
     yet; filled with --size-mb of 1 KiB records whose keys are drawn at random from a keyspace
     about a fifth of the record count (200k keys for 1 GiB: about five versions per key, so a
     clean removes roughly four fifths). Then `sync`, so the fill's write-back is over.
  3. A probe producer (acks=all, linger.ms=0, its own connection) sends one 100-byte record to
     the same partition every 5 ms and records each record's delivery latency: from produce()
     to its delivery callback (also librdkafka's own measure, Message.latency()).
       idle      --idle-seconds (30) with the topic still cleanup.policy=delete;
       cleaning  from the IncrementalAlterConfigs that sets cleanup.policy=compact until the
                 clean is over: the last time the partition's .log files shrank (or the broker
                 logged a compaction), with no compaction output (.cleaned/.swap files) left
                 and nothing more for --settle-seconds; at most --max-clean-seconds (600);
       after     those settle seconds (for reference).
  4. Writes report.md and report.json (percentiles per phase, per-second series, the clean's
     duration, bytes before and after, broker CPU and disk writes per phase) into --out
     (default e2e/bench/results/compaction-<UTC date-time>/) and prints p99(cleaning)/p99(idle).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
E2E_DIR = BENCH_DIR.parent
REPO_DIR = E2E_DIR.parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(E2E_DIR / "tests"))

import bench  # noqa: E402  (BenchSkein / BenchKafka: the benchmark's broker launchers and settings)
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,  # noqa: E402
                                   ConfigResource, NewTopic, ResourceType)

TOPIC = "compacted"
MIB = 1 << 20
CLK_TCK = os.sysconf("SC_CLK_TCK")
ISSUE_BOUND = 2.0  # issue #20: p99 while compacting within 2x of idle


# --------------------------------------------------------------------------------------------
# helpers

def skein_binary() -> Path:
    """$SKEIN_BROKER_BIN, else the first built release binary among the usual target dirs."""
    if os.environ.get("SKEIN_BROKER_BIN"):
        return Path(os.environ["SKEIN_BROKER_BIN"])
    candidates = []
    if os.environ.get("CARGO_TARGET_DIR"):
        candidates.append(Path(os.environ["CARGO_TARGET_DIR"]) / "release" / "skein-broker")
    candidates += [REPO_DIR / "target" / "release" / "skein-broker",
                   Path.home() / ".cache" / "skein" / "cargo-target" / "release" / "skein-broker"]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    return candidates[0]


def head_commit() -> str:
    """HEAD's commit read from .git (no git command); the binary may be built from a dirty tree."""
    try:
        git = REPO_DIR / ".git"
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head[:12]
        ref = head[5:]
        if (git / ref).is_file():
            return (git / ref).read_text().strip()[:12]
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0][:12]
    except OSError:
        pass
    return "?"


def proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def proc_io(pid: int) -> dict[str, int]:
    try:
        return {k: int(v) for k, v in (line.split(": ") for line in
                                        Path(f"/proc/{pid}/io").read_text().splitlines())}
    except (OSError, ValueError):
        return {}


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, summed over its CPUs."""
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(v) - v[3] - v[4]) / CLK_TCK, sum(v) / CLK_TCK


def proc_snapshot() -> dict[int, tuple[str, float]]:
    """pid -> (name, CPU seconds) of every process."""
    out = {}
    for d in os.scandir("/proc"):
        if not d.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d.name}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        out[int(d.name)] = (stat[stat.index("(") + 1:stat.rindex(")")],
                            (int(fields[11]) + int(fields[12])) / CLK_TCK)
    return out


def busiest(before: dict, after: dict, seconds: float, labels: dict[int, str]) -> list[dict]:
    """The processes that used the most CPU between two snapshots (those that exited in between
    are missed; the machine-wide figures count them)."""
    rows = []
    for pid, (name, cpu) in after.items():
        d = cpu - before.get(pid, (name, 0.0))[1]
        if d > 0.05:
            rows.append({"pid": pid, "name": labels.get(pid, name), "cpu_s": round(d, 2),
                         "cores": round(d / seconds, 2)})
    return sorted(rows, key=lambda r: -r["cpu_s"])[:6]


def load_avg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def dir_state(d: Path) -> tuple[int, int, int, int]:
    """(bytes of live .log files, live segments, bytes of compaction output in flight
    (.cleaned/.swap files), files of it). Files may vanish while listed."""
    live = segs = pending = pfiles = 0
    try:
        entries = list(os.scandir(d))
    except FileNotFoundError:
        return 0, 0, 0, 0
    for e in entries:
        try:
            size = e.stat().st_size
        except FileNotFoundError:
            continue
        if e.name.endswith(".log"):
            live += size
            segs += 1
        elif e.name.endswith(".cleaned") or e.name.endswith(".swap"):
            pending += size
            pfiles += 1
    return live, segs, pending, pfiles


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an ascending list (q in 0..100)."""
    if not sorted_values:
        return None
    k = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(k, len(sorted_values)) - 1]


def summary(lat_s: list[float]) -> dict:
    v = sorted(x * 1000 for x in lat_s)
    return {"n": len(v), "p50_ms": percentile(v, 50), "p99_ms": percentile(v, 99),
            "p99_9_ms": percentile(v, 99.9), "max_ms": v[-1] if v else None,
            "mean_ms": sum(v) / len(v) if v else None}


def fmt_ms(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:.0f}"


def fmt_mib(b: int) -> str:
    return f"{b / MIB:,.1f} MiB"


# --------------------------------------------------------------------------------------------
# the latency probe

class Probe(threading.Thread):
    """Sends one small record every `interval` seconds to partition 0 (acks=all, linger.ms=0),
    on a fixed schedule that does not wait for acknowledgements, and records each delivery:
    (send time, scheduled time, latency produce()->callback, librdkafka's latency, error)."""

    def __init__(self, bootstrap: str, interval: float):
        super().__init__(name="probe", daemon=True)
        self.interval = interval
        self.conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                     "enable.idempotence": False, "message.timeout.ms": 120000, "log_level": 3}
        self.producer = Producer(self.conf)
        self.records: list[tuple[float, float, float, float | None, str | None]] = []
        self.sent = 0
        self.rescheduled = 0
        self.stop_event = threading.Event()
        self.payload = b"p" * 100
        self.error: BaseException | None = None

    def run(self):
        try:
            self._run()
        except BaseException as e:  # noqa: BLE001
            self.error = e

    def _run(self):
        p, interval, records = self.producer, self.interval, self.records
        nxt = time.perf_counter()
        while not self.stop_event.is_set():
            now = time.perf_counter()
            if now >= nxt:
                if now - nxt > 1.0:  # starved for over a second: restart the schedule
                    self.rescheduled += 1
                    nxt = now
                sched = nxt
                t0 = time.perf_counter()

                def done(err, msg, t0=t0, sched=sched):
                    t1 = time.perf_counter()
                    try:
                        rd = msg.latency()
                    except Exception:  # noqa: BLE001
                        rd = None
                    records.append((t0, sched, t1 - t0, rd, str(err) if err else None))

                p.produce(TOPIC, self.payload, b"probe-%d" % (self.sent % 100), partition=0,
                          on_delivery=done)
                self.sent += 1
                nxt += interval
                p.poll(0)
                continue
            wait = nxt - now
            if wait >= 0.001:
                p.poll(wait)  # returns early when a delivery report arrives
            else:
                time.sleep(wait)
        p.flush(120)
        self.producer = None  # destroyed here, not left reconnecting to a stopped broker

    def stop(self):
        self.stop_event.set()
        self.join(180)


# --------------------------------------------------------------------------------------------
# steps

def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def create_topic(bootstrap: str, segment_bytes: int) -> dict[str, str]:
    config = {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1",
              "segment.bytes": str(segment_bytes), "min.cleanable.dirty.ratio": "0.01"}
    admin = admin_client(bootstrap)
    for f in admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1,
                                           config=config)], request_timeout=60).values():
        f.result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=10)
        t = md.topics.get(TOPIC)
        if t and 0 in t.partitions and t.partitions[0].leader >= 0:
            return config
        time.sleep(0.2)
    raise RuntimeError(f"topic {TOPIC} has no leader after 60 s")


def fill(bootstrap: str, size_bytes: int, keys: int, value_bytes: int, seed: int) -> dict:
    """Produces about size_bytes of key+value bytes, keys uniform over `keys` distinct keys."""
    rnd = random.Random(seed)
    values = [rnd.randbytes(value_bytes) for _ in range(256)]  # incompressible; no compression
    keylist = [b"key-%08d" % i for i in range(keys)]
    errors: list[str] = []

    def cb(err, _msg):
        if err is not None:
            errors.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20,
                  "compression.type": "none", "enable.idempotence": False,
                  "queue.buffering.max.messages": 200000, "queue.buffering.max.kbytes": 512 * 1024,
                  "log_level": 3})
    t0 = time.perf_counter()
    produced = n = 0
    while produced < size_bytes:
        k = keylist[rnd.randrange(keys)]
        v = values[n & 255]
        try:
            p.produce(TOPIC, v, k, partition=0, on_delivery=cb)
        except BufferError:
            p.poll(0.05)
            continue
        produced += len(k) + len(v)
        n += 1
        if n % 5000 == 0:
            p.poll(0)
    left = p.flush(600)
    secs = time.perf_counter() - t0
    if left or errors:
        raise RuntimeError(f"fill failed: {left} undelivered, {len(errors)} errors, first: "
                           f"{errors[:3]}")
    return {"records": n, "key_value_bytes": produced, "seconds": round(secs, 2),
            "mib_per_s": round(produced / MIB / secs, 1), "distinct_keys_in_keyspace": keys,
            "value_bytes": value_bytes}


def set_compact(bootstrap: str) -> None:
    admin = admin_client(bootstrap)
    res = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)


def describe_policy(bootstrap: str) -> str:
    admin = admin_client(bootstrap)
    for f in admin.describe_configs([ConfigResource(ResourceType.TOPIC, TOPIC)]).values():
        return f.result(30)["cleanup.policy"].value
    return "?"


class LogTail:
    """New lines of the broker's log file about the cleaner (Skein's and Kafka's wording)."""

    KEEP = ("compacted log", "compacted topic=", "log changed during compaction", "compaction failed",
            "topic configs changed", "Beginning cleaning of log", "cleaned log", "Swapping in cleaned segment",
            "log cleaner thread panicked")

    def __init__(self, path: Path):
        self.path = path
        self.pos = path.stat().st_size if path.exists() else 0
        self.buf = b""
        self.block = 0  # Kafka prints a clean's statistics on the tab-indented lines that follow

    def new_lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return []
        self.pos += len(data)
        data = self.buf + data
        lines = data.split(b"\n")
        self.buf = lines.pop()
        out = []
        for raw in lines:
            line = re.sub(r"\x1b\[[0-9;]*m", "", raw.decode(errors="replace")).rstrip()
            if any(k in line for k in self.KEEP):
                out.append(line[:400])
                self.block = 12 if "cleaned log" in line else 0
            elif self.block and line[:1] in ("\t", " "):
                out.append(line[:400])
                self.block -= 1
            else:
                self.block = 0
        return out


def is_clean_line(line: str) -> bool:
    """A log line saying a clean of the topic's partition completed (not, e.g., the config change:
    the topic's name is itself 'compacted'). Skein: 'compacted log dir=…/compacted-0 stats=…' and
    'compacted topic=compacted partition=0 …'; Kafka: 'cleaned log compacted-0 (dirty section…'."""
    return ("compacted log " in line and f"{TOPIC}-0" in line) or \
        f"compacted topic={TOPIC} " in line or f"cleaned log {TOPIC}-0" in line.lower()


def skein_pass_stats(lines: list[str]) -> list[dict]:
    """The storage layer's 'compacted log ... stats=CleanStats { ... }' lines, parsed."""
    out = []
    for line in lines:
        if "compacted log" not in line:
            continue
        d = {k: int(v) for k, v in re.findall(r"(segments_cleaned|bytes_before|bytes_after|"
                                              r"records_removed): (\d+)", line)}
        if d:
            out.append(d)
    return out


# --------------------------------------------------------------------------------------------

def run(args) -> dict:
    """Runs the benchmark in a fresh temporary directory, removed at the end whatever happens."""
    system = args.system
    work_root = BENCH_DIR / ".work"
    work_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"compaction-{system}-", dir=work_root))
    result: dict = {
        "benchmark": "compaction_latency", "issue": "#20", "system": system,
        "quick": args.quick, "started_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "settings": {"size_mib": args.size_mb, "segment_mib": args.segment_mb, "keys": args.keys,
                     "value_bytes": args.value_bytes, "idle_seconds": args.idle_seconds,
                     "warmup_seconds": args.warmup_seconds, "settle_seconds": args.settle_seconds,
                     "max_clean_seconds": args.max_clean_seconds, "probe_interval_ms": args.interval_ms,
                     "broker_overrides": {}},
        "environment": {"cpus": os.cpu_count(), "kernel": platform.release(),
                        "python": platform.python_version(),
                        "confluent_kafka": __import__("confluent_kafka").version()[0],
                        "librdkafka": __import__("confluent_kafka").libversion()[0],
                        "load_start": load_avg(), "work_dir": str(work)},
    }
    try:
        return measure(args, work, result)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(args, work: Path, result: dict) -> dict:
    system = args.system
    size_bytes = args.size_mb * MIB
    seg_bytes = args.segment_mb * MIB
    overrides = {"log.cleaner.backoff.ms": "1000", "log.segment.bytes": str(seg_bytes)}
    if system == "skein":
        b = bench.BenchSkein(work)
        b.binary = skein_binary()
        st = b.binary.stat() if b.binary.exists() else None
        result["environment"]["skein_broker_bin"] = str(b.binary)
        result["environment"]["skein_broker_bin_mtime_utc"] = (
            dt.datetime.fromtimestamp(st.st_mtime, dt.timezone.utc).isoformat(timespec="seconds") if st else None)
        result["environment"]["repo_head"] = head_commit()
    else:
        b = bench.BenchKafka(work)
        result["environment"]["kafka_version"] = bench.kafka_version()
    b.overrides.update(overrides)
    result["settings"]["broker_overrides"] = dict(b.overrides)
    probe: Probe | None = None
    try:
        print(f"==> starting {system} in {work}", flush=True)
        b.start()
        pid = b.proc.pid
        bootstrap = b.bootstrap
        result["settings"]["topic_config"] = create_topic(bootstrap, seg_bytes)
        part_dir = next((p for p in b.data_dir.rglob(f"{TOPIC}-0") if p.is_dir()), None)
        deadline = time.monotonic() + 30
        while part_dir is None and time.monotonic() < deadline:
            time.sleep(0.2)
            part_dir = next((p for p in b.data_dir.rglob(f"{TOPIC}-0") if p.is_dir()), None)
        if part_dir is None:
            raise RuntimeError(f"no directory {TOPIC}-0 under {b.data_dir}")

        print(f"==> filling {TOPIC} with {args.size_mb} MiB ({args.keys} keys, "
              f"{args.value_bytes} B values, {args.segment_mb} MiB segments)", flush=True)
        cpu0 = proc_cpu_seconds(pid)
        result["fill"] = fill(bootstrap, size_bytes, args.keys, args.value_bytes, args.seed)
        result["fill"]["broker_cpu_s"] = round(proc_cpu_seconds(pid) - cpu0, 2)
        t = time.perf_counter()
        os.sync()  # the fill's dirty pages reach the disk before anything is measured
        result["fill"]["sync_seconds"] = round(time.perf_counter() - t, 2)
        live, segs, _, _ = dir_state(part_dir)
        result["fill"]["log_bytes"], result["fill"]["segments"] = live, segs
        print(f"    {result['fill']['records']:,} records in {result['fill']['seconds']} s "
              f"({result['fill']['mib_per_s']} MiB/s), {fmt_mib(live)} on disk in {segs} segments; "
              f"sync {result['fill']['sync_seconds']} s", flush=True)

        # ---- probe: warm-up, idle, then compaction --------------------------------------------
        tail = LogTail(b.log_path)
        # (t, broker CPU s, broker write_bytes, machine busy CPU s, machine total CPU s,
        #  this process's CPU s)
        samples: list[tuple[float, float, int, float, float, float]] = []
        me = os.getpid()

        def sample_proc():
            io = proc_io(pid)
            samples.append((time.perf_counter(), proc_cpu_seconds(pid), io.get("write_bytes", 0),
                            *machine_cpu(), proc_cpu_seconds(me)))

        probe = Probe(bootstrap, args.interval_ms / 1000)
        probe.start()
        time.sleep(args.warmup_seconds)
        t_idle = time.perf_counter()
        snap0 = proc_snapshot()
        sample_proc()
        print(f"==> idle: {args.idle_seconds} s of probe records, cleanup.policy=delete", flush=True)
        while time.perf_counter() - t_idle < args.idle_seconds:
            time.sleep(0.25)
            sample_proc()
            if probe.error:
                raise probe.error
        before_live, before_segs, _, _ = dir_state(part_dir)
        t_enable = time.perf_counter()
        enable_wall = dt.datetime.now(dt.timezone.utc)
        sample_proc()
        set_compact(bootstrap)
        alter_s = time.perf_counter() - t_enable
        print(f"==> cleanup.policy=compact set ({alter_s * 1000:.0f} ms); waiting for the clean "
              f"(at most {args.max_clean_seconds} s)", flush=True)

        prev_live = before_live
        t_first_output = t_last_drop = t_last_line = None
        min_live = before_live
        drops = 0
        clean_lines: list[str] = []
        timeline = []  # (t since enable, live bytes, pending bytes)
        finished = False
        last_print = t_enable
        while True:
            time.sleep(0.2)
            now = time.perf_counter()
            sample_proc()
            if probe.error:
                raise probe.error
            live, segs, pending, pfiles = dir_state(part_dir)
            timeline.append((round(now - t_enable, 2), live, pending))
            if pfiles and t_first_output is None:
                t_first_output = now
            # a drop: the live .log bytes fell (swaps of cleaned segments); the probe's own
            # appends only ever add a few kB/s
            if live < prev_live - 64 * 1024:
                drops += 1
                t_last_drop = now
                min_live = min(min_live, live)
            prev_live = live
            new = tail.new_lines()
            if new:
                clean_lines += new
                if any(is_clean_line(ln) for ln in new):
                    t_last_line = now
            activity = max([x for x in (t_last_drop, t_last_line) if x is not None], default=None)
            if activity is not None and pfiles == 0 and now - activity >= args.settle_seconds:
                finished = True
                break
            if now - t_enable >= args.max_clean_seconds:
                break
            if now - last_print >= 10:
                last_print = now
                print(f"    {now - t_enable:5.0f} s: {fmt_mib(live)} live in {segs} segments, "
                      f"{fmt_mib(pending)} compaction output in flight, {drops} drop(s)", flush=True)
        t_done = time.perf_counter()
        snap1 = proc_snapshot()
        result["busiest_processes"] = busiest(
            snap0, snap1, t_done - t_idle, {pid: f"{system} broker", os.getpid(): "this script (probe)"})
        if finished:
            t_clean_end = activity
        else:
            t_clean_end = t_done
        after_live, after_segs, _, _ = dir_state(part_dir)
        probe.stop()
        if probe.error:
            raise probe.error
        result["environment"]["load_end"] = load_avg()

        # ---- results ------------------------------------------------------------------------
        phases = {"idle": (t_idle, t_enable), "cleaning": (t_enable, t_clean_end),
                  "after": (t_clean_end, t_done)}

        def at(t):  # the process sample nearest t
            return min(samples, key=lambda s: abs(s[0] - t))

        out_phases = {}
        for name, (a, z) in phases.items():
            recs = [r for r in probe.records if a <= r[0] < z]
            ok = [r for r in recs if r[4] is None]
            s0, s1 = at(a), at(z)
            dur = z - a
            ph = {"seconds": round(dur, 2), "sent": len(recs), "errors": len(recs) - len(ok),
                  "error_examples": sorted({r[4] for r in recs if r[4]})[:3],
                  "callback": summary([r[2] for r in ok]),
                  "librdkafka": summary([r[3] for r in ok if r[3] is not None]),
                  "slowest": [{"t_s": round(r[0] - t_enable, 3), "ms": round(r[2] * 1000, 2)}
                              for r in sorted(ok, key=lambda r: -r[2])[:10]],
                  "max_send_lag_ms": round(max((r[0] - r[1] for r in recs), default=0) * 1000, 2),
                  "broker_cpu_s": round(s1[1] - s0[1], 2),
                  "broker_cpu_share": round((s1[1] - s0[1]) / dur, 3) if dur > 0 else None,
                  "broker_write_mib": round((s1[2] - s0[2]) / MIB, 1),
                  # cores busy machine-wide (of os.cpu_count()), all processes
                  "machine_busy_cores": round((s1[3] - s0[3]) / (s1[4] - s0[4]) * (os.cpu_count() or 1), 2)
                  if s1[4] > s0[4] else None,
                  "probe_process_cores": round((s1[5] - s0[5]) / dur, 3) if dur > 0 else None}
            if ph["machine_busy_cores"] is not None and dur > 0:
                # what neither the broker nor this script used: other work on the machine
                ph["other_cores"] = round(max(0.0, ph["machine_busy_cores"] - ph["broker_cpu_share"]
                                              - ph["probe_process_cores"]), 2)
            out_phases[name] = ph
        result["phases"] = out_phases
        # a per-second series (second 0 = compaction enabled)
        series: dict[int, list[float]] = {}
        for r in probe.records:
            if r[4] is None and t_idle <= r[0] < t_done:
                series.setdefault(math.floor(r[0] - t_enable), []).append(r[2])
        result["per_second"] = [{"t": k, **{kk: (round(vv, 3) if isinstance(vv, float) else vv)
                                            for kk, vv in summary(v).items() if kk in ("n", "p50_ms", "p99_ms", "max_ms")}}
                                for k, v in sorted(series.items())]
        passes = skein_pass_stats(clean_lines)
        # when the broker logged each completed pass, relative to enabling compaction (Skein's
        # lines start with an RFC 3339 UTC time)
        logged = []
        for ln in clean_lines:
            m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z", ln)
            if m and "compacted log" in ln:
                when = dt.datetime.fromisoformat(m.group(1)[:26]).replace(tzinfo=dt.timezone.utc)
                logged.append(round((when - enable_wall).total_seconds(), 3))
        for p_, t_ in zip(passes, logged):
            p_["logged_at_s"] = t_
        result["clean"] = {
            "finished": finished,
            "enabled_at_utc": enable_wall.isoformat(timespec="milliseconds"),
            "alter_configs_ms": round(alter_s * 1000, 1),
            "first_output_s": round(t_first_output - t_enable, 2) if t_first_output else None,
            "duration_s": round(t_clean_end - t_enable, 2),
            "log_bytes_before": before_live, "segments_before": before_segs,
            "log_bytes_after": after_live, "segments_after": after_segs,
            "min_log_bytes_seen": min_live, "drops_seen": drops,
            "probe_bytes_note": "log bytes include the probe's own records (~150 B each on disk)",
            "passes": passes,
            "broker_log_lines": clean_lines[:80],
            "size_timeline": timeline[:: max(1, len(timeline) // 200)],
        }
        idle99 = out_phases["idle"]["callback"]["p99_ms"]
        clean99 = out_phases["cleaning"]["callback"]["p99_ms"]
        result["ratio_p99_cleaning_over_idle"] = (clean99 / idle99) if idle99 and clean99 else None
        rd_idle = out_phases["idle"]["librdkafka"]["p99_ms"]
        rd_clean = out_phases["cleaning"]["librdkafka"]["p99_ms"]
        result["ratio_p99_cleaning_over_idle_librdkafka"] = (rd_clean / rd_idle) if rd_idle and rd_clean else None
        result["_raw"] = [(round(r[0] - t_enable, 4), round(r[2] * 1000, 3), r[4] or "")
                          for r in probe.records] if args.raw else None
        result["probe"] = {"sent": probe.sent, "delivered": len(probe.records),
                           "rescheduled": probe.rescheduled, "config": probe.conf}
        return result
    finally:
        if probe is not None and probe.is_alive():
            probe.stop_event.set()
            probe.join(30)
        if b.proc is not None:
            result["environment"]["broker_exit"] = b.stop(60)


# --------------------------------------------------------------------------------------------
# report

def render_markdown(r: dict) -> str:
    s, ph, c = r["settings"], r["phases"], r["clean"]
    env = r["environment"]
    label = {"skein": "Skein", "kafka": f"Apache Kafka {env.get('kafka_version', '')}".strip()}[r["system"]]
    ratio = r["ratio_p99_cleaning_over_idle"]
    lines = [f"# Producer latency while compacting a {s['size_mib']} MiB partition — {label} — {r['stamp']}",
             "",
             'Issue #20: "A test compacts a 1 GiB partition while a producer\'s p99 latency on it stays '
             'within 2x of idle." Benchmark `e2e/bench/compaction_latency.py`'
             + (" (`--quick`)" if r["quick"] else "") + "; nothing is asserted.",
             ""]
    if ratio is None:
        verdict = "no ratio (a phase has no samples)"
    else:
        within = ratio <= ISSUE_BOUND
        verdict = (f"**p99 while cleaning / p99 idle = {ratio:.2f}×: "
                   f"{'within' if within else 'NOT within'} the issue's {ISSUE_BOUND:g}× bound**")
        if s["size_mib"] < 1024:
            verdict += f" (on {s['size_mib']} MiB, not the issue's 1 GiB)"
    if not c["finished"]:
        verdict += f"; the clean did **not finish** within {s['max_clean_seconds']} s"
    lines += [verdict + ".", ""]
    lines += ["| phase | duration | probe records | errors | p50 ms | p99 ms | p99.9 ms | max ms | "
              "broker CPU | broker disk writes | machine CPU busy |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    names = {"idle": "idle (cleanup.policy=delete)", "cleaning": "cleaning (compact enabled → clean over)",
             "after": "after the clean (settle window)"}
    for k in ("idle", "cleaning", "after"):
        p = ph[k]
        cb = p["callback"]
        cpu = f"{p['broker_cpu_s']:.1f} s ({p['broker_cpu_share'] * 100:.0f} % of a core)" \
            if p["broker_cpu_share"] is not None else "–"
        lines.append(f"| {names[k]} | {p['seconds']:.1f} s | {cb['n']:,} | {p['errors']} | "
                     f"{fmt_ms(cb['p50_ms'])} | {fmt_ms(cb['p99_ms'])} | {fmt_ms(cb['p99_9_ms'])} | "
                     f"{fmt_ms(cb['max_ms'])} | {cpu} | {p['broker_write_mib']:,.0f} MiB | "
                     + (f"{p['machine_busy_cores']:.2f} of {env['cpus']} cores |"
                        if p.get("machine_busy_cores") is not None else "– |"))
    rd = r.get("ratio_p99_cleaning_over_idle_librdkafka")
    lines += ["",
              "Latency: from `produce()` to the delivery callback of each probe record (one 100-byte record "
              f"every {s['probe_interval_ms']} ms, acks=all, linger.ms=0, on a fixed schedule that does not wait "
              "for acknowledgements). librdkafka's own measure of the same records (`Message.latency()`): p50/p99/"
              f"p99.9/max idle {'/'.join(fmt_ms(ph['idle']['librdkafka'][q]) for q in ('p50_ms', 'p99_ms', 'p99_9_ms', 'max_ms'))} ms, "
              f"cleaning {'/'.join(fmt_ms(ph['cleaning']['librdkafka'][q]) for q in ('p50_ms', 'p99_ms', 'p99_9_ms', 'max_ms'))} ms"
              + (f" (p99 ratio {rd:.2f}×)" if rd else "") + ". "
              "p99.9 and max rest on a handful of records per phase.",
              ""]
    removed = c["log_bytes_before"] - c["log_bytes_after"]
    clean = [f"Clean: {'finished' if c['finished'] else 'not finished'} **{c['duration_s']:.1f} s** after "
             f"cleanup.policy=compact was set (IncrementalAlterConfigs took {c['alter_configs_ms']:.0f} ms)"]
    if c["first_output_s"] is not None:
        clean.append(f"first compaction output file {c['first_output_s']:.1f} s after it")
    clean.append(f"partition's `.log` files {fmt_mib(c['log_bytes_before'])} in {c['segments_before']} segments "
                 f"before → {fmt_mib(c['log_bytes_after'])} in {c['segments_after']} after "
                 f"({removed / c['log_bytes_before'] * 100:.0f} % removed"
                 f"; {c['drops_seen']} shrink step(s) seen)" if c["log_bytes_before"] else "no data")
    lines.append("; ".join(clean) + ".")
    if c["passes"]:
        for i, p in enumerate(c["passes"], 1):
            lines.append(f"Pass {i} (broker log): {p.get('segments_cleaned', '?')} segments, "
                         f"{fmt_mib(p.get('bytes_before', 0))} → {fmt_mib(p.get('bytes_after', 0))}, "
                         f"{p.get('records_removed', 0):,} records removed"
                         + (f", committed (logged) {p['logged_at_s']:.2f} s after compaction was enabled"
                            if "logged_at_s" in p else "") + ".")
    slow = ph["cleaning"].get("slowest") or []
    if slow:
        lines.append(f"Slowest probe records while cleaning: " + ", ".join(
            f"{x['ms']:.0f} ms (sent at {x['t_s']:.2f} s)" for x in slow[:3])
            + f"; {sum(1 for x in slow if x['ms'] > 2 * (ph['idle']['callback']['p99_ms'] or 0))} of the "
            "10 slowest took over twice the idle p99 (per-second figures in report.json).")
    lines += ["", "The clean is over when the partition's live `.log` files last shrank (or the broker last "
              "logged a compaction of it), no `.cleaned`/`.swap` output was left, and nothing more happened for "
              f"{s['settle_seconds']} s (the *after* row); the *cleaning* row covers every probe record sent from "
              "the IncrementalAlterConfigs call to that moment, including the cleaner's pick-up delay "
              "(`log.cleaner.backoff.ms=1000`).", ""]
    f = r["fill"]
    lines += [f"Setup: one {label} broker, topic `{TOPIC}` (1 partition, RF 1) created with "
              + ", ".join(f"`{k}={v}`" for k, v in s["topic_config"].items())
              + f"; filled with {f['records']:,} records ({s['value_bytes']} B values, no compression, keys uniform over "
              f"{s['keys']:,} keys) in {f['seconds']} s ({f['mib_per_s']} MiB/s, acks=1), then `sync` "
              f"({f['sync_seconds']} s); {s['warmup_seconds']} s of probe warm-up, {s['idle_seconds']} s idle, then "
              "`cleanup.policy=compact`. The data stays in the page cache (the cleaner reads from memory). "
              "Broker settings: " + ", ".join(f"`{k}={v}`" for k, v in s["broker_overrides"].items()) + ".",
              ""]
    mach = f"Machine: {env['cpus']} CPUs, kernel {env['kernel']}; load average {env['load_start']} at start, " \
           f"{env.get('load_end', '?')} at end."
    if r["system"] == "skein":
        mach += (f" Binary `{env['skein_broker_bin']}` (built {env['skein_broker_bin_mtime_utc']}; repository HEAD "
                 f"{env['repo_head']}, the working tree may differ).")
    else:
        mach += (" Kafka keeps replaced segments as `.deleted` files for `file.delete.delay.ms` (60 s) and "
                 "deletes them in the background: they are not counted as live bytes, and their deletion "
                 + ("falls in the *after* window." if s["settle_seconds"] > 60 else "falls after the window."))
    noisy = [(k, ph[k]["other_cores"]) for k in ("idle", "cleaning") if ph[k].get("other_cores") is not None
             and ph[k]["other_cores"] >= 0.25]
    if noisy:
        mach += (" **The machine was not quiet**: other processes kept " + " and ".join(
            f"{c:.2f} cores busy during the {k} phase" for k, c in noisy)
            + " (machine-wide CPU minus the broker's and this script's); compare with a run on a quiet machine.")
    if r.get("busiest_processes"):
        mach += " Busiest processes from the idle phase's start to the end: " + ", ".join(
            f"{p['name']} {p['cores']:.2f} cores" for p in r["busiest_processes"][:4]) + "."
    lines += [mach, "", "Per-second latencies, the size timeline and the broker's compaction log lines are in "
              "report.json.", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--system", choices=("skein", "kafka"), default="skein")
    ap.add_argument("--quick", action="store_true", help="64 MiB, 10 s idle (about a minute)")
    ap.add_argument("--size-mb", type=int, help="MiB of keys and values to fill (default 1024, quick 64)")
    ap.add_argument("--segment-mb", type=int, help="segment.bytes in MiB (default size/16, 1..64)")
    ap.add_argument("--keys", type=int, help="distinct keys (default 200k per GiB: ~5 versions per key)")
    ap.add_argument("--value-bytes", type=int, default=1024)
    ap.add_argument("--idle-seconds", type=float, help="idle phase (default 30, quick 10)")
    ap.add_argument("--warmup-seconds", type=float, default=2.0)
    ap.add_argument("--settle-seconds", type=float, help="quiet time that ends the clean (default 10, quick 5)")
    ap.add_argument("--max-clean-seconds", type=float, default=600)
    ap.add_argument("--interval-ms", type=float, default=5.0, help="probe send interval (default 5)")
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--raw", action="store_true", help="also write samples.csv (every probe record)")
    ap.add_argument("--out", type=Path, help="results directory (default e2e/bench/results/compaction-<date>)")
    args = ap.parse_args()
    if args.size_mb is None:
        args.size_mb = 64 if args.quick else 1024
    if args.segment_mb is None:
        args.segment_mb = min(64, max(1, args.size_mb // 16))
    if args.keys is None:
        args.keys = max(1000, round(200_000 * args.size_mb / 1024))
    if args.idle_seconds is None:
        args.idle_seconds = 10.0 if args.quick else 30.0
    if args.settle_seconds is None:
        args.settle_seconds = 5.0 if args.quick else 10.0

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    out = args.out or BENCH_DIR / "results" / (f"compaction-{stamp}" if args.system == "skein"
                                               else f"compaction-{args.system}-{stamp}")

    def on_term(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started in the background

    result = run(args)
    result["stamp"] = stamp
    out.mkdir(parents=True, exist_ok=True)
    raw = result.pop("_raw", None)
    if raw:
        (out / "samples.csv").write_text("t_since_compact_enabled_s,latency_ms,error\n"
                                         + "".join(f"{t},{ms},{e}\n" for t, ms, e in raw))
    (out / "report.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    md = render_markdown(result)
    (out / "report.md").write_text(md)
    print()
    print(md)
    ratio = result["ratio_p99_cleaning_over_idle"]
    print(f"p99(cleaning)/p99(idle) = {ratio:.2f}x" if ratio else "p99 ratio: n/a")
    print(f"report: {out}/report.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
