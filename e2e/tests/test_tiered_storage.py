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
    """The Java client's earliest, latest, earliest local (-4), latest tiered (-5) and earliest
    pending upload (-6) offsets."""
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
        assert o["earliest_pending_upload"] == o["latest_tiered"] + 1, o
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


def test_read_committed_skips_aborted_transactions_in_tiered_segments(tmp_path, stop_cluster):
    """Transactions, a third of them aborted, tiered; a read_committed consumer (librdkafka) from
    offset 0 reads exactly the committed records: the aborted ones come back with the remote
    segments' transaction indexes, as from local segments."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    c = start(tmp_path, str(tmp_path / "store"))
    stop_cluster.append(c)
    topic = "txn-tiered"
    create(c, topic, 1, {**TOPIC_CONFIGS, "remote.storage.enable": "true"})
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "tiered-txn",
                  "batch.size": 16384, "linger.ms": 5, "log_level": 3})
    p.init_transactions(30)
    committed: list[int] = []
    i = 0
    for t in range(30):
        p.begin_transaction()
        values = list(range(i, i + 100))
        i += 100
        for v in values:
            p.produce(topic, value=f"v{v:08d}".encode() + b"x" * 180)
        if t % 3 == 2:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            committed += values
    wait_tiered(c, topic, 1)
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "rc", "isolation.level": "read_committed",
                     "enable.auto.commit": False, "log_level": 3})
    try:
        cons.assign([TopicPartition(topic, 0, 0)])
        got: list[int] = []
        deadline = time.monotonic() + 120
        while len(got) < len(committed) and time.monotonic() < deadline:
            m = cons.poll(1)
            if m is not None and not m.error():
                got.append(int(m.value()[1:9]))
        # nothing more after the committed ones
        extra = [m for m in [cons.poll(2)] if m is not None and not m.error()]
    finally:
        cons.close()
    assert got == committed, f"read {len(got)} records, {len(committed)} committed"
    assert not extra, "records beyond the committed ones"


def earliest(c: LocalCluster, topic: str, partition: int = 0) -> int:
    from confluent_kafka import Consumer, TopicPartition
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "earliest", "log_level": 3})
    try:
        return cons.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[0]
    finally:
        cons.close()


def test_remote_data_goes_by_retention_delete_records_disabling_and_topic_deletion(tmp_path, stop_cluster):
    """Remote segments are deleted by retention.bytes (the log start moves past them), by
    DeleteRecords, when remote.storage.enable is turned off with remote.log.delete.on.disable
    (the log start moves to the local log start), and with their topic."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    store = tmp_path / "store"
    c = start(tmp_path, str(store))
    stop_cluster.append(c)
    admin = admin_client(c)

    def remote_logs(topic: str) -> int:
        return sum(1 for f in remote_objects(store, topic) if f.name.endswith(".log"))

    # retention.bytes: ~600 KB of records, 300 KB kept in all (remote + local-only).
    create(c, "kept", 1, {**TOPIC_CONFIGS, "remote.storage.enable": "true", "retention.bytes": "300000",
                          "local.retention.bytes": "100000"})
    produce(c, "kept", RECORDS)
    util.wait_until(lambda: earliest(c, "kept") > 0, 60, "retention.bytes moved the log start past remote data")
    start_offset = earliest(c, "kept")
    util.wait_until(lambda: remote_logs("kept") <= 300000 // 65536 + 1, 60, "remote segments deleted")
    got = consume_all(c, "kept", 1)[0]
    assert got[0][0] == start_offset and [o for o, _ in got] == list(range(start_offset, RECORDS))

    # DeleteRecords below the local log start: remote segments below it go.
    create(c, "trimmed", 1, {**TOPIC_CONFIGS, "remote.storage.enable": "true"})
    produce(c, "trimmed", RECORDS)
    wait_tiered(c, "trimmed", 1)
    before = remote_logs("trimmed")
    fut = admin.delete_records([TopicPartition("trimmed", 0, 1000)])
    list(fut.values())[0].result(timeout=30)
    assert earliest(c, "trimmed") == 1000
    util.wait_until(lambda: remote_logs("trimmed") < before, 60, "remote segments below the new log start deleted")
    got = consume_all(c, "trimmed", 1)[0]
    assert [o for o, _ in got] == list(range(1000, RECORDS))

    # Turning tiering off needs remote.log.delete.on.disable=true (Kafka's rule) and deletes it all.
    res = ConfigResource("topic", "trimmed", incremental_configs=[
        ConfigEntry("remote.storage.enable", "false", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="invalid to disable remote storage without deleting remote data"):
        admin.incremental_alter_configs([res])[res].result(timeout=30)
    res = ConfigResource("topic", "trimmed", incremental_configs=[
        ConfigEntry("remote.storage.enable", "false", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("remote.log.delete.on.disable", "true", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(timeout=30)
    util.wait_until(lambda: remote_logs("trimmed") == 0, 60, "remote data deleted when tiering was turned off")
    local_start = min(bases[0] for bases in local_bases(c, "trimmed", 0).values())
    util.wait_until(lambda: earliest(c, "trimmed") >= local_start, 30, "the log start at the local log start")

    # Deleting a topic deletes its remote data.
    assert remote_logs("kept") > 0
    admin.delete_topics(["kept"], operation_timeout=30)["kept"].result(timeout=60)
    util.wait_until(lambda: remote_logs("kept") == 0, 60, "a deleted topic's remote data deleted")


def broker_default(c: LocalCluster, op: str, config: str) -> None:
    """`kafka-configs --entity-type brokers --entity-default --add-config` (or
    `--delete-config`), Kafka's own tool."""
    flag = "--add-config" if op == "add" else "--delete-config"
    util.kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", c.bootstrap, "--alter",
                    "--entity-type", "brokers", "--entity-default", flag, config)


def test_copy_and_fetch_quotas_hold_the_store_to_their_rates(tmp_path, stop_cluster):
    """Kafka's remote-log quotas, set at run time with kafka-configs on the cluster default:
    `remote.log.manager.fetch.max.bytes.per.second` holds a catch-up read from the store to the
    rate (throttled partitions answered empty, nothing lost), and
    `remote.log.manager.copy.max.bytes.per.second` the leader's copies; removed, both stop holding
    anything back. Asserted are lower bounds on the time taken (a slow machine only takes
    longer) and the throttle counters."""
    store = tmp_path / "store"
    c = start(tmp_path, str(store))
    stop_cluster.append(c)
    topic = "quota"
    create(c, topic, 1, {**TOPIC_CONFIGS, "remote.storage.enable": "true"})
    produce(c, topic, RECORDS)
    wait_tiered(c, topic, 1)
    remote_bytes = metric_sum(c, "skein_remote_log_size_bytes")
    assert remote_bytes > 400_000, remote_bytes

    # Fetch quota: ~0.5 MB from the store at 100 kB/s takes seconds, not the ~0.1 s it takes
    # unthrottled; every record is read all the same.
    limit = 100_000
    broker_default(c, "add", f"remote.log.manager.fetch.max.bytes.per.second={limit}")
    time.sleep(2)  # the brokers take the dynamic config from their metadata
    throttled = metric_sum(c, "skein_remote_fetch_throttled_total")
    t0 = time.monotonic()
    got = consume_all(c, topic, 1)[0]
    took = time.monotonic() - t0
    assert [o for o, _ in got] == list(range(RECORDS))
    # One segment (64 KiB) may go at once; the rest at most at the limit.
    floor = (remote_bytes - 2 * 65536) / limit * 0.8
    assert took >= floor, f"{remote_bytes:.0f} remote bytes read in {took:.1f} s under a {limit} B/s quota"
    assert metric_sum(c, "skein_remote_fetch_throttled_total") > throttled
    print(f"fetch quota {limit} B/s: {remote_bytes:.0f} remote bytes read in {took:.1f} s (floor {floor:.1f} s)")
    broker_default(c, "delete", "remote.log.manager.fetch.max.bytes.per.second")
    time.sleep(2)
    throttled = metric_sum(c, "skein_remote_fetch_throttled_total")
    assert [o for o, _ in consume_all(c, topic, 1)[0]] == list(range(RECORDS))
    assert metric_sum(c, "skein_remote_fetch_throttled_total") == throttled, "throttled after the quota went"

    # Copy quota: another ~0.6 MB to copy at 50 kB/s.
    limit = 50_000
    broker_default(c, "add", f"remote.log.manager.copy.max.bytes.per.second={limit}")
    time.sleep(2)
    copied = metric_sum(c, "skein_remote_copy_bytes_total")
    t0 = time.monotonic()
    produce(c, topic, RECORDS, start_at=RECORDS)
    want = 400_000
    util.wait_until(lambda: metric_sum(c, "skein_remote_copy_bytes_total") - copied >= want, 120,
                    f"{want} more bytes copied under the copy quota")
    took = time.monotonic() - t0
    floor = (want - 2 * 65536) / limit * 0.8
    assert took >= floor, f"{want} bytes copied in {took:.1f} s under a {limit} B/s quota"
    assert metric_sum(c, "skein_remote_copy_throttle_seconds_total") > 0
    print(f"copy quota {limit} B/s: {want} bytes copied in {took:.1f} s (floor {floor:.1f} s)")
    broker_default(c, "delete", "remote.log.manager.copy.max.bytes.per.second")
    util.wait_until(lambda: metric_sum(c, "skein_remote_copy_lag_segments") == 0, 60,
                    "every closed segment copied once the copy quota went")
    got = consume_all(c, topic, 1)[0]
    assert [o for o, _ in got] == list(range(2 * RECORDS))


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
