"""Share groups (KIP-932) on a 3-broker cluster while brokers die: kafka-clients 4.4's
`KafkaShareConsumer` (`share-consume` in e2e/java, `Share.java`, with `--wall-clock` so deliveries
seen by different processes can be put in order and tied to the poll and commit that handled them)
and Kafka's `kafka-share-groups.sh`.

- A partition leader fails under load: a 6-partition topic (RF 3, `min.insync.replicas` 2), two
  members (one acknowledging explicitly with commitSync, one implicitly), each holding a poll's
  records 300 ms before acknowledging them (`--hold-ms`, so the kill finds records in flight),
  consume while an idempotent acks=all producer writes; the broker leading the most of the topic's
  partitions is SIGKILLed, kept down a few seconds (its partitions' new leaders awaited), started
  again, and a second batch is produced. Every acknowledged record is delivered and accepted at
  least once; nothing is delivered that was not produced (at its acknowledged partition and offset);
  a record delivered again comes with a higher delivery count (in wall-clock order across both
  members), or, on a partition whose leader crashed, at least the same one (Kafka does not persist
  an acquisition: KIP-932 records an Acquired record with count 1 as Available with count 0, so the
  new leader delivers it again with count 1); a record whose acceptance commitSync confirmed is
  never delivered again; no delivery count reaches the limit (so the group's LAG 0 at the end means
  accepted, not archived); both members live to the end and stop cleanly. The duplicates (how many,
  on which partitions, how many with an unchanged count) and the acknowledgement errors the members
  were told of are printed.
- The share coordinator moves: the victim is the broker leading the most partitions of a fresh
  6-partition topic (leaders made the preferred ones first), and the group is named so that the
  victim also keeps, in `__share_group_state`, the state of those partitions' share-partitions (key
  `group:topicId:partition`, Java `String.hashCode`, abs, modulo its partition count; the keys of
  one group and topic differ in their last character, so they land on neighbouring partitions whose
  leaders alternate: all six on one broker is impossible), while its group coordinator
  (`__consumer_offsets`, checked with `--describe --state`) is elsewhere. Every record of a first
  batch is accepted, then the victim is SIGKILLed: with it down, `--describe` (the new coordinator's
  ReadShareGroupStateSummary) shows the same START-OFFSETs and LAG 0, and a new member (its
  partitions now led by brokers that must read their state from the new coordinator) gets exactly
  the records produced after the kill; the victim started again and made the preferred leader once
  more (`kafka-leader-election --election-type PREFERRED`: it keeps the states again, reading back
  what the other coordinator wrote meanwhile, and leads its partitions again with state it must read
  back), yet another member gets exactly what was produced since.

Cluster: Skein's local platform (`skein-operator local --brokers 3`) or three Apache Kafka 4.4
KRaft nodes (E2E_TARGET=kafka; each broker and controller; `__share_group_state` with 3 replicas and
min ISR 2; a dead broker fenced after 4 s), both with the share-group timings of
test_share_groups.py and a 10 s acquisition lock. The test starts a killed broker again itself: on
Kafka by starting the node again; on Skein the local platform restarts a broker that dies at once,
so every broker is launched through a small shell script (`--launcher`) that waits while a hold
file exists: the test creates the file before the SIGKILL and removes it to let the broker start.
On Skein group configs need `skein.version` 5 (a new local cluster is at 1)."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import KafkaCluster, LocalCluster, port_accepts
from conftest import CLUSTER3_OVERRIDES, _active, _start
from sharecheck import out, parse_lines, produce, set_group_configs, share_tool, table, wait_running
from util import java_cmd, kafka_tool, run, wait_until

pytestmark = [pytest.mark.replication, pytest.mark.cli]

TARGET = os.environ.get("E2E_TARGET", "skein")
FEATURES = "org.apache.kafka.tools.FeatureCommand"
ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
# As test_share_groups.py: members get their partitions within a second or two, a dead one is gone
# after 6 s.
OVERRIDES = {
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.session.timeout.ms": "6000",
    "group.share.session.timeout.ms": "6000",
}
PARTITIONS = 6
# Kafka's default share.delivery.count.limit.
DELIVERY_LIMIT = 5
HOLD_MS = 300
LOCK_OVERRIDES = {"group.share.min.record.lock.duration.ms": "5000", "group.share.record.lock.duration.ms": "10000"}
# Kafka only: a dead broker fenced (and its partitions' leadership moved) after 4 s, not 9.
KAFKA_OVERRIDES = {"broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "500"}
HOLD_SCRIPT = """#!/bin/sh
# skein-operator local --launcher "/bin/sh THIS {id}": $1 is the broker id, the rest its command line.
id=$1
shift
while [ -e "%s/hold-$id" ]; do sleep 0.1; done
exec "$@"
"""


class Cluster:
    """The target's three brokers (ids 1-3) with a kill and a later start that work on both."""

    def __init__(self, c, hold_dir: Path | None):
        self.c = c
        self.hold_dir = hold_dir
        self.down: set[int] = set()

    @property
    def bootstrap(self) -> str:
        return self.c.bootstrap

    def client_conf(self) -> dict[str, str]:
        return {**self.c.client_conf(), "log_level": 3}

    def admin(self) -> AdminClient:
        return AdminClient(self.client_conf())

    def kill(self, b: int) -> None:
        """SIGKILL broker b; it stays down until start(b)."""
        self.down.add(b)
        if TARGET == "kafka":
            self.c.nodes[b - 1].kill9()
            return
        (self.hold_dir / f"hold-{b}").touch()
        self.c.signal_broker(b, signal.SIGKILL)
        wait_until(lambda: not port_accepts(self.c.kafka_port + b - 1), 10, f"broker {b}'s port closed")

    def start(self, b: int) -> None:
        self.down.discard(b)
        if TARGET == "kafka":
            self.c.nodes[b - 1].start()
            return
        (self.hold_dir / f"hold-{b}").unlink(missing_ok=True)
        wait_until(lambda: port_accepts(self.c.kafka_port + b - 1), 30, f"broker {b} listening again")

    def heal(self) -> None:
        """Starts every broker a failed test left down."""
        for b in sorted(self.down):
            self.start(b)

    def partitions(self, topic: str) -> dict[int, dict]:
        md = self.admin().list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return {}
        return {p.id: {"leader": p.leader, "isr": sorted(p.isrs), "replicas": list(p.replicas)}
                for p in md.partitions.values()}

    def leaders(self, topic: str) -> dict[int, int]:
        return {p: d["leader"] for p, d in self.partitions(topic).items()}

    def wait_whole(self, topics: list[str], timeout: float = 90) -> None:
        """Every partition of the topics led, with all 3 replicas in sync."""
        def whole():
            for t in topics:
                d = self.partitions(t)
                if not d or not all(p["leader"] >= 0 and len(p["isr"]) == 3 for p in d.values()):
                    return False
            return True
        wait_until(whole, timeout, f"every replica of {topics} in sync")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"{TARGET}-share-cluster")
    if TARGET == "kafka":
        c = KafkaCluster(tmp / "cluster", 3, {**OVERRIDES, **LOCK_OVERRIDES, **KAFKA_OVERRIDES})
        hold = None
    else:
        hold = tmp / "hold"
        hold.mkdir()
        script = tmp / "hold-launcher.sh"
        script.write_text(HOLD_SCRIPT % hold)
        c = LocalCluster(tmp / "cluster", 3, {**CLUSTER3_OVERRIDES, **OVERRIDES, **LOCK_OVERRIDES},
                         launcher=f"/bin/sh {script} {{id}}")
    _start(c)
    try:
        if TARGET == "skein":
            kafka_tool(FEATURES, "--bootstrap-server", c.bootstrap, "upgrade", "--feature", "skein.version=5")
        yield Cluster(c, hold)
    finally:
        if hold is not None:
            for f in hold.iterdir():
                f.unlink()
        c.stop()
        if c in _active:
            _active.remove(c)


# ------------------------------------------------------------------------------------------
# helpers


def java_partition(key: str, partitions: int) -> int:
    """Kafka's placement of a coordinator key: Utils.abs(key.hashCode()) % partitions."""
    h = 0
    for ch in key:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def topic_id(c: Cluster, topic: str) -> str:
    """The topic's id as Kafka prints it (URL-safe base64 without padding)."""
    a = c.admin()  # kept until the future is done: a destroyed client fails its futures
    d = a.describe_topics(TopicCollection([topic]))[topic].result(30)
    u = d.topic_id
    raw = (u.get_most_significant_bits() & (2**64 - 1)).to_bytes(8, "big") + \
        (u.get_least_significant_bits() & (2**64 - 1)).to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def create_topic(c: Cluster, topic: str) -> None:
    a = c.admin()  # kept until the future is done: a destroyed client fails its futures
    a.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[topic].result(60)
    c.wait_whole([topic])


class Feeder(threading.Thread):
    """An idempotent acks=all producer writing k-a<i> / v-a<i> at `rate` per second until
    `second` is set (and at least `min_first` records), then `n_second` records k-b<i> / v-b<i>;
    remembers where each acknowledged record landed."""

    def __init__(self, c: Cluster, topic: str, rate: float, min_first: int, n_second: int):
        super().__init__(daemon=True)
        self.c, self.topic, self.rate, self.min_first, self.n_second = c, topic, rate, min_first, n_second
        self.second = threading.Event()
        self.stop_now = threading.Event()
        self.acked: dict[tuple[int, int], tuple[str, str]] = {}
        self.errors: list[str] = []
        self.sent = {"a": 0, "b": 0}
        self.left = -1

    def cb(self, err, msg):
        if err:
            self.errors.append(f"{msg.key()!r}: {err}")
        else:
            self.acked[(msg.partition(), msg.offset())] = (msg.key().decode(), msg.value().decode())

    def run(self):
        p = Producer({**self.c.client_conf(), "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                      "message.timeout.ms": 120_000})
        start = time.monotonic()
        n = 0

        def send(tag: str):
            nonlocal n
            i = self.sent[tag]
            p.produce(self.topic, key=f"k-{tag}{i}", value=f"v-{tag}{i}", on_delivery=self.cb)
            self.sent[tag] += 1
            n += 1
            p.poll(0)
            # the pace: n records by start + n / rate
            delay = start + n / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)

        while not self.stop_now.is_set() and (not self.second.is_set() or self.sent["a"] < self.min_first):
            send("a")
        while not self.stop_now.is_set() and self.sent["b"] < self.n_second:
            send("b")
        self.left = p.flush(150)


class Member:
    """A share-consume member in the background until its stop file, printing wall clocks."""

    def __init__(self, c: Cluster, group: str, topic: str, client_id: str, workdir: Path, ack_mode: str,
                 hold_ms: int = 0):
        self.name = client_id
        self.stop_file = workdir / f"{client_id}.stop"
        self.out_path = workdir / f"{client_id}.out"
        self.err_path = workdir / f"{client_id}.err"
        args = ["share-consume", "--bootstrap", c.bootstrap, "--group", group, "--topic", topic,
                "--max-records", "1000000000", "--timeout-ms", "170000", "--ack-mode", ack_mode,
                "--client-id", client_id, "--stop-file", str(self.stop_file), "--wall-clock", "true",
                "--hold-ms", str(hold_ms)]
        with open(self.out_path, "wb") as o, open(self.err_path, "wb") as e:
            self.proc = subprocess.Popen(java_cmd(*args), stdout=o, stderr=e, stdin=subprocess.DEVNULL)

    def records(self) -> list[dict]:
        return parse_lines(self.out_path.read_text(errors="replace"))[0]

    def check_running(self) -> None:
        assert self.proc.poll() is None, f"{self.name} exited with {self.proc.returncode}:\n{self.log()}"

    def stop(self, timeout: float = 60) -> tuple[list[dict], dict | None, list[dict], int | None]:
        self.stop_file.touch()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        return (*parse_lines(self.out_path.read_text(errors="replace")), self.proc.returncode)

    def log(self) -> str:
        return (self.out_path.read_text(errors="replace")[-2000:] + "\n"
                + self.err_path.read_text(errors="replace")[-4000:])


def offsets_view(c: Cluster, group: str) -> dict[int, tuple[int, int]]:
    """kafka-share-groups --describe: {partition: (START-OFFSET, LAG)}; '-' is -1."""
    text = out(share_tool(c, "--describe", "--group", group))
    rows = table(text)
    assert rows and list(rows[0]) == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], text
    num = lambda s: int(s) if s.lstrip("-").isdigit() else -1  # noqa: E731
    return {int(r["PARTITION"]): (num(r["START-OFFSET"]), num(r["LAG"])) for r in rows}


def wait_lag_zero(c: Cluster, group: str, members: list[Member] | None = None, timeout: float = 60):
    def caught_up():
        v = offsets_view(c, group)
        return v if sorted(v) == list(range(PARTITIONS)) and all(lag == 0 for _, lag in v.values()) else None
    return wait_running(members or [], caught_up, timeout, f"LAG 0 on every partition of {group}")


def share_consume(c: Cluster, group: str, topic: str, n: int, drain_ms: int) -> tuple[list[dict], dict]:
    """One explicit-acknowledgement member until it accepted n records and drained drain_ms more."""
    args = ["share-consume", "--bootstrap", c.bootstrap, "--group", group, "--topic", topic, "--max-records",
            str(n), "--timeout-ms", "60000", "--ack-mode", "explicit", "--drain-ms", str(drain_ms)]
    r = run(java_cmd(*args), timeout=120, what="java share-consume")
    recs, last, errs = parse_lines(r.stdout.decode(errors="replace"))
    assert last is not None, f"no summary from share-consume:\n{r.stdout.decode()[-3000:]}\n{r.stderr.decode()[-3000:]}"
    assert not errs and last["ack_errors"] == 0, f"acknowledgement errors: {errs}"
    return recs, last


def assert_exactly(recs: list[dict], want: dict[tuple[int, int], tuple[str, str]], what: str) -> None:
    """recs are exactly the records of want, each delivered once (delivery count 1) and accepted."""
    got = Counter((r["p"], r["o"]) for r in recs)
    foreign = [r for r in recs if (r["p"], r["o"]) not in want]
    assert not foreign, f"{what}: {len(foreign)} records delivered that it must not get, e.g. {foreign[:5]}"
    missing = sorted(set(want) - set(got))
    assert not missing, f"{what}: {len(missing)} records never delivered, e.g. {missing[:10]}"
    twice = {k: v for k, v in got.items() if v > 1}
    assert not twice, f"{what}: delivered more than once: {list(twice.items())[:10]}"
    for r in recs:
        assert (r["k"], r["v"]) == want[(r["p"], r["o"])], f"{what}: {r} != produced {want[(r['p'], r['o'])]}"
        assert r["dc"] == 1 and r["a"] == "accept", f"{what}: {r}"


def ack_error_kinds(errs: list[dict]) -> Counter:
    return Counter(e["ack_error"].split(":", 1)[0] for e in errs)


# ------------------------------------------------------------------------------------------
# tests


def test_partition_leader_failover_under_two_members_every_record_accepted(cluster, topic, tmp_path):
    c = cluster
    c.heal()
    group = f"share-failover-{uuid.uuid4().hex[:6]}"
    create_topic(c, topic)
    set_group_configs(c, group, "share.auto.offset.reset=earliest")

    # Each holds what a poll brought for 300 ms before acknowledging it: the kill finds records in
    # flight at the dying leader.
    members = [Member(c, group, topic, "share-explicit", tmp_path, "explicit", hold_ms=HOLD_MS),
               Member(c, group, topic, "share-implicit", tmp_path, "implicit", hold_ms=HOLD_MS)]
    feeder = Feeder(c, topic, rate=150, min_first=600, n_second=900)
    results = None
    try:
        feeder.start()
        # Mid-run: both members are getting records and the producer is well into its first batch.
        wait_running(members, lambda: all(m.records() for m in members) and feeder.sent["a"] >= 300, 90,
                     "both members delivering records")
        leaders = c.leaders(topic)
        victim = Counter(leaders.values()).most_common(1)[0][0]
        led = sorted(p for p, b in leaders.items() if b == victim)
        t0 = time.monotonic()
        c.kill(victim)
        wait_running(members, lambda: all(c.leaders(topic).get(p, -1) not in (-1, victim) for p in led), 60,
                     f"new leaders for {topic} partitions {led}")
        failover_s = time.monotonic() - t0
        time.sleep(max(0.0, 4 - failover_s))
        c.start(victim)
        down_s = time.monotonic() - t0
        feeder.second.set()
        wait_running(members, lambda: not feeder.is_alive(), 150, "the producer done")
        assert feeder.left == 0 and not feeder.errors, \
            f"{feeder.left} records not acknowledged, errors: {feeder.errors[:10]}"
        acked = feeder.acked
        assert len(acked) == feeder.sent["a"] + feeder.sent["b"], (len(acked), feeder.sent)

        def accepted_all():
            ok = {(r["p"], r["o"]) for m in members for r in m.records() if r["a"] in ("accept", "implicit")}
            return ok >= set(acked)
        wait_running(members, accepted_all, 120, f"all {len(acked)} acknowledged records delivered and accepted")
        # Every record in a final state on every partition: accepted (no count reaches the limit).
        wait_lag_zero(c, group, members, timeout=90)
        c.wait_whole([topic])
    finally:
        feeder.stop_now.set()
        results = [m.stop() for m in members]
        logs = [m.log() for m in members]
        c.heal()

    delivered: list[dict] = []
    ack_errors: list[dict] = []
    for (recs, summary, errs, rc), m, log in zip(results, members, logs):
        assert summary is not None and summary.get("summary") and summary["stopped_by"] == "stop-file" \
            and rc == 0, f"{m.name} did not run to its stop file (exit {rc}): {summary}\n{log}"
        delivered += [dict(r, member=m.name) for r in recs]
        ack_errors += errs
        if m.name == "share-explicit":
            explicit_errors = errs
        assert recs, f"{m.name} got no record"

    foreign = [r for r in delivered if (r["p"], r["o"]) not in acked or (r["k"], r["v"]) != acked[(r["p"], r["o"])]]
    assert not foreign, f"{len(foreign)} deliveries of records never produced there, e.g. {foreign[:5]}"
    by: dict[tuple[int, int], list[dict]] = {}
    for r in delivered:
        by.setdefault((r["p"], r["o"]), []).append(r)
    missing = sorted(k for k in acked if not any(r["a"] in ("accept", "implicit") for r in by.get(k, [])))
    assert not missing, f"{len(missing)} acknowledged records never delivered and accepted, e.g. {missing[:10]}"
    # Delivery counts go up with every delivery, except across the crash of the partition's leader:
    # an acquisition is not persisted (KIP-932: an Acquired record with delivery count 1 is recorded
    # as Available with count 0), so the new leader may deliver it again with the same count.
    moved = set(led) | {p for p, b in c.leaders(topic).items() if leaders.get(p) != b}
    for k, v in by.items():
        v.sort(key=lambda r: r["w"])
        counts = [r["dc"] for r in v]
        ok = all(a < b for a, b in zip(counts, counts[1:])) if k[0] not in moved else \
            all(a <= b for a, b in zip(counts, counts[1:]))
        assert ok, f"record {k}: delivery counts not increasing (partition leader changed: {k[0] in moved}): " \
            f"{[(r['member'], r['dc'], r['a'], r['w']) for r in v]}"
        assert counts[-1] < DELIVERY_LIMIT, f"record {k} reached the delivery limit: {v}"

    # An acceptance the broker confirmed (the explicit member's commitSync named no error for that
    # poll and partition) is durable: that record never comes again, whichever broker leads.
    failed = {(e["n"], e["p"]) for e in explicit_errors if e.get("via") == "commitSync"}
    for r in delivered:
        if r["member"] == "share-explicit" and r["a"] == "accept" and (r["n"], r["p"]) not in failed:
            later = [x for x in by[(r["p"], r["o"])] if x["w"] > r["w"]]
            assert not later, f"record {r['p']}/{r['o']} accepted and committed at {r['w']} " \
                f"(poll {r['n']}) delivered again: {later}"

    again = {k: v for k, v in by.items() if len(v) > 1}
    extra = sum(len(v) - 1 for v in again.values())
    per_partition = Counter(k[0] for k in again)
    same = sum(1 for v in again.values() for a, b in zip(v, v[1:]) if a["dc"] == b["dc"])
    print(f"\nbroker {victim} (leader of partitions {led}) killed: new leaders after {failover_s:.1f} s, "
          f"started again after {down_s:.1f} s; {len(acked)} records ({feeder.sent['a']} + {feeder.sent['b']}), "
          f"{len(delivered)} deliveries: {len(again)} records delivered more than once ({extra} extra deliveries; "
          f"by partition {dict(sorted(per_partition.items()))}; {same} with an unchanged delivery count; "
          f"delivery counts "
          f"{dict(sorted(Counter(r['dc'] for r in delivered).items()))}); acknowledgement errors told to the "
          f"members: {dict(ack_error_kinds(ack_errors))}")


def test_accepted_records_stay_accepted_when_the_share_coordinator_moves(cluster, topic):
    c = cluster
    c.heal()
    # __consumer_offsets and __share_group_state exist (made by a first share group) and are led by
    # their preferred replicas (the first test's kill moved leaders).
    if not {"__consumer_offsets", "__share_group_state"} <= set(c.admin().list_topics(timeout=10).topics):
        warm = f"{topic}-warm"
        create_topic(c, warm)
        run(java_cmd("share-consume", "--bootstrap", c.bootstrap, "--group", f"warm-{uuid.uuid4().hex[:6]}",
                     "--topic", warm, "--max-records", "1", "--timeout-ms", "6000"), timeout=60, what="warm-up")
    create_topic(c, topic)
    internal = ["__consumer_offsets", "__share_group_state"]
    c.wait_whole(internal)
    kafka_tool(ELECTION, "--bootstrap-server", c.bootstrap, "--election-type", "PREFERRED",
               "--all-topic-partitions", check=False)

    def preferred_lead(topics):
        return all(d["leader"] == d["replicas"][0] for t in topics for d in c.partitions(t).values())
    wait_until(lambda: preferred_lead(internal + [topic]), 30, "preferred leaders everywhere")

    # The victim leads the most partitions of the topic; the group is named so that the victim keeps
    # the state of the share-partitions of those partitions (and, as it comes, of others: the keys of
    # one group and topic differ in their last character, so they land on neighbouring partitions of
    # __share_group_state, whose leaders alternate) and is not the group coordinator.
    data = c.leaders(topic)
    state = c.leaders("__share_group_state")
    offsets = c.leaders("__consumer_offsets")
    victim = max(sorted(set(state.values())), key=lambda b: sum(1 for x in data.values() if x == b))
    led = sorted(p for p, b in data.items() if b == victim)
    tid = topic_id(c, topic)
    base = f"share-coord-{uuid.uuid4().hex[:6]}"
    for i in range(100_000):
        group = f"{base}-{i}"
        if offsets[java_partition(group, len(offsets))] == victim:
            continue
        slots = {p: java_partition(f"{group}:{tid}:{p}", len(state)) for p in range(PARTITIONS)}
        if all(state[slots[p]] == victim for p in led):
            break
    else:
        raise AssertionError(f"no group name puts the share-partitions of {led} at broker {victim}: "
                             f"__share_group_state leaders {state}, {topic} leaders {data}")
    kept = sorted(p for p, s in slots.items() if state[s] == victim)
    set_group_configs(c, group, "share.auto.offset.reset=earliest")

    # Before: every record accepted, the coordinator keeps that.
    first = produce(c, topic, 300, "a", flush_s=60)
    recs, summary = share_consume(c, group, topic, len(first), drain_ms=1000)
    assert_exactly(recs, first, "the first member")
    ends = {p: max(o + 1 for (pp, o) in first if pp == p) for p in range(PARTITIONS)}
    before = wait_lag_zero(c, group)
    state_text = out(share_tool(c, "--describe", "--group", group, "--state"))
    rows = table(state_text)
    coordinator = offsets[java_partition(group, len(offsets))]
    assert rows and rows[0].get("(ID)") == f"({coordinator})" != f"({victim})", \
        f"the group coordinator is not broker {coordinator}, as its __consumer_offsets partition says:\n{state_text}"

    c.kill(victim)
    try:
        wait_until(lambda: all(c.leaders("__share_group_state").get(slots[p], -1) not in (-1, victim)
                               for p in kept)
                   and all(c.leaders(topic).get(p, -1) not in (-1, victim) for p in led),
                   60, f"new leaders for __share_group_state {[slots[p] for p in kept]} and {topic} {led}")
        # The new coordinator read the states back: nothing left to deliver.
        during = wait_lag_zero(c, group)
        assert {p: s for p, (s, _) in during.items()} == {p: s for p, (s, _) in before.items()}, (before, during)
        second = produce(c, topic, 120, "b", flush_s=60)
        recs, summary = share_consume(c, group, topic, len(second), drain_ms=2000)
        assert_exactly(recs, second, f"a member while broker {victim} is down")
    finally:
        c.heal()

    # Back, and the preferred leader again of the states and of its partitions.
    c.wait_whole(internal + [topic])
    kafka_tool(ELECTION, "--bootstrap-server", c.bootstrap, "--election-type", "PREFERRED",
               "--all-topic-partitions", check=False)
    wait_until(lambda: all(c.leaders("__share_group_state").get(slots[p]) == victim for p in kept)
               and all(c.leaders(topic).get(p) == victim for p in led), 30,
               f"broker {victim} leading __share_group_state {[slots[p] for p in kept]} and {topic} {led} again")
    third = produce(c, topic, 120, "c", flush_s=60)
    recs, summary = share_consume(c, group, topic, len(third), drain_ms=2000)
    assert_exactly(recs, third, f"a member after broker {victim} came back")
    after = wait_lag_zero(c, group)
    produced = {**first, **second, **third}
    for p in range(PARTITIONS):
        end = max(o + 1 for (pp, o) in produced if pp == p)
        assert 0 <= after[p][0] <= end, (p, after, end)
    print(f"\nbroker {victim} (state of the share-partitions of {topic} {kept} in __share_group_state "
          f"{[slots[p] for p in kept]}, leader of {topic} {led}) killed; START-OFFSET before {before}, "
          f"while down {during}, after {after}; first batch ends {ends}")
