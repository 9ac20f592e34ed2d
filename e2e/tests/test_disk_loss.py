"""A lost disk must never destroy acknowledged data (`skein-operator local`, 3 brokers, RF 3,
min.insync.replicas=2, an idempotent acks=all confluent-kafka producer).

The cluster is stopped cleanly, then one or two brokers' data directories are deleted (a lost disk,
or on Kubernetes a pod that comes back with a new empty PersistentVolumeClaim), then it starts again.
Which brokers are wiped is chosen from the controller's own record, to hit the worst case: the
replicas the controller last trusted with the data (the last in-sync ones).

What must hold:
- one disk lost: every acknowledged record is read back at its offset; the broker that lost its
  disk formats its directory again (a new directory.id), is never elected on its empty log,
  catches up and rejoins the ISR; the controller counts the lost disk;
- two disks lost (issue #43): the intact third copy is kept, never truncated to an empty replica's
  log, and leads again on its own. The hard case is the one where the controller cannot prove it
  holds everything: it was the leader, the first to stop, and left an ISR that still had
  min.insync.replicas members, so it never joined the ELR; the two followers it left in the ELR
  come back empty. No ISR or ELR member is left, and the controller's unclean recovery elects the
  longest log its live replicas report (KIP-966), which is the intact copy's, even when that copy
  is paused until it is fenced meanwhile. Every acknowledged record is back.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import urllib.request

import pytest

import util
from brokers import LocalCluster
from conftest import TARGET, _active
from test_replication import OVERRIDES, admin_client, consume_all, create_topic, describe, verify_acked

pytestmark = [
    pytest.mark.replication,
    pytest.mark.skipif(TARGET != "skein", reason="runs Skein's own local platform (skein-operator local)"),
]

RECORDS = 1000


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(tmp_path / "cluster", 3, OVERRIDES)
    _active.append(c)
    c.start()
    yield c
    code = c.stop()
    _active.remove(c)
    assert code in (0, None), f"skein-operator local exited with {code}:\n{c.log_tail(60)}"


def produce_acked(c: LocalCluster, topic: str, partitions: int) -> dict[bytes, tuple[int, int]]:
    """RECORDS idempotent acks=all records, every one acknowledged."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": c.bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "message.timeout.ms": 60000, "log_level": 3})
    acked: dict[bytes, tuple[int, int]] = {}
    errors: list[str] = []

    def cb(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.value()] = (msg.partition(), msg.offset())

    for i in range(RECORDS):
        p.produce(topic, f"rec-{i:08d}".encode(), partition=i % partitions, on_delivery=cb)
        p.poll(0)
    assert p.flush(60) == 0, "records still in flight"
    assert not errors, errors[:5]
    assert len(acked) == RECORDS
    return acked


def trusted_replicas(c: LocalCluster, topic: str, partition: int) -> list[int]:
    """The replicas the controller's persisted state trusts with the data after the clean stop: the
    ISR, then the eligible leader replicas (the order a clean election would try them in)."""
    meta = json.loads(subprocess.run([str(c.binary), "metadata", str(c.data_dir / "controller" / "cluster-metadata")],
                                     check=True, capture_output=True, text=True).stdout)
    state = meta["image"]["topics"][topic]["partitions"][partition]
    return state["isr"] + [b for b in state.get("elr", []) if b not in state["isr"]]


def directory_id(c: LocalCluster, broker: int) -> str:
    text = (c.data_dir / f"broker-{broker}" / "meta.properties").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))["directory.id"]


def controller_metric(c: LocalCluster, name: str) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{c.controller_metrics}/metrics", timeout=10).read().decode()
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


def stop_and_wipe(c: LocalCluster, topic: str, count: int) -> tuple[list[int], dict[int, str]]:
    code = c.stop()
    assert code == 0, f"clean stop failed ({code}):\n{c.log_tail(60)}"
    trusted = trusted_replicas(c, topic, 0)
    order = trusted + [b for b in range(1, c.n + 1) if b not in trusted]
    wiped = order[:count]
    before = {b: directory_id(c, b) for b in wiped}
    for b in wiped:
        shutil.rmtree(c.data_dir / f"broker-{b}")
    c.start()
    return wiped, before


def test_one_lost_disk_loses_nothing_and_the_broker_recovers(cluster, topic):
    create_topic(cluster, topic, 1, rf=3, min_isr=2)
    acked = produce_acked(cluster, topic, 1)
    (wiped,), before = stop_and_wipe(cluster, topic, 1)

    util.wait_until(lambda: describe(cluster, topic).get(0, {}).get("leader", -1) >= 0, 60,
                    "a leader after the restart")
    leader = describe(cluster, topic)[0]["leader"]
    assert leader != wiped, f"broker {wiped}, back on an empty disk, was elected leader"
    verify_acked(acked, consume_all(cluster, topic, 1))

    assert directory_id(cluster, wiped) != before[wiped], "the empty directory was not formatted anew"
    assert controller_metric(cluster, "skein_controller_broker_storage_lost_total") == 1
    # It earns its way back: caught up from the leader, then in the ISR again.
    util.wait_until(lambda: len(describe(cluster, topic)[0]["isr"]) == 3, 90, "the wiped broker back in sync")
    # And what it copied is the data: it may lead again and serves every record.
    old = describe(cluster, topic)[0]["leader"]
    cluster.signal_broker(old, 9)
    util.wait_until(lambda: describe(cluster, topic).get(0, {}).get("leader", -1) not in (-1, old), 30,
                    "a new leader")
    verify_acked(acked, consume_all(cluster, topic, 1))


def test_two_lost_disks_keep_the_intact_copy(cluster, topic):
    from confluent_kafka.admin import NewTopic

    # Broker 1 leads; `skein-operator local` stops brokers in id order, so it leaves the ISR first
    # (with 2 and 3 still in it: no ELR) and 2 and 3 are the ELR the controller last trusted.
    fs = admin_client(cluster).create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=-1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"})],
        operation_timeout=30)
    fs[topic].result(timeout=60)
    util.wait_until(lambda: (p := describe(cluster, topic).get(0)) and p["leader"] == 1 and len(p["isr"]) == 3,
                    60, f"{topic} led by broker 1 and fully in sync")
    acked = produce_acked(cluster, topic, 1)
    wiped, _ = stop_and_wipe(cluster, topic, 2)
    intact = 1
    assert sorted(wiped) == [2, 3], f"the controller trusted {wiped}, not the followers"

    # The intact copy is paused until the controller fences it (session timeout 9 s), then resumed:
    # whatever it led or reported meanwhile, it must come back as the leader.
    # (A wiped follower may lead meanwhile only once it copied everything from the intact copy and
    # joined the ISR: checked by reading every record back below.)
    cluster.signal_broker(intact, signal.SIGSTOP)
    try:
        time.sleep(12)
    finally:
        cluster.signal_broker(intact, signal.SIGCONT)

    # Back on its own, no unclean election asked for: led by the intact copy, or by a follower that
    # copied everything from it before the pause fenced it.
    util.wait_until(lambda: describe(cluster, topic).get(0, {}).get("leader", -1) >= 0, 60,
                    "a leader again on its own")
    verify_acked(acked, consume_all(cluster, topic, 1))
    assert controller_metric(cluster, 'skein_controller_leader_elections_total{kind="unclean_recovery"}') >= 1
    util.wait_until(lambda: len(describe(cluster, topic)[0]["isr"]) == 3, 90, "every replica back in sync")
    verify_acked(acked, consume_all(cluster, topic, 1))
