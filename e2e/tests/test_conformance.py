"""Places where Skein must answer as Apache Kafka 4.1 does (issue #20), seen through real clients.
Every test here also runs against Apache Kafka (E2E_TARGET=kafka).

KIP-467 record-level errors: a batch with refused records is refused whole, and the Produce
response names each refused record by its index in the batch, so the Java producer fails those
records with InvalidRecordException and the broker's reason, and the others with "part of a batch
which had one or more invalid records"; librdkafka fails the batch with the partition's error code
(INVALID_RECORD, or INVALID_TIMESTAMP when a timestamp is among the reasons)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

import util


def create(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 1, config=config)]).values():
        f.result(30)


def java_produce(bootstrap: str, topic: str, tmp: Path, rows: list[tuple[bytes | None, int | None]]) -> list[dict]:
    """Sends (key, timestamp) records with the Java producer in one batch; one result per record."""
    inp = tmp / "in.tsv"
    with open(inp, "w") as f:
        for i, (key, ts) in enumerate(rows):
            f.write(f"{key.hex() if key is not None else '-'}\t{f'value-{i}'.encode().hex()}\t-\t"
                    f"{ts if ts is not None else '-'}\n")
    out = tmp / "out.jsonl"
    # A long linger: the records go as one batch (flush sends it), however busy the machine.
    util.java("produce", bootstrap, topic=topic, input=inp, out=out, allow_errors="true", linger_ms=2000)
    return util.read_jsonl(out)


def end_offset(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "conformance-probe"})
    try:
        return util.high_watermark(c, topic, 0)
    finally:
        c.close()


def test_keyless_records_on_a_compacted_topic_are_named_in_record_errors(broker, topic, tmp):
    create(broker.bootstrap, topic, {"cleanup.policy": "compact"})
    got = java_produce(broker.bootstrap, topic, tmp, [(b"k0", None), (None, None), (b"k2", None), (None, None)])
    assert [r["p"] for r in got] == [-1, -1, -1, -1], got
    for i in (1, 3):
        assert got[i]["e"].startswith("InvalidRecordException"), got[i]
        assert "without key" in got[i]["e"], got[i]
    for i in (0, 2):
        # Not a refused record itself: failed because its batch was refused.
        assert "without key" not in got[i]["e"] and "batch" in got[i]["e"], got[i]

    # librdkafka: every record of the batch fails with INVALID_RECORD.
    errors = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "retries": 0})
    for key in (b"k", None, b"k3"):
        p.produce(topic, key=key, value=b"v", on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(30) == 0
    assert [e.code() if e else None for e in errors] == [KafkaError.INVALID_RECORD] * 3, errors
    assert end_offset(broker.bootstrap, topic) == 0, "a refused batch must write nothing"


def test_timestamps_outside_the_allowed_window_are_named_in_record_errors(broker, topic, tmp):
    create(broker.bootstrap, topic, {"message.timestamp.after.max.ms": "3600000",
                                     "message.timestamp.before.max.ms": "3600000"})
    now = int(time.time() * 1000)
    got = java_produce(broker.bootstrap, topic, tmp,
                       [(b"a", now), (b"b", now + 7_200_000), (b"c", now), (b"d", now - 7_200_000)])
    assert [r["p"] for r in got] == [-1, -1, -1, -1], got
    # The Java producer raises InvalidRecordException with the broker's message for a record named
    # in record_errors (whatever the partition's error code).
    for i in (1, 3):
        assert got[i]["e"].startswith("InvalidRecordException") and "Timestamp" in got[i]["e"], got[i]
    for i in (0, 2):
        assert "Timestamp" not in got[i]["e"] and "batch" in got[i]["e"], got[i]
    # librdkafka sees the partition's error code: INVALID_TIMESTAMP.
    errors = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "retries": 0})
    for ts in (now, now + 7_200_000):
        p.produce(topic, key=b"k", value=b"v", timestamp=ts, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(30) == 0
    assert [e.code() if e else None for e in errors] == [KafkaError.INVALID_TIMESTAMP] * 2, errors
    assert end_offset(broker.bootstrap, topic) == 0
    # The same records inside the window are written.
    got = java_produce(broker.bootstrap, topic, tmp, [(b"a", now), (b"b", now + 60_000), (b"c", now - 60_000)])
    assert [r["o"] for r in got] == [0, 1, 2], got


def test_delete_records_answers_the_low_watermark(broker, topic):
    """DeleteRecords through librdkafka's admin API: the answer carries the new low watermark,
    consumers start there, and an offset beyond the high watermark is refused."""
    from confluent_kafka import TopicPartition
    create(broker.bootstrap, topic, {})
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(10):
        p.produce(topic, value=f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = admin.delete_records([TopicPartition(topic, 0, 6)], request_timeout=30)
    assert list(res.values())[0].result(30).low_watermark == 6
    bad = admin.delete_records([TopicPartition(topic, 0, 11)], request_timeout=30)
    try:
        list(bad.values())[0].result(30)
        raise AssertionError("deleting beyond the high watermark must fail")
    except Exception as e:  # noqa: BLE001
        assert "OFFSET_OUT_OF_RANGE" in str(e) or "out of range" in str(e).lower(), e
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}"})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (6, 10)
    finally:
        c.close()


def test_tiered_storage_topic_configs_are_kept_and_remote_storage_is_refused_without_the_system(broker, topic):
    """On a broker without remote.log.storage.system.enable (Kafka's default; tiered storage
    itself is tested in test_tiered_storage.py), the tiered-storage topic configs are valid topic configs: a topic is created
    with them and describes them, with their defaults where unset; only remote.storage.enable=true
    is refused, with INVALID_CONFIG."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    kept = {"local.retention.ms": "3600000", "remote.log.copy.disable": "true", "remote.storage.enable": "false"}
    create(broker.bootstrap, topic, kept)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    got = admin.describe_configs([res])[res].result(30)
    for k, v in kept.items():
        assert got[k].value == v, (k, got[k].value)
        assert ConfigSource(got[k].source) == ConfigSource.DYNAMIC_TOPIC_CONFIG, (k, got[k].source)
    assert got["local.retention.bytes"].value == "-2"
    assert got["remote.log.delete.on.disable"].value == "false"

    refused = admin.create_topics([NewTopic(f"{topic}-remote", 1, 1, config={"remote.storage.enable": "true"})])
    with pytest.raises(Exception) as e:
        refused[f"{topic}-remote"].result(30)
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG, e.value
    assert "Tiered Storage functionality is disabled" in e.value.args[0].str(), e.value


def test_earliest_local_and_latest_tiered_offsets_without_tiered_storage(broker, topic):
    """The Java Admin client's OffsetSpec.earliestLocal() (ListOffsets -4, v8), latestTiered()
    (-5, v9) and earliestPendingUpload() (-6, v11) on a topic that tiers nothing: the earliest
    local offset is the log start, no offset is tiered (-1), none is pending upload (-1)."""
    create(broker.bootstrap, topic, {})
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        p.produce(topic, value=f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0
    got = util.java("offsets", broker.bootstrap, topic=topic, partition=0, ts="")
    assert (got["earliest"], got["latest"]) == (0, 5), got
    assert got["earliest_local"] == 0, got
    assert got["latest_tiered"] == -1, got
    assert got["earliest_pending_upload"] == -1, got


@pytest.mark.parametrize("topic_codec,stored", [("lz4", "lz4"), ("uncompressed", "none"), ("producer", "gzip")])
def test_topic_compression_type_is_how_batches_are_stored(broker, topic, topic_codec, stored):
    """A topic's compression.type other than `producer` makes the broker store every batch with
    that codec whatever the producer used (Kafka's DumpLogSegments reads the codec back from the
    segment file); consumers read the same records either way."""
    create(broker.bootstrap, topic, {"compression.type": topic_codec})
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "gzip", "linger.ms": 20,
                  "enable.idempotence": True})
    for i in range(50):
        p.produce(topic, key=f"k{i}".encode(), value=(f"value-{i}-" + "x" * 100).encode(), partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 50 and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None and not m.error():
            got.append(m.value().decode())
    c.close()
    assert got == [f"value-{i}-" + "x" * 100 for i in range(50)]
    segment = next((broker.data_dir / f"{topic}-0").glob("*.log"))
    out = util.kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--files", str(segment)).stdout.decode()
    codecs = set(re.findall(r"compresscodec: (\w+)", out))
    assert codecs == {stored}, out[-2000:]


def test_kip848_regex_subscription_is_resolved_by_the_broker(group_broker, topic):
    """A KIP-848 consumer (group.protocol=consumer) subscribing with a regular expression: the
    group coordinator resolves it over the topics (librdkafka sends the pattern), so records of
    every matching topic arrive and a topic outside the pattern is left alone."""
    b = group_broker.bootstrap
    matching = [f"{topic}-a", f"{topic}-b"]
    for t in matching + [f"x{topic}"]:
        create(b, t, {})
    p = Producer({"bootstrap.servers": b})
    for t in matching + [f"x{topic}"]:
        for i in range(5):
            p.produce(t, value=f"{t}/{i}".encode(), partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": b, "group.id": f"g-{topic}", "group.protocol": "consumer",
                  "auto.offset.reset": "earliest"})
    c.subscribe([f"^{re.escape(topic)}-.*"])
    got = set()
    deadline = time.monotonic() + 60
    try:
        while len(got) < 10 and time.monotonic() < deadline:
            m = c.poll(1)
            if m is not None and not m.error():
                got.add(m.value().decode())
    finally:
        c.close()
    assert got == {f"{t}/{i}" for t in matching for i in range(5)}, sorted(got)


def fetch_session_requests(broker) -> dict[str, float]:
    """Skein's count of Fetch requests by session use (skein_fetch_session_requests_total)."""
    import urllib.request
    text = urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10).read().decode()
    return {m[1]: float(m[2]) for m in re.finditer(
        r'^skein_fetch_session_requests_total\{kind="(\w+)"\} (\S+)$', text, re.M)}


def test_java_consumer_reads_through_an_incremental_fetch_session(group_broker, topic, tmp):
    """KIP-227: the Java consumer opens a fetch session and then names only partitions whose
    position moved; the broker answers only partitions with news. A 24-partition topic gets
    records in rounds on a few partitions at a time while one Java group member reads: every
    record arrives once, in offset order per partition. On Skein the broker's counters show the
    incremental fetches and no refused session."""
    b = group_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    for f in admin.create_topics([NewTopic(topic, 24, 1)]).values():
        f.result(30)
    before = fetch_session_requests(group_broker) if hasattr(group_broker, "metrics_port") else {}
    total = 12 * 25
    events = tmp / "events.jsonl"
    err = open(tmp / "java.err", "w")
    member = subprocess.Popen(
        util.java_cmd("group-consume", "--bootstrap", b, "--topic", topic, "--group", f"g-{topic}",
                      "--out", str(events), "--max-records", str(total), "--timeout-ms", "90000",
                      "--protocol", "consumer"),
        stdout=subprocess.DEVNULL, stderr=err)
    try:
        # Wait for the assignment before producing, so the rounds reach a live session.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and '"assigned","parts":[0,' not in (
                events.read_text() if events.exists() else ""):
            time.sleep(0.2)
        p = Producer({"bootstrap.servers": b, "linger.ms": 5})
        i = 0
        for round_no in range(12):
            for k in range(25):
                p.produce(topic, value=f"v{i:07d}-{round_no}".encode(), partition=(round_no * 5 + k % 3) % 24)
                i += 1
            assert p.flush(30) == 0
            time.sleep(0.3)
        assert member.wait(120) == 0, (tmp / "java.err").read_text()[-3000:]
    finally:
        if member.poll() is None:
            member.kill()
        err.close()
    recs = [e for e in util.read_jsonl(events) if e["ev"] == "rec"]
    assert sorted(r["i"] for r in recs) == list(range(total)), "every record once"
    by_partition: dict[int, list[int]] = {}
    for r in recs:
        by_partition.setdefault(r["p"], []).append(r["o"])
    for part, offsets in by_partition.items():
        assert offsets == list(range(len(offsets))), (part, offsets)
    if hasattr(group_broker, "metrics_port"):
        after = fetch_session_requests(group_broker)
        grew = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        assert grew.get("open", 0) >= 1 and grew.get("incremental", 0) >= 10, grew
        assert grew.get("refused", 0) == 0, grew
