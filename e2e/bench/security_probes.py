#!/usr/bin/env python3
"""Two hostile-client probes of issue #41, Skein and Apache Kafka side by side.

    e2e/.venv/bin/python e2e/bench/security_probes.py --target both --out /tmp/security_probes.md

A benchmark, not a test: it measures, prints a markdown table (target, metric, value) and writes
it to --out; it asserts nothing. Each probe starts a fresh single broker of the target with the
e2e suite's launchers (`tests/brokers.py`: `make_broker`; Kafka 4.1.1 from the cached jars in
KRaft combined mode with brokers.py's JVM flags, -Xms256m -Xmx1g; Skein from $SKEIN_BROKER_BIN,
else target/release, else ~/.cache/skein/cargo-target/release), on loopback only, data under
e2e/bench/.work/ (removed afterwards). Frames are written by hand (`tests/rawkafka.py` plus the
ConsumerGroupHeartbeat encoder below).

1. Group isolation under heavy regexes (KIP-848, ConsumerGroupHeartbeat v1, API 68).
   --topics topics `t_0000`.. (one partition each; `_` so that `\\w` matches the whole name, as
   Kafka's coordinator requires: `matcher(topic).matches()`). Group B: one member subscribed by
   name to `t_0000`, one heartbeat every 100 ms on its own connection; its round trips are timed
   over --seconds (p50 / p99 / max), first with nothing else running (baseline), then while
   group A runs: --members members, each on its own connection in a separate load process,
   heartbeating back to back (the next request as soon as the answer arrives) with
   SubscribedTopicRegex set on every heartbeat, in two variants:
     - "same regex": every heartbeat carries `(?:\\w{1,20}){1,20}` (nested bounded repeats: 400
       copies of a word class once expanded, a large program for RE2/J or Rust's `regex`);
     - "new regex per heartbeat": the same pattern plus `|nomatch_<member>_<n>` with n counting
       heartbeats, so every heartbeat carries a pattern the coordinator has never seen (nothing
       cached can answer it; the set of matching topics stays the same).
   `offsets.topic.num.partitions` is 5 on both (brokers.py's value for Kafka). Group B's id is
   chosen so that `abs(javaHash(id)) % 50` equals group A's: both groups live in the same
   `__consumer_offsets` partition (for 50 partitions and so for 5), the same coordinator shard
   on both brokers, the worst case.
   Group C, timed the same way at the same time (its own thread and connection), is a second
   single-member group in another partition: isolation across coordinator shards.
   Reported besides: group A's heartbeat rate, a sample of its round trips and its error
   counts, the partitions its members own at the end (distinct, by topic: `\\w` also matches
   `__consumer_offsets`, and both brokers assign it to such a regex), group B's errors, and the
   broker's CPU (user + system, /proc/PID/stat) per timed phase.

2. Memory under 500 stalled connections before authentication. A broker with a PLAINTEXT
   listener and a SASL_PLAINTEXT one (PLAIN, one user; configured as test_hostile_clients.py's
   `sasl_broker` fixture, with `connections.max.idle.ms` and `sasl.server.max.receive.size`
   left at their defaults, 600000 and 524288). RSS (/proc/PID/status VmRSS of the broker
   process; for Kafka the JVM) at rest, then --connections connections each send a
   SaslHandshake v1 (PLAIN) and then a frame whose size prefix announces 500,000 bytes (just
   under 524,288) followed by 100 KB of it, and stall. RSS is sampled for 5 s after the last
   connection (peak, and at 5 s), connections still open are counted, an ApiVersions on the
   SASL listener is timed (is the broker still serving?), then everything is closed. The same
   with frames announcing 50 MB (over the limit: the broker should close them at once), each
   case on a fresh broker.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import selectors
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

E2E_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(E2E_DIR / "tests"))

import rawkafka as rk  # noqa: E402  (hand-written frames, read only)
from brokers import KafkaBroker, free_port, make_broker  # noqa: E402  (the e2e suite's launchers)

API_CONSUMER_GROUP_HEARTBEAT = 68
CGH_VERSION = 1  # the first with SubscribedTopicRegex

# Error codes (org.apache.kafka.common.protocol.Errors) the probes react to.
ERROR_NAMES = {
    0: "NONE", 14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR", 25: "UNKNOWN_MEMBER_ID", 35: "UNSUPPORTED_VERSION", 42: "INVALID_REQUEST",
    69: "GROUP_ID_NOT_FOUND", 81: "GROUP_MAX_SIZE_REACHED", 110: "FENCED_MEMBER_EPOCH",
    113: "STALE_MEMBER_EPOCH", 128: "INVALID_REGULAR_EXPRESSION",
}
RETRIABLE = (14, 15, 16)
REJOIN = (25, 110)

HEAVY_REGEX = r"(?:\w{1,20}){1,20}"
PRE_AUTH_LIMIT = 524_288  # sasl.server.max.receive.size, Kafka's default (Skein's too)


def err_name(code: int) -> str:
    return ERROR_NAMES.get(code, f"error {code}")


# ------------------------------------------------------------------------------------------
# ConsumerGroupHeartbeat v1 (flexible: compact strings and arrays, tagged fields)


def compact_nullable_array(items, encode) -> bytes:
    return rk.compact_array(items, encode)


def uuid_bytes(u: bytes) -> bytes:
    assert len(u) == 16
    return u


def encode_heartbeat(group: str, member_id: str, epoch: int, *, rebalance_timeout_ms: int = -1,
                     topic_names: list[str] | None = None, regex: str | None = None,
                     owned: list[tuple[bytes, list[int]]] | None = None) -> bytes:
    """ConsumerGroupHeartbeatRequest v1, field by field (ConsumerGroupHeartbeatRequest.json)."""
    def tp(t):
        topic_id, parts = t
        return uuid_bytes(topic_id) + rk.compact_array(parts, rk.i32) + rk.NO_TAGS

    return (rk.compact_string(group)
            + rk.compact_string(member_id)
            + rk.i32(epoch)
            + rk.compact_string(None)          # InstanceId
            + rk.compact_string(None)          # RackId
            + rk.i32(rebalance_timeout_ms)
            + compact_nullable_array(topic_names, rk.compact_string)
            + rk.compact_string(regex)         # SubscribedTopicRegex (v1+)
            + rk.compact_string(None)          # ServerAssignor
            + compact_nullable_array(owned, tp)
            + rk.NO_TAGS)


def decode_heartbeat(r: rk.Reader) -> dict:
    """ConsumerGroupHeartbeatResponse v1."""
    out = {"throttle_ms": r.i32(), "error": r.i16(), "message": r.compact_string(),
           "member_id": r.compact_string(), "epoch": r.i32(), "interval_ms": r.i32(),
           "assignment": None}
    if r.i8() >= 0:  # nullable struct: -1 null, 1 present
        def tp(r):
            topic_id = r.raw(16)
            parts = r.compact_array(lambda r: r.i32())
            r.tags()
            return topic_id, parts
        out["assignment"] = r.compact_array(tp) or []
        r.tags()
    r.tags()
    return out


def heartbeat(c: rk.Connection, body: bytes) -> dict:
    return decode_heartbeat(c.request(API_CONSUMER_GROUP_HEARTBEAT, CGH_VERSION, body, flexible=True))


def connect(port: int, timeout: float = 30.0) -> rk.Connection:
    return rk.Connection("127.0.0.1", port, client_id="security-probe", timeout=timeout)


def wait_coordinator(port: int, group: str, timeout: float = 60.0) -> None:
    """FindCoordinator (v2) until the group's coordinator is known (the broker itself)."""
    deadline = time.monotonic() + timeout
    with connect(port) as c:
        while True:
            err, node = c.find_coordinator(group)
            if err == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"FindCoordinator({group}) still {err_name(err)} after {timeout:.0f}s")
            time.sleep(0.2)


class Member:
    """One KIP-848 member on its own connection: joins with epoch 0 and a member id of its own
    (a UUID, as Kafka 4.x requires), then heartbeats with the epoch the coordinator gave it,
    reporting the partitions last assigned as owned. Fenced or unknown: rejoins (epoch 0)."""

    def __init__(self, port: int, group: str, *, topic_names=None, regex=None):
        self.port, self.group = port, group
        self.topic_names, self.regex = topic_names, regex
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: list[tuple[bytes, list[int]]] = []
        self.conn = connect(port)
        self.errors: dict[str, int] = {}
        self.last_message: str | None = None

    def body(self, regex: str | None = None) -> bytes:
        regex = regex if regex is not None else self.regex
        if self.epoch == 0:
            return encode_heartbeat(self.group, self.member_id, 0, rebalance_timeout_ms=30000,
                                    topic_names=self.topic_names, regex=regex, owned=[])
        return encode_heartbeat(self.group, self.member_id, self.epoch, topic_names=self.topic_names,
                                regex=regex, owned=self.owned)

    def beat(self, regex: str | None = None) -> dict:
        a = heartbeat(self.conn, self.body(regex))
        e = a["error"]
        if e == 0:
            self.epoch = a["epoch"]
            if a["assignment"] is not None:
                self.owned = [(t, sorted(p)) for t, p in a["assignment"]]
        else:
            self.errors[err_name(e)] = self.errors.get(err_name(e), 0) + 1
            self.last_message = a["message"]
            if e in REJOIN:
                self.epoch, self.owned = 0, []
        return a

    def join(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            a = self.beat()
            if a["error"] == 0 and self.epoch > 0:
                return
            if a["error"] not in RETRIABLE + REJOIN:
                raise RuntimeError(f"{self.group}: join refused: {err_name(a['error'])} {a['message']!r}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.group}: not joined after {timeout:.0f}s: {err_name(a['error'])}")
            time.sleep(0.1)

    def leave(self) -> None:
        try:
            if self.epoch > 0:
                heartbeat(self.conn, encode_heartbeat(self.group, self.member_id, -1))
        except Exception:  # noqa: BLE001 - leaving is best effort
            pass
        self.conn.close()


# ------------------------------------------------------------------------------------------
# group A: the load process


def group_a_process(port: int, group: str, members: int, mode: str, seconds: float, warmup: float,
                    queue) -> None:
    """Runs in its own process (so that its work does not share a GIL with group B's timing):
    `members` threads, one member and one connection each, heartbeating back to back for
    warmup + seconds. Each member's owned partitions are taken at its last heartbeat, and only
    then, once every member has stopped, do they leave. Puts a summary on `queue`."""
    stop_at = time.monotonic() + warmup + seconds
    measure_from = time.monotonic() + warmup
    lock = threading.Lock()
    stats = {"beats": 0, "beats_measured": 0, "errors": {}, "messages": set(), "failures": [],
             "owned": [], "joined": 0, "rtts": []}
    all_stopped = threading.Barrier(members, timeout=warmup + seconds + 60)

    def run(i: int) -> None:
        m = None
        try:
            try:
                m = Member(port, group, regex=HEAVY_REGEX)
                n = beats = measured = 0
                rtts = []
                while time.monotonic() < stop_at:
                    n += 1
                    regex = HEAVY_REGEX if mode == "same" else f"{HEAVY_REGEX}|nomatch_{i}_{n}"
                    t0 = time.perf_counter()
                    a = m.beat(regex)
                    dt = time.perf_counter() - t0
                    beats += 1
                    if time.monotonic() >= measure_from:
                        measured += 1
                        if measured % 20 == 0:
                            rtts.append(dt * 1000)
                    if a["error"] not in (0,) + REJOIN:
                        time.sleep(0.05)  # not served (coordinator moving, regex refused): no spin
                with lock:
                    stats["beats"] += beats
                    stats["beats_measured"] += measured
                    stats["rtts"] += rtts
                    stats["owned"] += [(t, p) for t, ps in m.owned for p in ps]
                    stats["joined"] += m.epoch > 0
                    for k, v in m.errors.items():
                        stats["errors"][k] = stats["errors"].get(k, 0) + v
                    if m.last_message:
                        stats["messages"].add(m.last_message[:200])
            except Exception as e:  # noqa: BLE001 - reported, not raised
                with lock:
                    stats["failures"].append(f"member {i}: {type(e).__name__}: {e}")
            try:
                all_stopped.wait()
            except threading.BrokenBarrierError:
                pass
        finally:
            if m is not None:
                m.leave()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(members)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(warmup + seconds + 90)
    stats["messages"] = sorted(stats["messages"])
    queue.put(stats)


# ------------------------------------------------------------------------------------------
# helpers


def java_hash(s: str) -> int:
    h = 0
    for ch in s.encode("utf-16-be").decode("utf-16-be"):
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group: str, partitions: int) -> int:
    h = java_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def colliding_group(base: str, prefix: str) -> str:
    """A group id in the same __consumer_offsets partition as `base` for 50 partitions (and so
    for 5, 10, 25)."""
    want = offsets_partition(base, 50)
    for i in range(10000):
        g = f"{prefix}{i}"
        if offsets_partition(g, 50) == want:
            return g
    raise RuntimeError("no colliding group id")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def latency_summary(xs: list[float]) -> str:
    if not xs:
        return "no samples"
    return (f"p50 {pct(xs, 0.5):.2f} ms, p99 {pct(xs, 0.99):.2f} ms, max {max(xs):.2f} ms "
            f"(n={len(xs)})")


def create_topics(bootstrap: str, names: list[str], timeout: float = 120.0) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for i in range(0, len(names), 50):
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in names[i:i + 50]],
                                     request_timeout=60).values():
            f.result(60)
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=30)
        led = sum(1 for t in names if t in md.topics and all(p.leader >= 0 for p in md.topics[t].partitions.values())
                  and md.topics[t].partitions)
        if led == len(names):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {led} of {len(names)} topics have a leader after {timeout:.0f}s")
        time.sleep(0.5)


def topic_ids(bootstrap: str) -> dict[bytes, str]:
    """Every topic's id (16 bytes) -> name, internal topics included."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    names = list(admin.list_topics(timeout=30).topics)
    out = {}
    for name, f in admin.describe_topics(TopicCollection(names)).items():
        u = f.result(30).topic_id
        out[struct.pack(">qq", u.get_most_significant_bits(), u.get_least_significant_bits())] = name
    return out


def workdir_for(target: str, probe: str) -> Path:
    base = E2E_DIR / "bench" / ".work"
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"security-{probe}-{target}-", dir=base))


def start_broker(target: str, probe: str, overrides: dict[str, str] | None = None, sasl: bool = False):
    d = workdir_for(target, probe)
    b = make_broker(target, d)
    if isinstance(b, KafkaBroker):
        # KIP-848 on: Kafka 4.x's default already includes `consumer`; said explicitly anyway.
        b.overrides["group.coordinator.rebalance.protocols"] = "classic,consumer"
    if sasl:
        # As test_hostile_clients.py's `sasl_broker` fixture (PLAINTEXT for admin, SASL_PLAINTEXT
        # with PLAIN), but connections.max.idle.ms at its default (600000): the stalled
        # connections must live through the measurement.
        b.sasl_port = free_port()
        listeners = f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}"
        protocols = "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
        controller = ""
        if isinstance(b, KafkaBroker):
            controller = f",CONTROLLER://127.0.0.1:{b.controller_port}"
            protocols += ",CONTROLLER:PLAINTEXT"
        b.overrides.update({
            "listeners": listeners + controller,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": protocols,
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";',
        })
    b.overrides.update(overrides or {})
    b.start()
    return b, d


def stop_broker(b, d: Path, keep: bool) -> None:
    try:
        b.stop()
    finally:
        if keep:
            print(f"  (broker dir kept: {d})", flush=True)
        else:
            shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------------------------------
# probe 1: group isolation


def time_member(member: Member, seconds: float, period: float = 0.1) -> tuple[list[float], dict]:
    """Heartbeats every `period` s for `seconds`; each round trip in ms; errors by name."""
    lat: list[float] = []
    errors: dict[str, int] = {}
    start = time.monotonic()
    for i in range(int(seconds / period)):
        due = start + i * period
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        t0 = time.perf_counter()
        a = member.beat()
        lat.append((time.perf_counter() - t0) * 1000)
        if a["error"]:
            errors[err_name(a["error"])] = errors.get(err_name(a["error"]), 0) + 1
    return lat, errors


def time_victims(victims: dict[str, Member], seconds: float) -> dict[str, tuple[list[float], dict]]:
    """time_member for each victim at once, one thread each (100 ms apart, so the GIL is idle)."""
    out: dict[str, tuple[list[float], dict]] = {}
    threads = [threading.Thread(target=lambda k=k, m=m: out.__setitem__(k, time_member(m, seconds)))
               for k, m in victims.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 120)
    return out


def load_avg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def probe_groups(target: str, args, rows: list) -> None:
    print(f"[{target}] probe 1: group isolation under heavy regexes", flush=True)
    # The same __consumer_offsets size on both (brokers.py gives Kafka 5; Skein's default is 50):
    # a `\\w` regex matches it too, so group A gets the same 205 partitions on both.
    b, d = start_broker(target, "groups", {"offsets.topic.num.partitions": "5"})
    pid = b.proc.pid
    try:
        topics = [f"t_{i:04d}" for i in range(args.topics)]
        t0 = time.monotonic()
        create_topics(b.bootstrap, topics)
        print(f"  {len(topics)} topics created in {time.monotonic() - t0:.1f}s", flush=True)
        group_a = "probe-regex-a"
        # B: the same __consumer_offsets partition as A for 50 partitions and so for 5 (the
        # probe's setting); C: another one for both (it differs modulo 5).
        group_b = colliding_group(group_a, "probe-victim-b")
        group_c = next(g for g in (f"probe-other-c{i}" for i in range(10000))
                       if offsets_partition(g, 5) != offsets_partition(group_a, 5))
        for g in (group_a, group_b, group_c):
            wait_coordinator(b.port, g)
        rows.append((target, "group ids",
                     f"A `{group_a}` and B `{group_b}`: __consumer_offsets partition "
                     f"{offsets_partition(group_a, 50)} of 50 / {offsets_partition(group_a, 5)} of 5; "
                     f"C `{group_c}`: {offsets_partition(group_c, 50)} of 50 / {offsets_partition(group_c, 5)} of 5"))
        victims = {"B": Member(b.port, group_b, topic_names=[topics[0]]),
                   "C": Member(b.port, group_c, topic_names=[topics[1]])}
        names = {"B": "group B (A's partition)", "C": "group C (another partition)"}
        for m in victims.values():
            m.join()
        time_victims(victims, 2.0)  # warm-up: settle the assignments, warm the connections

        def report(phase: str, res: dict, cpu: float, load: str) -> None:
            for k in ("B", "C"):
                lat, errs = res[k]
                print(f"  {names[k]}, {phase}: {latency_summary(lat)}; errors {errs or 'none'}", flush=True)
                rows.append((target, f"{names[k]} heartbeat RTT every 100 ms, {phase}",
                             latency_summary(lat) + (f"; errors {errs}" if errs else "")))
            rows.append((target, f"broker CPU, {phase}",
                         f"{100 * cpu / args.seconds:.0f} % of a core (load average before: {load})"))

        load = load_avg()
        cpu0 = cpu_seconds(pid)
        res = time_victims(victims, args.seconds)
        report("alone (baseline)", res, cpu_seconds(pid) - cpu0, load)

        ctx = mp.get_context("spawn")
        for mode, label in (("same", "same regex"), ("varying", "new regex per heartbeat")):
            phase = f"while group A ({args.members} members, {label}) heartbeats back to back"
            q = ctx.Queue()
            warmup = 5.0
            proc = ctx.Process(target=group_a_process,
                               args=(b.port, group_a, args.members, mode, args.seconds, warmup, q),
                               daemon=True)
            proc.start()
            time.sleep(warmup)
            load = load_avg()
            cpu0 = cpu_seconds(pid)
            res = time_victims(victims, args.seconds)
            cpu = cpu_seconds(pid) - cpu0
            try:
                stats = q.get(timeout=120)
            except Exception:  # noqa: BLE001
                stats = None
            proc.join(30)
            if proc.is_alive():
                proc.terminate()
                proc.join(10)
            report(phase, res, cpu, load)
            if stats is None:
                rows.append((target, f"group A ({label})", "the load process reported nothing"))
                continue
            rate = stats["beats_measured"] / args.seconds
            a_rtt = latency_summary(stats["rtts"]) if stats["rtts"] else "no samples"
            ids = topic_ids(b.bootstrap)
            owned = stats["owned"]
            by_topic: dict[str, int] = {}
            for t, _p in set(owned):
                name = ids.get(t, "?")
                key = "t_*" if name.startswith("t_") else name
                by_topic[key] = by_topic.get(key, 0) + 1
            desc = (f"{rate:.0f} heartbeats/s over {args.seconds:.0f}s ({stats['beats']} in all, warm-up "
                    f"included); members joined {stats['joined']}/{args.members}; partitions owned at the "
                    f"end: {len(set(owned))} distinct ({', '.join(f'{k} {v}' for k, v in sorted(by_topic.items()))})"
                    + (f", {len(owned) - len(set(owned))} owned twice" if len(owned) != len(set(owned)) else "")
                    + f"; errors {stats['errors'] or 'none'}")
            if stats["messages"]:
                desc += f"; messages {stats['messages'][:3]}"
            if stats["failures"]:
                desc += f"; failures {stats['failures'][:3]}"
            print(f"  group A ({label}): {desc}; RTT sample {a_rtt}", flush=True)
            rows.append((target, f"group A ({label})", desc))
            rows.append((target, f"group A heartbeat RTT ({label}, 1 in 20 sampled)", a_rtt))
            time.sleep(2)
        for m in victims.values():
            m.leave()
        rows.append((target, "broker RSS after probe 1", f"{rss_mb(pid):.0f} MB"))
    finally:
        stop_broker(b, d, args.keep)


# ------------------------------------------------------------------------------------------
# probe 2: stalled connections before authentication


def sasl_api_versions_ms(port: int) -> str:
    try:
        with connect(port, timeout=10) as c:
            t0 = time.perf_counter()
            c.api_versions()
            return f"{(time.perf_counter() - t0) * 1000:.1f} ms"
    except Exception as e:  # noqa: BLE001
        return f"failed: {type(e).__name__}: {e}"


class CloseWatch:
    """Notices when the broker closes any of the watched connections (EOF or reset), with the
    seconds from the moment that connection's frame was sent."""

    def __init__(self):
        self.sel = selectors.DefaultSelector()
        self.sent_at: dict[int, float] = {}
        self.closed_after: dict[int, float] = {}

    def watch(self, i: int, s: socket.socket, sent_at: float) -> None:
        s.setblocking(False)
        self.sent_at[i] = sent_at
        self.sel.register(s, selectors.EVENT_READ, i)

    def closed(self, i: int, now: float) -> None:
        self.closed_after[i] = now - self.sent_at[i]

    def poll(self, timeout: float) -> None:
        for key, _ in self.sel.select(timeout):
            i, s = key.data, key.fileobj
            try:
                eof = s.recv(65536) == b""
            except BlockingIOError:
                continue
            except OSError:
                eof = True
            if eof:
                self.closed(i, time.monotonic())
                self.sel.unregister(s)

    def close(self) -> None:
        self.sel.close()


def probe_stalled(target: str, args, announced: int, rows: list) -> None:
    label = f"{args.connections} × SaslHandshake + frame announcing {announced:,} B, {args.sent_bytes // 1000} KB of it sent"
    print(f"[{target}] probe 2: {label}", flush=True)
    b, d = start_broker(target, f"stalled-{announced}", sasl=True)
    pid = b.proc.pid
    socks: list[socket.socket] = []
    watch = CloseWatch()
    try:
        time.sleep(args.settle)
        before = rss_mb(pid)
        handshake_errors = send_errors = 0
        payload = bytes(args.sent_bytes)
        samples = []
        t_open = time.monotonic()
        for i in range(args.connections):
            c = connect(b.sasl_port, timeout=10)
            socks.append(c.sock)
            try:
                err, _mechs = c.sasl_handshake("PLAIN")
                if err != 0:
                    handshake_errors += 1
                c.sock.sendall(struct.pack(">i", announced) + payload)
                watch.watch(i, c.sock, time.monotonic())
            except (OSError, ConnectionError, AssertionError, struct.error):
                send_errors += 1  # refused while sending: closed by the broker meanwhile
                watch.sent_at[i] = time.monotonic()
                watch.closed(i, time.monotonic())
            watch.poll(0)
            if i % 50 == 0:
                samples.append(rss_mb(pid))
        opened_in = time.monotonic() - t_open
        t_sent = time.monotonic()
        next_sample = t_sent
        while (now := time.monotonic()) < t_sent + 5.0:
            if now >= next_sample:
                samples.append(rss_mb(pid))
                next_sample += 0.25
            watch.poll(min(0.05, max(0.0, t_sent + 5.0 - now)))
        at5 = rss_mb(pid)
        watch.poll(0)
        peak = max(samples + [at5])
        closed = watch.closed_after
        still_open = len(socks) - len(closed)
        serving = sasl_api_versions_ms(b.sasl_port)
        watch.close()
        for s in socks:
            s.close()
        socks.clear()
        time.sleep(2)
        after_close = rss_mb(pid)
        closed_desc = (f"{len(closed)} of {args.connections} closed by the broker within 5 s"
                       + (f" (each within {max(closed.values()):.2f} s of its frame, median "
                          f"{statistics.median(closed.values()):.3f} s)" if closed else "")
                       + f", {still_open} still open 5 s after the last frame")
        print(f"  RSS {before:.0f} MB before, {at5:.0f} MB at 5 s (peak {peak:.0f} MB); {closed_desc}; "
              f"{args.connections} opened in {opened_in:.1f}s, handshake errors {handshake_errors}, "
              f"send errors {send_errors}; ApiVersions on the SASL listener meanwhile: {serving}; "
              f"{after_close:.0f} MB 2 s after closing", flush=True)
        rows.append((target, f"RSS growth, {label}",
                     f"+{at5 - before:.0f} MB at 5 s ({before:.0f} → {at5:.0f} MB; peak +{peak - before:.0f} MB)"))
        rows.append((target, f"connections, {label}", closed_desc
                     + (f"; {send_errors} sends failed" if send_errors else "")
                     + (f"; {handshake_errors} handshakes refused" if handshake_errors else "")))
        rows.append((target, f"ApiVersions on the SASL listener, {label}", serving))
        rows.append((target, f"RSS 2 s after closing, {label}", f"{after_close:.0f} MB"))
    finally:
        watch.close()
        for s in socks:
            s.close()
        stop_broker(b, d, args.keep)


# ------------------------------------------------------------------------------------------


def default_skein_bin() -> None:
    if os.environ.get("SKEIN_BROKER_BIN"):
        return
    repo = E2E_DIR.parent / "target" / "release" / "skein-broker"
    cache = Path.home() / ".cache" / "skein" / "cargo-target" / "release" / "skein-broker"
    if not repo.is_file() and cache.is_file():
        os.environ["SKEIN_BROKER_BIN"] = str(cache)


def skein_bin_desc() -> str:
    path = Path(os.environ.get("SKEIN_BROKER_BIN", E2E_DIR.parent / "target" / "release" / "skein-broker"))
    try:
        st = path.stat()
    except OSError:
        return f"{path} (missing)"
    built = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(st.st_mtime))
    return f"{path} (modified {built}, {st.st_size:,} bytes)"


def render(rows: list, args, started: str) -> str:
    out = [f"# Security probes (issue #41), {started}", "",
           f"Command: `e2e/.venv/bin/python e2e/bench/security_probes.py {' '.join(sys.argv[1:])}`  ",
           f"Machine: {os.cpu_count()} CPUs, load average at the end {load_avg()}  ",
           f"Skein binary: {skein_bin_desc()}  ",
           "Kafka: 4.1.1 from the cached jars, brokers.py's JVM flags (-Xms256m -Xmx1g, G1)", "",
           "| target | metric | value |", "| --- | --- | --- |"]
    out += [f"| {t} | {m} | {v} |" for t, m, v in rows]
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", choices=["skein", "kafka", "both"], default="both")
    ap.add_argument("--out", type=Path, help="write the markdown table here too")
    ap.add_argument("--probe", choices=["groups", "stalled", "all"], default="all")
    ap.add_argument("--topics", type=int, default=200)
    ap.add_argument("--members", type=int, default=20, help="group A's members")
    ap.add_argument("--seconds", type=float, default=20.0, help="each timed phase of probe 1")
    ap.add_argument("--connections", type=int, default=500)
    ap.add_argument("--sent-bytes", type=int, default=100_000, help="bytes of each stalled frame sent")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds after the start before RSS is read")
    ap.add_argument("--keep", action="store_true", help="keep the brokers' directories (logs)")
    args = ap.parse_args()
    args.seconds = min(max(args.seconds, 1.0), 120.0)
    args.connections = min(max(args.connections, 1), 5000)

    default_skein_bin()
    targets = ["skein", "kafka"] if args.target == "both" else [args.target]
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    rows: list = []
    for target in targets:
        if args.probe in ("groups", "all"):
            try:
                probe_groups(target, args, rows)
            except Exception as e:  # noqa: BLE001 - one failed probe does not hide the others
                print(f"[{target}] probe 1 failed: {type(e).__name__}: {e}", flush=True)
                rows.append((target, "probe 1 (group isolation)", f"failed: {type(e).__name__}: {str(e)[:300]}"))
        if args.probe in ("stalled", "all"):
            for announced in (500_000, 50_000_000):
                try:
                    probe_stalled(target, args, announced, rows)
                except Exception as e:  # noqa: BLE001
                    print(f"[{target}] probe 2 ({announced}) failed: {type(e).__name__}: {e}", flush=True)
                    rows.append((target, f"probe 2 ({announced:,} B frames)",
                                 f"failed: {type(e).__name__}: {str(e)[:300]}"))
    text = render(rows, args, started)
    print()
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
