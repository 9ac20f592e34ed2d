"""Tiered storage (KIP-405) on `skein-operator local --tiered-storage`: closed segments go to the
object store, local segments go by `local.retention.*`, and Kafka's clients read every record
from offset 0 with no change on their side (librdkafka through confluent-kafka, the Java client
and franz-go).

- a file-system store (the local platform's default) and a real S3 server (SeaweedFS);
- a topic created tiered, and one switched to tiered while it runs;
- after the leader moved;
- from a broker that came back with an empty disk: it builds its state from the store and the
  leader's local tail, and serves the old records from the store, never copying them to its disk.
"""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

import pytest

import util
from brokers import LocalCluster
from conftest import TARGET, _active
from test_replication import OVERRIDES, admin_client, consume_all, describe

pytestmark = [
    pytest.mark.replication,
    pytest.mark.skipif(TARGET != "skein", reason="runs Skein's own local platform (skein-operator local)"),
]

# Copies every half second, retention checks as often: a test waits seconds, not minutes.
TIERED_OVERRIDES = {
    **OVERRIDES,
    "remote.log.manager.task.interval.ms": "500",
    "log.retention.check.interval.ms": "500",
    "log.segment.delete.delay.ms": "0",
}
RECORDS = 3000
# ~300 records a segment: ten segments a partition.
TOPIC_CONFIGS = {
    "min.insync.replicas": "2",
    "segment.bytes": "65536",
    "local.retention.ms": "1000",
}


def start(tmp_path: Path, store: str, extra: list[str] | None = None) -> LocalCluster:
    c = LocalCluster(tmp_path / "cluster", 3, TIERED_OVERRIDES)
    c.extra_args = ["--tiered-storage", store, *(extra or [])]
    _active.append(c)
    c.start()
    return c


@pytest.fixture
def stop_cluster():
    started: list[LocalCluster] = []
    yield started
    for c in started:
        code = c.stop()
        _active.remove(c)
        assert code in (0, None), f"skein-operator local exited with {code}:\n{c.log_tail(60)}"


def create(c: LocalCluster, topic: str, partitions: int, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import NewTopic
    fs = admin_client(c).create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=3, config=configs)],
        operation_timeout=30)
    fs[topic].result(timeout=60)
    util.wait_until(lambda: all(p["leader"] >= 0 and len(p["isr"]) == 3
                                for p in describe(c, topic).values()), 60, f"{topic} in sync")


def produce(c: LocalCluster, topic: str, n: int, start_at: int = 0) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "batch.size": 16384, "log_level": 3})
    errors: list = []
    for i in range(start_at, start_at + n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i:08d}".encode() + b"x" * 180,
                  on_delivery=lambda e, m: errors.append(e) if e else None)
        p.poll(0)
    assert p.flush(60) == 0 and not errors, errors[:3]


def local_bases(c: LocalCluster, topic: str, partition: int) -> dict[int, list[int]]:
    """Base offsets of the local segments of a partition, by broker."""
    out = {}
    for b in range(1, c.n + 1):
        d = c.data_dir / f"broker-{b}" / f"{topic}-{partition}"
        out[b] = sorted(int(f.name.split(".")[0]) for f in d.glob("*.log")) if d.is_dir() else []
    return out


def wait_tiered(c: LocalCluster, topic: str, partitions: int, timeout: float = 90) -> None:
    """Until no broker holds offset 0 of any partition locally any more."""
    def gone():
        return all(bases and bases[0] > 0
                   for p in range(partitions) for bases in local_bases(c, topic, p).values())
    util.wait_until(gone, timeout, f"local segments of {topic} deleted after tiering")


def remote_objects(store: Path, topic: str) -> list[Path]:
    return [f for f in store.rglob("*") if f.is_file() and f"{topic}-" in str(f)]


def check_all_read(c: LocalCluster, topic: str, partitions: int, total: int, tmp_path: Path) -> None:
    """librdkafka, the Java client and franz-go each read every record from offset 0."""
    got = consume_all(c, topic, partitions)
    values = sorted(int(v[1:9]) for recs in got.values() for _, v in recs)
    assert values == list(range(total)), "librdkafka lost or duplicated records"
    for p, recs in got.items():
        assert [o for o, _ in recs] == list(range(len(recs))), f"librdkafka offsets of partition {p}"
    out = tmp_path / f"java-{topic}.jsonl"
    util.java("consume", c.bootstrap, topic=topic, out=out, timeout_ms=120000, timeout=240)
    jrecs = util.read_jsonl(out)
    jvalues = sorted(int(bytes.fromhex(r["v"])[1:9]) for r in jrecs)
    assert jvalues == list(range(total)), "the Java client lost or duplicated records"
    out = tmp_path / f"franz-{topic}.jsonl"
    util.franz("consume", c.bootstrap, topic=topic, out=out, timeout_ms=120000, timeout=240)
    fvalues = sorted(int(bytes.fromhex(r["v"])[1:9]) for r in util.read_jsonl(out))
    assert fvalues == list(range(total)), "franz-go lost or duplicated records"


def metric_sum(c: LocalCluster, name: str) -> float:
    """A counter of every broker's /metrics, summed."""
    import urllib.request
    total = 0.0
    for i in range(c.n):
        text = urllib.request.urlopen(f"http://127.0.0.1:{c.metrics_port + i}/metrics", timeout=10).read().decode()
        total += sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                     if line.startswith(name + " ") or line.startswith(name + "{"))
    return total


def java_offsets(c: LocalCluster, topic: str, partition: int) -> dict:
    """The Java client's earliest, latest, earliest local (-4) and latest tiered (-5) offsets."""
    return util.java("offsets", c.bootstrap, topic=topic, partition=partition)


def test_a_tiered_topic_reads_from_offset_0_after_its_local_segments_are_gone(tmp_path, stop_cluster):
    store = tmp_path / "store"
    c = start(tmp_path, str(store))
    stop_cluster.append(c)
    topic = "tiered"
    create(c, topic, 2, {**TOPIC_CONFIGS, "remote.storage.enable": "true"})
    produce(c, topic, RECORDS)
    wait_tiered(c, topic, 2)
    assert remote_objects(store, topic), "nothing in the store"
    # The log start is still 0; the local log start moved; something is tiered.
    for partition in range(2):
        o = java_offsets(c, topic, partition)
        assert o["earliest"] == 0 and o["earliest_local"] > 0, o
        assert o["earliest_local"] - 1 <= o["latest_tiered"] < o["latest"], o
    reads_before = metric_sum(c, "skein_remote_read_requests_total")
    check_all_read(c, topic, 2, RECORDS, tmp_path)
    # The old records came from the store, the copies are counted.
    assert metric_sum(c, "skein_remote_read_requests_total") > reads_before
    assert metric_sum(c, "skein_remote_copy_segments_total") >= 2
    # A consumer positioned by time in the tiered part finds it there.
    from confluent_kafka import Consumer, TopicPartition
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "ts", "log_level": 3})
    try:
        found = cons.offsets_for_times([TopicPartition(topic, 0, 0)], timeout=30)
        assert found[0].offset == 0, found
    finally:
        cons.close()


def test_tiering_switched_on_while_the_topic_runs_and_after_the_leader_moved(tmp_path, stop_cluster):
    store = tmp_path / "store"
    c = start(tmp_path, str(store))
    stop_cluster.append(c)
    topic = "switched"
    create(c, topic, 1, TOPIC_CONFIGS)
    produce(c, topic, RECORDS)
    time.sleep(2)
    assert local_bases(c, topic, 0)[1][0] == 0 and not remote_objects(store, topic), \
        "tiered before it was switched on"
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    res = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("remote.storage.enable", "true", incremental_operation=AlterConfigOpType.SET)])
    admin_client(c).incremental_alter_configs([res])[res].result(timeout=30)
    wait_tiered(c, topic, 1)
    check_all_read(c, topic, 1, RECORDS, tmp_path)
    # The leader's process dies: another leads, copies what comes next, serves everything.
    leader = describe(c, topic)[0]["leader"]
    c.signal_broker(leader, signal.SIGKILL)
    util.wait_until(lambda: describe(c, topic)[0]["leader"] not in (leader, -1), 60, "a new leader")
    produce(c, topic, RECORDS, start_at=RECORDS)
    new_leader = describe(c, topic)[0]["leader"]
    util.wait_until(lambda: local_bases(c, topic, 0)[new_leader][0] >= RECORDS, 90,
                    "the new leader tiered the new records")
    check_all_read(c, topic, 1, 2 * RECORDS, tmp_path)


def test_a_broker_back_with_an_empty_disk_serves_tiered_data_without_copying_it(tmp_path, stop_cluster):
    store = tmp_path / "store"
    c = start(tmp_path, str(store))
    topic = "emptydisk"
    create(c, topic, 1, {**TOPIC_CONFIGS, "remote.storage.enable": "true"})
    produce(c, topic, RECORDS)
    wait_tiered(c, topic, 1)
    # Broker 1 loses its disk while the cluster is down.
    assert c.stop() in (0, None)
    _active.remove(c)
    wiped = 1
    shutil.rmtree(c.data_dir / f"broker-{wiped}")
    _active.append(c)
    c.start()
    stop_cluster.append(c)
    util.wait_until(lambda: wiped in describe(c, topic)[0]["isr"], 90, "the wiped broker back in the ISR")
    bases = local_bases(c, topic, 0)[wiped]
    assert bases and bases[0] > 0, f"the wiped broker copied tiered data to its disk: {bases}"
    assert "follower built its state from remote storage" in c.broker_log(wiped).read_text()
    # It leads: kill the leader's process (the local platform starts it again) until it does.
    for _ in range(6):
        util.wait_until(lambda: len(describe(c, topic)[0]["isr"]) == 3, 90, "every replica in sync")
        leader = describe(c, topic)[0]["leader"]
        if leader == wiped:
            break
        c.signal_broker(leader, signal.SIGKILL)
        util.wait_until(lambda: describe(c, topic)[0]["leader"] not in (leader, -1), 60, "a new leader")
    assert describe(c, topic)[0]["leader"] == wiped
    check_all_read(c, topic, 1, RECORDS, tmp_path)
    assert local_bases(c, topic, 0)[wiped][0] > 0, "the tiered records were copied to its disk"


def test_tiering_to_a_real_s3_server(tmp_path, stop_cluster, seaweedfs):
    c = start(tmp_path, seaweedfs.url, ["--tiered-storage-endpoint", seaweedfs.endpoint,
                                         "--override", f"rsm.config.s3.access.key.id={seaweedfs.access_key}",
                                         "--override", f"rsm.config.s3.secret.access.key={seaweedfs.secret_key}"])
    stop_cluster.append(c)
    topic = "s3tiered"
    create(c, topic, 2, {**TOPIC_CONFIGS, "remote.storage.enable": "true"})
    produce(c, topic, RECORDS)
    wait_tiered(c, topic, 2)
    check_all_read(c, topic, 2, RECORDS, tmp_path)
    # An outage of the store: produce and consume the local tail go on; tiering resumes after.
    with seaweedfs.outage():
        produce(c, topic, RECORDS, start_at=RECORDS)
        time.sleep(3)
    wait_tiered(c, topic, 2)
    util.wait_until(lambda: all(local_bases(c, topic, p)[b][0] >= RECORDS // 2
                                for p in range(2) for b in (1, 2, 3)), 120,
                    "records produced during the outage tiered once the store is back")
    check_all_read(c, topic, 2, 2 * RECORDS, tmp_path)
