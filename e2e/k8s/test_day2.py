"""Day-2 operations that prove themselves safe, on the real API server tier.

Readiness is real here: the pod runner runs the StatefulSet's readinessProbe
(the broker's `/readyz`) as the kubelet does and sets the pods' Ready from
it. On that:

- **A roll paced by recovery.** One broker has a slow disk (the runner
  throttles its writes); while it restarts, a burst is written that it must
  copy back through that disk. The roll holds: the next broker restarts only
  once the slow one is back in the ISR of every partition it follows,
  measured from the cluster's metadata, and its pod was not Ready before
  that. `kubectl get kafkacluster` shows the roll's progress meanwhile.
- **An image roll undone.** An image whose broker never becomes ready: after
  `spec.rollPolicy.timeout` the operator puts the brokers back on the image
  they ran, says why in the status and an Event, and an acks=all producer
  loses nothing.

Local mode only: it needs the pod runner (slow disks, images mapped to
binaries). Run by e2e/k8s/operator-e2e.sh after test_operator.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_operator import (BROKEN_IMAGE_TAG, MODE, NS, OP_NS, AcksAllWriter, Sampler, cond,  # noqa: E402
                           poll_values, ready)
from util import wait_until  # noqa: E402

NAME, TOPIC = "pace", "pace-t"
PARTITIONS = 6
# The slow broker's disk: bytes/s it may write.
SLOW_DISK = 100_000
# What it must copy back through it after its restart.
BURST_BYTES = 4_000_000


@pytest.fixture(scope="module", autouse=True)
def local_tier():
    if MODE != "local":
        pytest.fail("test_day2.py needs this machine's tier (the pod runner): run e2e/k8s/operator-e2e.sh")


def boot() -> str:
    return ",".join(f"{NAME}-{i}.{NAME}-brokers.{NS}.svc:9092" for i in range(3))


def pods(env) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in
            env.get("-n", NS, "get", "pods", "-l", f"app.kubernetes.io/instance={NAME}")["items"]}


def status(env) -> dict:
    return env.get("-n", NS, "get", "kafkacluster", NAME).get("status", {})


def pace_topic(name: str) -> str:
    """A Topic of the pace cluster: PARTITIONS partitions, replication factor 3."""
    return f"""apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: {name}
  namespace: {NS}
spec:
  clusterRef:
    name: {NAME}
  partitions: {PARTITIONS}
  replicationFactor: 3
"""


@pytest.fixture(scope="module")
def cluster(env):
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {NAME}
  namespace: {NS}
spec:
  replicas: 3
  storage:
    size: 1Gi
  config:
    min.insync.replicas: "2"
    replica.lag.time.max.ms: "5000"
    readiness.replica.lag.max.messages: "0"
  rollPolicy:
    waitForFullReplication: false
---
{pace_topic(TOPIC)}""")
    ready(env, "kafkacluster", NAME, 240, "KafkaCluster pace Ready")
    ready(env, "topic", TOPIC, 120, "Topic pace-t Ready")
    # Every broker's pod went Ready through its probe: the runner saw it not ready first.
    runner = env.runners[1]
    for i in range(3):
        wait_until(lambda i=i: [r for _, r in runner.ready_transitions(f"{NAME}-{i}")][-1:] == [True], 60,
                   f"{NAME}-{i} Ready from its probe")
    writer = AcksAllWriter(boot(), TOPIC, PARTITIONS, "d2")
    writer.start()
    wait_until(lambda: len(writer.acked) > 100, 60, "the acks=all producer writing")
    yield writer
    writer.finish()
    assert writer.failed == [], writer.failed[:5]
    from confluent_kafka import Consumer, TopicPartition
    cons = Consumer({"bootstrap.servers": boot(), "group.id": f"d2-{uuid.uuid4().hex[:6]}",
                     "enable.auto.commit": False})
    cons.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got = poll_values(cons, len(writer.acked), 120)
    assert sorted(got) == sorted(writer.acked), f"{len(got)} read back of {len(writer.acked)} acknowledged"
    print(f"day-2 cluster: {len(writer.acked)} acknowledged records (acks=all) all read back, none failed")


class Watch(Sampler):
    """Samples, every 0.25 s, the broker pods' uids and when broker `slow` is in the ISR of every
    partition it is a replica of (from the cluster's metadata), in threads of their own."""

    loops = ("_pods", "_isr")

    def __init__(self, env, slow: int):
        super().__init__()
        self.env, self.slow = env, slow
        self.uids: dict[str, list[tuple[float, str]]] = {}
        self.in_sync: list[tuple[float, bool]] = []
        self.rolls: list[dict] = []
        self.printed: list[str] = []  # `kubectl get kafkacluster` as it showed the cluster

    def _pods(self):
        while not self._stop.is_set():
            now = time.time()
            try:
                for name, p in pods(self.env).items():
                    seen = self.uids.setdefault(name, [])
                    if not p["metadata"].get("deletionTimestamp") and (not seen or seen[-1][1] != p["metadata"]["uid"]):
                        seen.append((now, p["metadata"]["uid"]))
                roll = status(self.env).get("roll")
                if roll:
                    self.rolls.append(roll)
                    self.printed.append(self.env.k("-n", NS, "get", "kafkacluster", NAME))
            except Exception:  # noqa: BLE001 - a slow kubectl call: the next sample
                pass
            time.sleep(0.25)

    def _isr(self):
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": boot(), "log_level": 2})
        while not self._stop.is_set():
            now = time.time()
            try:
                md = admin.list_topics(timeout=5)
                ok = all(self.slow in p.isrs for t in md.topics.values() for p in t.partitions.values()
                         if self.slow in p.replicas)
                self.in_sync.append((now, ok))
            except Exception:  # noqa: BLE001
                pass
            time.sleep(0.25)

    def created(self, pod: str, after_uid: str) -> float | None:
        """When a pod of that name with another uid than `after_uid` was first seen."""
        return next((t for t, u in self.uids.get(pod, []) if u != after_uid), None)

    def in_sync_from(self, since: float) -> float | None:
        """The first sample after `since` from which broker `slow` stayed in every ISR."""
        first = None
        for t, ok in self.in_sync:
            if t < since:
                continue
            if ok and first is None:
                first = t
            elif not ok:
                first = None
        return first


def burst_topic(env):
    """Topic pace-burst, where bursts go (its own, so that pace-t holds the writer's records only)."""
    env.k("apply", "-f", "-", stdin=pace_topic("pace-burst"))
    ready(env, "topic", "pace-burst", 120, "Topic pace-burst Ready")


def burst(n_bytes: int):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": boot(), "acks": "all", "enable.idempotence": True,
                  "linger.ms": 20, "log_level": 2})
    payload = b"b" * 1000
    for i in range(n_bytes // len(payload)):
        p.produce("pace-burst", payload, partition=i % PARTITIONS)
        p.poll(0)
    assert p.flush(180) == 0


def test_a_roll_waits_until_the_restarted_broker_is_back_in_every_isr(env, cluster):
    writer = cluster
    burst_topic(env)
    runner = env.runners[1]
    runner.slow_disk(f"{NAME}-1", SLOW_DISK)
    before = {n: p["metadata"]["uid"] for n, p in pods(env).items()}
    watch = Watch(env, slow=1).start()
    try:
        env.k("-n", NS, "patch", "kafkacluster", NAME, "--type=merge", "-p",
              json.dumps({"spec": {"config": {"log.retention.ms": "7200000"}}}))
        # The roll reaches the slow broker (pace-2 first): while it is down, the burst it must
        # copy back through its slow disk.
        wait_until(lambda: watch.created(f"{NAME}-1", before[f"{NAME}-1"]) or
                   pods(env).get(f"{NAME}-1", {}).get("metadata", {}).get("deletionTimestamp"), 300,
                   f"{NAME}-1 restarted by the roll")
        t0 = time.time()
        burst(BURST_BYTES)
        print(f"burst of {BURST_BYTES} bytes written in {time.time() - t0:.1f}s while {NAME}-1 restarted")
        restarted1 = wait_until(lambda: watch.created(f"{NAME}-1", before[f"{NAME}-1"]), 120,
                                f"{NAME}-1 recreated")
        restarted0 = wait_until(lambda: watch.created(f"{NAME}-0", before[f"{NAME}-0"]), 600,
                                f"{NAME}-0 restarted after {NAME}-1 recovered")
        wait_until(lambda: cond(env.get("-n", NS, "get", "kafkacluster", NAME), "Ready") == "True", 180,
                   "KafkaCluster Ready after the roll")
    finally:
        watch.stop()
        runner.slow_disk(f"{NAME}-1", None)
    in_sync = watch.in_sync_from(restarted1)
    assert in_sync is not None, "broker 1 never back in every ISR"
    ready_at = [t for t, r in runner.ready_transitions(f"{NAME}-1") if r and t > restarted1]
    assert ready_at, runner.ready_transitions(f"{NAME}-1")
    recovery = in_sync - restarted1
    print(f"{NAME}-1 recreated at +0s, back in every ISR at +{recovery:.1f}s, Ready at "
          f"+{ready_at[0] - restarted1:.1f}s; {NAME}-0 restarted at +{restarted0 - restarted1:.1f}s")
    # The slow disk made the recovery long enough to matter ...
    assert recovery >= 15, f"recovery took only {recovery:.1f}s: the slow disk did not hold it"
    # ... its pod was not Ready while it was catching up: /readyz (bound 0 records) says ready once
    # the follower has caught up, and its ISR membership reaches the metadata a moment later (the
    # leader proposes it, the controller commits it: up to a few seconds here, 2.2 s seen) ...
    assert ready_at[0] >= in_sync - 5, (ready_at[0] - restarted1, recovery)
    # ... and the next restart waited for both.
    assert restarted0 >= in_sync, (restarted0 - restarted1, recovery)
    assert restarted0 >= ready_at[0], (restarted0 - restarted1, ready_at[0] - restarted1)
    # The roll's progress, in the status and as kubectl shows it, while it waited for the slow broker.
    waiting = [r for r in watch.rolls if r.get("pod") == f"{NAME}-1"]
    assert waiting and waiting[-1]["progress"] == "2/3", watch.rolls[-3:]
    assert "ready" in waiting[-1]["waitingFor"], waiting[-1]
    shown = [out for out in watch.printed if "2/3" in out]
    assert shown and "ROLL" in shown[0].splitlines()[0], watch.printed[-2:]
    print("kubectl get kafkacluster during the roll:\n" + shown[-1])
    assert "roll" not in status(env), status(env).get("roll")
    env.k("-n", NS, "delete", "topic", "pace-burst", "--timeout=60s")


def evict(env, pod: str) -> subprocess.CompletedProcess:
    """The eviction API, as `kubectl drain` calls it for each pod."""
    body = json.dumps({"apiVersion": "policy/v1", "kind": "Eviction",
                       "metadata": {"name": pod, "namespace": NS}})
    return env.k_run("create", "--raw", f"/api/v1/namespaces/{NS}/pods/{pod}/eviction", "-f", "-", stdin=body)


def pdb_allowed(env) -> int:
    return env.get("-n", NS, "get", "pdb", NAME).get("status", {}).get("disruptionsAllowed", -1)


def test_evictions_wait_until_the_cluster_can_spare_a_broker_and_go_one_at_a_time(env, cluster):
    """The PodDisruptionBudget lets a node drain take one broker, and only while every partition
    is above its min.insync.replicas: a broker out of the ISRs (slow disk, a burst) holds every
    eviction (HTTP 429); once it caught up one eviction goes through, and the next waits until
    the evicted broker is back, Ready, in every ISR."""
    burst_topic(env)
    runner = env.runners[1]
    wait_until(lambda: pdb_allowed(env) == 1, 120, "the PDB allowing one disruption")
    runner.slow_disk(f"{NAME}-1", 50_000)
    try:
        burst(2_000_000)
        wait_until(lambda: pdb_allowed(env) == 0, 120, "the PDB allowing none while pace-1 is out of the ISRs")
        r = evict(env, f"{NAME}-0")
        assert r.returncode != 0 and "disruption budget" in r.stderr, (r.returncode, r.stderr)
    finally:
        runner.slow_disk(f"{NAME}-1", None)
    wait_until(lambda: pdb_allowed(env) == 1, 180, "the PDB allowing one disruption once pace-1 caught up")
    before = {n: p["metadata"]["uid"] for n, p in pods(env).items()}
    r = evict(env, f"{NAME}-0")
    assert r.returncode == 0, r.stderr
    t_evicted = time.time()
    refused = 0
    while True:
        r = evict(env, f"{NAME}-2")
        if r.returncode == 0:
            break
        assert "disruption budget" in r.stderr, r.stderr
        refused += 1
        assert time.time() - t_evicted < 240, "pace-2 never evictable"
        time.sleep(1)
    second = time.time() - t_evicted
    back = [t for t, ok in runner.ready_transitions(f"{NAME}-0") if ok and t > t_evicted]
    assert back and back[0] <= time.time(), runner.ready_transitions(f"{NAME}-0")
    assert refused > 0, "the second eviction went through at once"
    print(f"eviction of {NAME}-2 refused {refused} times, allowed {second:.1f}s after {NAME}-0's, "
          f"{NAME}-0 Ready again after {back[0] - t_evicted:.1f}s")
    # Both recreated (the evicted pod is Terminating until its broker stopped), then Ready.
    wait_until(lambda: (lambda ps: all(n in ps and ps[n]["metadata"]["uid"] != before[n]
                                       and not ps[n]["metadata"].get("deletionTimestamp")
                                       for n in (f"{NAME}-0", f"{NAME}-2")))(pods(env)), 180,
               "pace-0 and pace-2 recreated after their evictions")
    wait_until(lambda: cond(env.get("-n", NS, "get", "kafkacluster", NAME), "Ready") == "True", 180,
               "KafkaCluster Ready after the evictions")
    env.k("-n", NS, "delete", "topic", "pace-burst", "--timeout=60s")


def test_an_image_roll_not_ready_in_time_is_undone(env, cluster):
    good = status(env).get("brokerImage")
    assert good, f"no status.brokerImage after a settled roll: {status(env)}"
    bad = f"ghcr.io/skein-dev/skein-broker:{BROKEN_IMAGE_TAG}"
    before = {n: p["metadata"]["uid"] for n, p in pods(env).items()}
    env.k("-n", NS, "patch", "kafkacluster", NAME, "--type=merge", "-p",
          json.dumps({"spec": {"image": bad, "rollPolicy": {"timeout": "40s"}}}))
    wait_until(lambda: (lambda p: p and p["spec"]["containers"][0]["image"] == bad)(pods(env).get(f"{NAME}-2")),
               120, f"{NAME}-2 recreated on the broken image")
    t_bad = time.time()
    # The operator that restarted it goes (a failover) while the roll waits: the one taking over
    # reads the restart from status.roll and keeps its clock.
    wait_until(lambda: (status(env).get("roll") or {}).get("podUid"), 30, "the restart recorded in status.roll")
    old = env.leader_pod()["metadata"]["name"]
    env.k("-n", OP_NS, "delete", "pod", old, "--wait=false")
    wait_until(lambda: (lambda p: p and p["metadata"]["name"] != old)(env.leader_pod()), 60,
               "another operator replica holding the Lease")
    rollback = wait_until(lambda: status(env).get("imageRollback"), 150, "status.imageRollback")
    waited = time.time() - t_bad
    assert rollback["failedImage"] == bad and rollback["restoredImage"] == good, rollback
    assert rollback["pod"] == f"{NAME}-2", rollback
    assert 40 <= waited + 3 and waited <= 40 + 15, \
        f"undone {waited:.0f}s after the restart (timeout 40s, an operator failover meanwhile)"
    events = env.get("-n", NS, "get", "events", "--field-selector",
                     f"involvedObject.name={NAME},reason=ImageRolledBack")["items"]
    assert events and "40s" in events[0]["message"], events
    # Back on the image they ran: pace-2 restarted on it, the others never touched.
    wait_until(lambda: (lambda ps: len(ps) == 3 and all(p["spec"]["containers"][0]["image"] == good
                                                       for p in ps.values()))(pods(env)), 180,
               "every broker pod on the image before the failed roll")
    wait_until(lambda: cond(env.get("-n", NS, "get", "kafkacluster", NAME), "Ready") == "True", 180,
               "KafkaCluster Ready after the roll was undone")
    after = {n: p["metadata"]["uid"] for n, p in pods(env).items()}
    assert after[f"{NAME}-0"] == before[f"{NAME}-0"] and after[f"{NAME}-1"] == before[f"{NAME}-1"], \
        "a broker other than the one on the failed image was restarted"
    assert status(env).get("imageRollback", {}).get("failedImage") == bad, "the rollback is forgotten"
    sts = env.get("-n", NS, "get", "statefulset", NAME)
    assert sts["spec"]["template"]["spec"]["containers"][0]["image"] == good
    # Naming the good image again clears it and restarts nothing.
    env.k("-n", NS, "patch", "kafkacluster", NAME, "--type=merge", "-p",
          json.dumps({"spec": {"image": good}}))
    wait_until(lambda: "imageRollback" not in status(env), 60, "status.imageRollback cleared")
    time.sleep(5)
    assert {n: p["metadata"]["uid"] for n, p in pods(env).items()} == after
    print(f"image roll undone {waited:.0f}s after {NAME}-2 restarted on {bad}: {rollback['message']}")


ZONED, ZTOPIC = "zoned", "zoned-t"
ZONE_LABEL = "topology.kubernetes.io/zone"


def zoned_boot(n: int) -> str:
    return ",".join(f"{ZONED}-{i}.{ZONED}-brokers.{NS}.svc:9092" for i in range(n))


def topic_bytes_out(env, pod: str, topic: str) -> float:
    import re
    import urllib.request
    ip = env.get("-n", NS, "get", "pod", pod)["status"]["podIP"]
    text = urllib.request.urlopen(f"http://{ip}:9644/metrics", timeout=10).read().decode()
    m = re.search(r'^skein_topic_bytes_out_total\{topic="%s"\} (\S+)$' % re.escape(topic), text, re.M)
    return float(m[1]) if m else 0.0


def test_zones_keep_replicas_apart_serve_the_closest_replica_and_survive_a_lost_zone(env):
    """`spec.rack`: each broker's `broker.rack` is its node's zone (the pod's
    topology.kubernetes.io/zone, which the API server copies from the node at binding); the pods
    spread over the three zones; every partition's replicas sit in three zones; a consumer that
    says its zone (`client.rack`) reads from the replica there (KIP-392: the operator sets the
    RackAwareReplicaSelector); and when a whole zone stops (its brokers frozen), every partition
    keeps a leader, an acks=all producer goes on, and every acknowledged record is read back."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    n = 6
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {ZONED}
  namespace: {NS}
spec:
  replicas: {n}
  storage:
    size: 1Gi
  rack: {{}}
  config:
    min.insync.replicas: "2"
---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: {ZTOPIC}
  namespace: {NS}
spec:
  clusterRef:
    name: {ZONED}
  partitions: 6
  replicationFactor: 3
""")
    runner = env.runners[1]
    writer = None
    frozen: list[int] = []
    try:
        ready(env, "kafkacluster", ZONED, 300, "KafkaCluster zoned Ready")
        ready(env, "topic", ZTOPIC, 120, "Topic zoned-t Ready")
        zone_of_node = {nd["metadata"]["name"]: nd["metadata"]["labels"][ZONE_LABEL]
                        for nd in env.get("get", "nodes")["items"]}
        zpods = {p["metadata"]["name"]: p for p in
                 env.get("-n", NS, "get", "pods", "-l", f"app.kubernetes.io/instance={ZONED}")["items"]}
        zone = {int(name.rsplit("-", 1)[1]): zone_of_node[p["spec"]["nodeName"]] for name, p in zpods.items()}
        # The pods spread over the zones (topologySpreadConstraints, maxSkew 1).
        per_zone = {z: sum(1 for v in zone.values() if v == z) for z in set(zone_of_node.values())}
        assert max(per_zone.values()) - min(per_zone.values()) <= 1, per_zone
        # Each broker's rack is its node's zone.
        admin = AdminClient({"bootstrap.servers": zoned_boot(n)})
        racks = {nd.id: nd.rack for nd in admin.describe_cluster().result(30).nodes}
        assert racks == zone, (racks, zone)
        # Every partition on three zones.
        md = admin.list_topics(ZTOPIC, timeout=10).topics[ZTOPIC]
        for pid, p in md.partitions.items():
            assert len({zone[b] for b in p.replicas}) == 3, (pid, p.replicas, zone)

        # KIP-392: a consumer in a follower's zone reads partition 0 from that follower.
        p0 = md.partitions[0]
        follower = next(b for b in p0.replicas if b != p0.leader and zone[b] != zone[p0.leader])
        prod = Producer({"bootstrap.servers": zoned_boot(n), "acks": "all"})
        for i in range(2000):
            prod.produce(ZTOPIC, b"z" * 500, partition=0)
        assert prod.flush(60) == 0
        before = topic_bytes_out(env, f"{ZONED}-{follower}", ZTOPIC)
        cons = Consumer({"bootstrap.servers": zoned_boot(n), "group.id": f"z-{uuid.uuid4().hex[:6]}",
                         "client.rack": zone[follower], "enable.auto.commit": False, "log_level": 3})
        cons.assign([TopicPartition(ZTOPIC, 0, 0)])
        got = poll_values(cons, 2000, 90)
        assert len(got) == 2000, len(got)
        served = topic_bytes_out(env, f"{ZONED}-{follower}", ZTOPIC) - before
        assert served >= 2000 * 500, f"follower {follower} in {zone[follower]} sent {served} bytes"

        # A zone lost: every broker in it frozen at once.
        writer = AcksAllWriter(zoned_boot(n), ZTOPIC, 6, "z")
        writer.start()
        wait_until(lambda: len(writer.acked) > 200, 60, "the producer writing")
        lost = zone[p0.leader]
        frozen = [b for b, z in zone.items() if z == lost]
        for b in frozen:
            os.kill(runner.pid_of(f"{ZONED}-{b}"), signal.SIGSTOP)
        t_lost = time.time()

        def led_outside():
            m = AdminClient({"bootstrap.servers": zoned_boot(n)}).list_topics(ZTOPIC, timeout=10).topics[ZTOPIC]
            return all(p.leader >= 0 and p.leader not in frozen for p in m.partitions.values())
        wait_until(led_outside, 90, f"every partition led outside {lost}")
        moved = time.time() - t_lost
        acked_then = len(writer.acked)
        wait_until(lambda: len(writer.acked) > acked_then + 200, 90, f"writes acknowledged without {lost}")
        for b in frozen:
            os.kill(runner.pid_of(f"{ZONED}-{b}"), signal.SIGCONT)
        frozen = []
        writer.finish()
        assert writer.failed == [], writer.failed[:5]
        cons = Consumer({"bootstrap.servers": zoned_boot(n), "group.id": f"z-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
        cons.assign([TopicPartition(ZTOPIC, p, 0) for p in range(6)])
        got = [v for v in poll_values(cons, 2000 + len(writer.acked), 120) if v.startswith(b"z-")]
        assert sorted(got) == sorted(writer.acked), f"{len(got)} read back of {len(writer.acked)}"
        print(f"zones {per_zone}; racks = zones; KIP-392 follower {follower} ({zone[follower]}) served "
              f"{served:.0f} bytes; zone {lost} lost: every partition led elsewhere after {moved:.1f}s, "
              f"{len(writer.acked)} acknowledged records all read back")
    finally:
        for b in frozen:
            pid = runner.pid_of(f"{ZONED}-{b}")
            if pid:
                os.kill(pid, signal.SIGCONT)
        if writer:
            writer.stop()
        env.k("-n", NS, "delete", "topic", ZTOPIC, "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "kafkacluster", ZONED, "--ignore-not-found", "--wait=false", check=False)
        env.k("-n", NS, "delete", "pvc", "-l", f"app.kubernetes.io/instance={ZONED}", "--wait=false", check=False)
