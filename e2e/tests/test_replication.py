"""Replication across processes: `skein-operator local --brokers 3` (the controller plus three
skein-broker processes), real clients, brokers killed with SIGKILL, hung with SIGSTOP.

What must hold: every record a producer had acknowledged with acks=all is read back exactly once,
at its acknowledged offset, in order per partition, whatever happened to the brokers; a partition
whose ISR is below min.insync.replicas refuses acks=all writes; with unclean election disabled a
partition whose every in-sync replica is gone goes offline instead of electing a stale replica.
"""

from __future__ import annotations

import re
import signal
import threading
import time

import pytest

import util
from brokers import LocalCluster
from conftest import TARGET, _active

pytestmark = [
    pytest.mark.replication,
    pytest.mark.skipif(TARGET != "skein", reason="runs Skein's own local platform (skein-operator local)"),
]

OVERRIDES = {
    "replica.lag.time.max.ms": "2000",
    "broker.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(tmp_path / "cluster", 3, OVERRIDES)
    _active.append(c)
    c.start()
    yield c
    for i in range(1, 4):  # a test may leave a broker stopped
        pid = c.broker_pid(i)
        if pid:
            try:
                import os
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    code = c.stop()
    _active.remove(c)
    assert code == 0, f"skein-operator local exited with {code}:\n{c.log_tail(60)}"


def admin_client(c: LocalCluster, via: list[int] | None = None):
    """An AdminClient for the cluster, or one that only talks to brokers `via` (a hung broker
    would stall requests sent to it). Kept per cluster: futures of a destroyed AdminClient fail."""
    from confluent_kafka.admin import AdminClient
    bootstrap = c.bootstrap if via is None else ",".join(c.addr(b) for b in via)
    cache = c.__dict__.setdefault("_admins", {})
    if bootstrap not in cache:
        cache[bootstrap] = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    return cache[bootstrap]


def create_topic(c: LocalCluster, topic: str, partitions: int, rf: int = 3, min_isr: int = 2):
    from confluent_kafka.admin import NewTopic
    fs = admin_client(c).create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=rf,
                  config={"min.insync.replicas": str(min_isr)})], operation_timeout=30)
    fs[topic].result(timeout=60)
    util.wait_until(lambda: all(p["leader"] >= 0 and len(p["isr"]) == rf
                                for p in describe(c, topic).values()), 60, f"{topic} fully in sync")


def describe(c: LocalCluster, topic: str, via: list[int] | None = None) -> dict[int, dict]:
    md = admin_client(c, via).list_topics(topic, timeout=10).topics[topic]
    if md.error is not None:
        return {}
    return {p.id: {"leader": p.leader, "isr": sorted(p.isrs), "replicas": sorted(p.replicas)}
            for p in md.partitions.values()}


def wait_in_sync(c: LocalCluster, topic: str, timeout: float = 90):
    util.wait_until(lambda: (d := describe(c, topic)) and all(
        p["leader"] >= 0 and len(p["isr"]) == len(p["replicas"]) for p in d.values()),
        timeout, f"every replica of {topic} back in sync")


def consume_all(c: LocalCluster, topic: str, partitions: int) -> dict[int, list[tuple[int, bytes]]]:
    """(offset, value) per partition, from the start to the high watermark."""
    from confluent_kafka import Consumer, TopicPartition
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"verify-{time.time_ns()}",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 3})
    try:
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        ends = {}
        for p in range(partitions):
            ends[p] = util.high_watermark(cons, topic, p)
        cons.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 120
        while any((out[p][-1][0] + 1 if out[p] else 0) < ends[p] for p in ends):
            assert time.monotonic() < deadline, "timed out reading the topic back"
            m = cons.poll(1.0)
            if m is None or m.error():
                continue
            out[m.partition()].append((m.offset(), m.value()))
        return out
    finally:
        cons.close()


def verify_acked(acked: dict[bytes, tuple[int, int]], got: dict[int, list[tuple[int, bytes]]]):
    """Every acknowledged value exactly once, at its acknowledged partition and offset; values
    of each producer appear in the order they were sent within a partition."""
    where: dict[bytes, list[tuple[int, int]]] = {}
    for p, recs in got.items():
        offs = [o for o, _ in recs]
        assert offs == sorted(set(offs)), f"partition {p}: offsets not strictly increasing"
        for o, v in recs:
            where.setdefault(v, []).append((p, o))
    lost = [v for v in acked if v not in where]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}"
    dup = {v: w for v, w in where.items() if len(w) > 1}
    assert not dup, f"{len(dup)} records duplicated, e.g. {list(dup.items())[:5]}"
    # librdkafka may report an idempotent producer's message delivered
    # without an offset (None): it concluded from the producer's sequence
    # numbers that a batch whose answer it never got was written, without
    # knowing where (e2e/chaos sees the same). Such records are checked for
    # loss and duplication only.
    moved = {v: (pos, where[v][0]) for v, pos in acked.items() if pos[1] is not None and where[v][0] != pos}
    assert not moved, f"{len(moved)} records not at their acknowledged offset, e.g. {list(moved.items())[:5]}"
    for p, recs in got.items():
        seqs = [int(v.split(b"-")[1]) for _, v in recs if v.startswith(b"rec-")]
        assert seqs == sorted(seqs), f"partition {p}: records out of send order"


def leader_of(c: LocalCluster, topic: str, partition: int) -> int:
    util.wait_until(lambda: describe(c, topic).get(partition, {}).get("leader", -1) >= 0, 60,
                    f"{topic}-{partition} has a leader")
    return describe(c, topic)[partition]["leader"]


class ConfluentWriter(threading.Thread):
    """An idempotent acks=all confluent-kafka producer writing `rec-<n>` values until stopped;
    remembers where each acknowledged record landed and when."""

    def __init__(self, c: LocalCluster, topic: str, partitions: int):
        super().__init__(daemon=True)
        from confluent_kafka import Producer
        self.p = Producer({"bootstrap.servers": c.bootstrap, "enable.idempotence": True, "acks": "all",
                           "linger.ms": 2, "message.timeout.ms": 120000, "log_level": 3})
        self.topic, self.partitions = topic, partitions
        self.acked: dict[bytes, tuple[int, int]] = {}
        # (send time, ack time) of every acknowledged record, per partition
        self.ack_times: dict[int, list[tuple[float, float]]] = {p: [] for p in range(partitions)}
        self.errors: list[str] = []
        self.halt = threading.Event()
        self.sent = 0

    def _cb(self, sent_at, err, msg):
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked[msg.value()] = (msg.partition(), msg.offset())
            self.ack_times[msg.partition()].append((sent_at, time.monotonic()))

    def run(self):
        while not self.halt.is_set():
            v = f"rec-{self.sent:08d}".encode()
            try:
                sent_at = time.monotonic()
                self.p.produce(self.topic, v, partition=self.sent % self.partitions,
                               on_delivery=lambda e, m, t=sent_at: self._cb(t, e, m))
                self.sent += 1
            except BufferError:
                pass
            self.p.poll(0.002)
        self.p.flush(150)


def kill_leaders(c: LocalCluster, topic: str, rounds: int, partition: int = 0) -> list[tuple[float, int]]:
    """SIGKILL the leader of `partition` `rounds` times (the local platform restarts it), each time
    after the whole topic is back in sync. Returns (kill time, killed broker)."""
    kills = []
    for _ in range(rounds):
        wait_in_sync(c, topic)
        time.sleep(1.0)
        victim = leader_of(c, topic, partition)
        c.signal_broker(victim, signal.SIGKILL)
        kills.append((time.monotonic(), victim))
        util.wait_until(lambda v=victim: leader_of(c, topic, partition) != v, 30, "a new leader")
    wait_in_sync(c, topic)
    return kills


def test_confluent_idempotent_acks_all_survives_leader_kills(cluster, topic):
    partitions = 3
    create_topic(cluster, topic, partitions)
    w = ConfluentWriter(cluster, topic, partitions)
    w.start()
    util.wait_until(lambda: len(w.acked) > 500, 60, "first acknowledgements")
    kills = kill_leaders(cluster, topic, rounds=5)
    time.sleep(2)
    w.halt.set()
    w.join(200)
    assert not w.is_alive()
    assert len(w.acked) > 2000, f"only {len(w.acked)} records acknowledged"
    # failover: kill -> acknowledgement of the first write sent to that partition afterwards
    gaps = []
    for t, _ in kills:
        after = [a for s, a in w.ack_times[0] if s > t]
        assert after, "no acknowledged write after a kill"
        gaps.append(min(after) - t)
    print(f"\nfailover (leader SIGKILL -> next acks=all ack on its partition): "
          f"{', '.join(f'{g:.2f}s' for g in gaps)}; median {sorted(gaps)[len(gaps) // 2]:.2f}s; "
          f"{len(w.acked)} acked, {w.sent} sent, {len(w.errors)} delivery errors")
    got = consume_all(cluster, topic, partitions)
    verify_acked(w.acked, got)


def test_java_idempotent_acks_all_survives_leader_kills(cluster, topic, tmp_path):
    import subprocess
    partitions = 3
    create_topic(cluster, topic, partitions)
    n = 24000
    inp = tmp_path / "in.tsv"
    with open(inp, "w") as f:
        for i in range(n):
            f.write(f"-\t{f'rec-{i:08d}'.encode().hex()}\t-\t-\n")
    out = tmp_path / "acked.jsonl"
    args = ["produce", "--bootstrap", cluster.bootstrap, "--topic", topic, "--input", str(inp),
            "--out", str(out), "--acks", "all", "--idempotence", "true", "--rate", "1000",
            "--allow-errors", "true"]
    proc = subprocess.Popen(util.java_cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        time.sleep(4)
        kill_leaders(cluster, topic, rounds=4, partition=1)
        stdout, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stdout.decode(errors="replace")[-3000:]
    acked = {}
    for d in util.read_jsonl(out):
        if d["p"] >= 0:
            acked[f"rec-{d['i']:08d}".encode()] = (d["p"], d["o"])
    assert len(acked) > n * 0.9, f"only {len(acked)} of {n} acknowledged"
    verify_acked(acked, consume_all(cluster, topic, partitions))


def _leader_only_producer(cluster, topic, leader):
    from confluent_kafka import Producer

    def produce(acks: str, value: bytes, timeout: float = 15):
        # only the leader: the hung followers would stall metadata requests sent to them
        p = Producer({"bootstrap.servers": cluster.addr(leader), "acks": acks,
                      "message.timeout.ms": int(timeout * 1000),
                      "retries": 0 if acks == "all" else 5, "log_level": 3})
        res = {}
        p.produce(topic, value, partition=0, on_delivery=lambda e, m: res.update(err=e, msg=m))
        p.flush(timeout + 5)
        return res
    return produce


def _high_watermark(cluster, topic, via):
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": cluster.addr(via), "group.id": f"hw-{time.time_ns()}", "log_level": 3})
    try:
        return util.high_watermark(c, topic, 0)
    finally:
        c.close()


def test_isr_below_min_insync_refuses_acks_all_then_offline_without_unclean_election(cluster, topic):
    """min.insync.replicas=1: the ISR shrinks to the leader alone without anyone becoming an
    eligible leader replica (the ISR is still at min ISR, the followers may lack what it commits);
    when that last in-sync replica hangs too, no clean leader exists and the partition goes
    offline instead of electing a stale replica; it leads again on return, losing nothing."""
    create_topic(cluster, topic, 1, min_isr=1)
    leader = leader_of(cluster, topic, 0)
    others = [b for b in (1, 2, 3) if b != leader]
    produce = _leader_only_producer(cluster, topic, leader)

    r = produce("all", b"before")
    assert r["err"] is None, r
    # hang both followers: they stop fetching and heartbeating; the leader shrinks the ISR to itself
    for b in others:
        cluster.signal_broker(b, signal.SIGSTOP)
    util.wait_until(lambda: describe(cluster, topic, [leader])[0]["isr"] == [leader], 60,
                    "ISR shrunk to the leader")
    r = produce("all", b"alone")
    assert r["err"] is None, f"min ISR 1: the leader alone acknowledges acks=all, got {r}"
    acked_offset = r["msg"].offset()
    # now the only in-sync replica hangs and the out-of-sync ones come back: no clean leader exists
    cluster.signal_broker(leader, signal.SIGSTOP)
    for b in others:
        cluster.signal_broker(b, signal.SIGCONT)
    util.wait_until(lambda: describe(cluster, topic, others)[0]["leader"] == -1, 60, "partition offline")
    time.sleep(3)
    assert describe(cluster, topic, others)[0]["leader"] == -1, "a replica outside the ISR was elected"
    # the in-sync replica returns: it leads again and nothing acknowledged is lost
    cluster.signal_broker(leader, signal.SIGCONT)
    wait_in_sync(cluster, topic)
    got = consume_all(cluster, topic, 1)[0]
    assert [v for _, v in got] == [b"before", b"alone"], got
    assert (acked_offset, b"alone") in got


def test_below_min_insync_nothing_is_committed_and_an_eligible_replica_takes_over(cluster, topic):
    """min.insync.replicas=2, Kafka 4.1's semantics (KIP-966, eligible leader replicas): once the
    ISR is the leader alone, acks=all is refused and the high watermark stands still, so an
    acks=1 write is stored but not committed; the followers that left the ISR hold everything
    committed and may lead cleanly. When the leader hangs, one of them takes over and takes
    writes; the leader returns as a follower and drops the uncommitted write."""
    create_topic(cluster, topic, 1, min_isr=2)
    leader = leader_of(cluster, topic, 0)
    others = [b for b in (1, 2, 3) if b != leader]
    produce = _leader_only_producer(cluster, topic, leader)

    r = produce("all", b"before")
    assert r["err"] is None, r
    for b in others:
        cluster.signal_broker(b, signal.SIGSTOP)
    util.wait_until(lambda: describe(cluster, topic, [leader])[0]["isr"] == [leader], 60,
                    "ISR shrunk to the leader")
    r = produce("all", b"refused")
    assert r["err"] is not None and r["err"].code() in (19, 20), f"expected NOT_ENOUGH_REPLICAS, got {r}"
    r = produce("1", b"uncommitted")
    assert r["err"] is None, r
    assert _high_watermark(cluster, topic, leader) == 1, "the high watermark moved below min ISR"
    cluster.signal_broker(leader, signal.SIGSTOP)
    for b in others:
        cluster.signal_broker(b, signal.SIGCONT)
    util.wait_until(lambda: describe(cluster, topic, others)[0]["leader"] in others, 60,
                    "an eligible leader replica leads")
    # The old leader stays stopped until the new one takes writes: a fetch its followers sent
    # before they were stopped waits, unanswered, in its socket; answered on SIGCONT while a
    # follower had not applied its new role yet, it would carry the uncommitted record into that
    # follower's log before it leads (legitimately: a leader's log is the truth).
    new_leader = describe(cluster, topic, others)[0]["leader"]
    write = _leader_only_producer(cluster, topic, new_leader)
    util.wait_until(lambda: write("all", b"after", timeout=5)["err"] is None, 60,
                    "the new leader takes acks=all writes")
    cluster.signal_broker(leader, signal.SIGCONT)
    wait_in_sync(cluster, topic)
    values = [v for _, v in consume_all(cluster, topic, 1)[0]]
    # A timed-out attempt may have been written too: "after" at least once, "uncommitted" never.
    assert values[0] == b"before" and set(values[1:]) == {b"after"}, values


def test_group_offsets_survive_coordinator_kill(cluster, topic):
    from confluent_kafka import Consumer, Producer
    create_topic(cluster, topic, 3)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 3})
    for i in range(300):
        p.produce(topic, f"v{i}".encode(), partition=i % 3)
    assert p.flush(60) == 0
    group = f"g-{topic}"
    conf = {"bootstrap.servers": cluster.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "log_level": 3}
    c = Consumer(conf)
    c.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 150 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            seen += 1
    c.commit(asynchronous=False)
    committed = {tp.partition: max(tp.offset, 0) for tp in c.committed(
        [__import__("confluent_kafka").TopicPartition(topic, i) for i in range(3)], timeout=30)}
    c.close()
    # kill the broker leading the group's __consumer_offsets partition (the coordinator)
    desc = admin_client(cluster).describe_consumer_groups([group])[group].result(30)
    coordinator = desc.coordinator.id
    cluster.signal_broker(coordinator, signal.SIGKILL)
    # a new consumer of the group resumes from the committed offsets and reads the rest
    c = Consumer(conf)
    c.subscribe([topic])
    rest = 0
    first: dict[int, int] = {}
    deadline = time.monotonic() + 90
    while rest < 300 - sum(committed.values()) and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            first.setdefault(m.partition(), m.offset())
            rest += 1
    c.close()
    assert rest == 300 - sum(committed.values()), f"read {rest} after the coordinator died"
    for part, off in first.items():
        assert off == committed[part], f"partition {part} resumed at {off}, committed {committed[part]}"


def test_topic_config_change_reaches_the_leader_from_any_broker(cluster, topic):
    from confluent_kafka import Producer
    from confluent_kafka.admin import ConfigResource
    create_topic(cluster, topic, 1)
    leader = leader_of(cluster, topic, 0)
    other = [b for b in (1, 2, 3) if b != leader][0]

    def produce():
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "retries": 0,
                      "message.timeout.ms": 10000, "log_level": 3})
        res = {}
        p.produce(topic, b"x", partition=0, on_delivery=lambda e, m: res.update(err=e))
        p.flush(15)
        return res["err"]

    assert produce() is None
    # AlterConfigs sent to a broker that does not lead the partition: min.insync.replicas above
    # the replication factor, so the leader must refuse acks=all once the change reaches it
    res = ConfigResource("topic", topic, set_config={"min.insync.replicas": "4"})
    admin_client(cluster, [other]).alter_configs([res])[res].result(30)
    util.wait_until(lambda: (e := produce()) is not None and e.code() in (19, 20), 30,
                    "the leader applying min.insync.replicas=4")
    res = ConfigResource("topic", topic, set_config={"min.insync.replicas": "2"})
    admin_client(cluster, [other]).alter_configs([res])[res].result(30)
    util.wait_until(lambda: produce() is None, 30, "acks=all accepted again")


def test_kafka_reassign_partitions_moves_a_partition(cluster, topic, tmp_path):
    """Kafka's own kafka-reassign-partitions (ReassignPartitionsCommand) moves a replica from one
    broker to another under load: the target replica catches up, joins the ISR, the old one is
    dropped and its data deleted; nothing acknowledged is lost."""
    import json as _json
    create_topic(cluster, topic, 1, rf=2, min_isr=1)
    before = describe(cluster, topic)[0]["replicas"]
    spare = next(b for b in (1, 2, 3) if b not in before)
    leaving = before[-1] if before[-1] != leader_of(cluster, topic, 0) else before[0]
    target = [b for b in before if b != leaving] + [spare]
    w = ConfluentWriter(cluster, topic, 1)
    w.start()
    util.wait_until(lambda: len(w.acked) > 2000, 60, "records written before the move")
    plan = tmp_path / "reassign.json"
    plan.write_text(_json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": target, "log_dirs": ["any"] * len(target)}]}))
    tool = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    r = util.kafka_tool(tool, "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan),
                        "--execute", check=False)
    assert r.returncode == 0, r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
    util.wait_until(lambda: sorted(describe(cluster, topic)[0]["replicas"]) == sorted(target)
                    and sorted(describe(cluster, topic)[0]["isr"]) == sorted(target), 90,
                    f"replicas and ISR = {target}")

    def verified():
        v = util.kafka_tool(tool, "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file",
                            str(plan), "--verify", check=False)
        out = v.stdout.decode(errors="replace")
        return v.returncode == 0 and "is completed" in out and "in progress" not in out
    util.wait_until(verified, 60, "kafka-reassign-partitions --verify: completed")
    gone = cluster.data_dir / f"broker-{leaving}" / f"{topic}-0"
    util.wait_until(lambda: not gone.exists(), 30, f"the old replica's data removed from broker {leaving}")
    assert (cluster.data_dir / f"broker-{spare}" / f"{topic}-0").is_dir()
    w.halt.set()
    w.join(200)
    verify_acked(w.acked, consume_all(cluster, topic, 1))


def session_metrics(c: LocalCluster, broker_id: int) -> tuple[float, float]:
    """(fetch sessions cached, incremental fetches answered) of one broker."""
    import re
    import urllib.request
    text = urllib.request.urlopen(f"http://127.0.0.1:{c.metrics_port + broker_id - 1}/metrics",
                                  timeout=10).read().decode()
    sessions = re.search(r"^skein_fetch_sessions (\S+)$", text, re.M)
    incremental = re.search(r'^skein_fetch_session_requests_total\{kind="incremental"\} (\S+)$', text, re.M)
    return (float(sessions[1]) if sessions else 0.0, float(incremental[1]) if incremental else 0.0)


def test_followers_fetch_through_incremental_sessions(cluster, topic):
    """KIP-227 between brokers: each follower keeps one fetch session with each leader, so every
    broker (leading a third of 12 partitions) holds the sessions of its two followers and answers
    their idle long polls incrementally. A SIGKILLed broker comes back with no sessions; once it
    leads again its followers open new ones, and every replica is back in sync, holding every
    acknowledged record."""
    create_topic(cluster, topic, 12)
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 3})
    for i in range(600):
        p.produce(topic, f"rec-{i:08d}".encode(), partition=i % 12)
    assert p.flush(60) == 0
    wait_in_sync(cluster, topic)

    def sessions_everywhere():
        return all(session_metrics(cluster, b)[0] >= 2 for b in (1, 2, 3))

    util.wait_until(sessions_everywhere, 30, "two follower sessions on every broker")
    before = [session_metrics(cluster, b)[1] for b in (1, 2, 3)]
    time.sleep(3)  # idle: followers long-poll (replica.fetch.wait.max.ms 500) through their sessions
    after = [session_metrics(cluster, b)[1] for b in (1, 2, 3)]
    assert all(a - b >= 4 for a, b in zip(after, before)), (before, after)

    victim = leader_of(cluster, topic, 0)
    cluster.signal_broker(victim, signal.SIGKILL)
    util.wait_until(lambda: leader_of(cluster, topic, 0) != victim, 30, "a new leader")
    for i in range(600, 900):
        p.produce(topic, f"rec-{i:08d}".encode(), partition=i % 12)
    assert p.flush(60) == 0
    wait_in_sync(cluster, topic)
    # Leadership returns to the restarted broker (preferred election); its followers open new
    # sessions with it.
    from confluent_kafka import ElectionType, TopicPartition
    fut = admin_client(cluster).elect_leaders(ElectionType.PREFERRED,
                                              [TopicPartition(topic, i) for i in range(12)])
    fut.result(30)
    util.wait_until(lambda: any(leader_of(cluster, topic, i) == victim for i in range(12)), 30,
                    "the restarted broker leads again")
    util.wait_until(sessions_everywhere, 30, "sessions opened on the restarted broker")
    got = consume_all(cluster, topic, 12)
    values = sorted(v for recs in got.values() for _, v in recs)
    assert values == [f"rec-{i:08d}".encode() for i in range(900)]


def test_kafka_leader_election_moves_every_partition_back_to_its_preferred_replica(cluster, topic):
    """Kafka's kafka-leader-election --all-topic-partitions after a broker's loss and return:
    every partition the broker had led goes back to it (its preferred replica) in one command —
    the broker asks the controller for them in batches, not one round trip per partition — and
    the tool reports each one it moved. Asked again, nothing needs an election."""
    partitions = 60
    create_topic(cluster, topic, partitions)
    wait_in_sync(cluster, topic)
    victim = 1
    # The assignment's first replica, in Metadata's order (describe() sorts the replicas).
    md = admin_client(cluster).list_topics(topic, timeout=10).topics[topic]
    preferred = {p.id: list(p.replicas)[0] for p in md.partitions.values()}
    theirs = sorted(p for p, b in preferred.items() if b == victim)
    assert theirs, preferred
    cluster.signal_broker(victim, signal.SIGKILL)
    util.wait_until(lambda: all(s["leader"] not in (victim, -1) for s in describe(cluster, topic, [2, 3]).values()),
                    60, f"no partition led by broker {victim}")
    util.wait_until(lambda: cluster.broker_pid(victim) is not None, 60, f"broker {victim} restarted")
    wait_in_sync(cluster, topic)
    assert all(describe(cluster, topic)[p]["leader"] != victim for p in theirs), "moved back before asked"

    tool = "org.apache.kafka.tools.LeaderElectionCommand"
    r = util.kafka_tool(tool, "--bootstrap-server", cluster.bootstrap, "--election-type", "PREFERRED",
                        "--all-topic-partitions", check=False)
    out = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
    assert r.returncode == 0, out
    assert "Successfully completed leader election (PREFERRED)" in out, out
    reported = set(re.findall(re.escape(topic) + r"-(\d+)", out))
    assert reported == {str(p) for p in theirs}, f"moved {sorted(theirs)}, reported:\n{out}"
    state = describe(cluster, topic)
    assert {p: s["leader"] for p, s in state.items()} == preferred

    again = util.kafka_tool(tool, "--bootstrap-server", cluster.bootstrap, "--election-type", "PREFERRED",
                            "--all-topic-partitions", check=False)
    out = again.stdout.decode(errors="replace") + again.stderr.decode(errors="replace")
    assert again.returncode == 0, out
    assert f"{topic}-" not in out, f"partitions elected again:\n{out}"
