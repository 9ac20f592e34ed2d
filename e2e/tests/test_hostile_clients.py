"""Hostile clients (issue #41): requests written by hand over a raw TCP socket (`rawkafka.py`)
that no well-behaved client sends, and the answers Apache Kafka 4.1 gives them. Every test also
runs against Apache Kafka (E2E_TARGET=kafka): the expected answers are Kafka's, observed, not
guessed.

- a client writing transaction markers (control batches) or transactional batches without a
  transactional id on the Produce request;
- a client writing into the internal topics `__consumer_offsets` and `__transaction_state`
  (Produce, DeleteRecords): a forged offset commit must not move a group's offset;
- a batch whose header lies about its max timestamp (the broker stores the records' own maximum),
  and a record outside the topic's timestamp window under an honest-looking header;
- OffsetCommit for partitions and topics that do not exist (one, and five thousand);
- before SASL authentication: an oversized frame, a frame that stalls half-way, and two hundred of
  those at once (the broker must neither wait forever nor reserve what the size prefix claims).

After each attack a normal client still produces and reads back a record: the broker survived.
"""

from __future__ import annotations

import os
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import rawkafka as rk
from brokers import KafkaBroker, free_port, make_broker

TARGET = os.environ.get("E2E_TARGET", "skein")
YEAR_2200_MS = 7_258_118_400_000  # 2200-01-01T00:00:00Z
TWO_DAYS_MS = 2 * 86_400_000
RETRIABLE_COORDINATOR = (rk.COORDINATOR_LOAD_IN_PROGRESS, rk.COORDINATOR_NOT_AVAILABLE, rk.NOT_COORDINATOR)


# ------------------------------------------------------------------------------------------
# helpers


def now_ms() -> int:
    return int(time.time() * 1000)


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    """Creates the topic and waits until every partition has a leader (ListOffsets answers)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})]).values():
        f.result(30)
    with rk.Connection.to(bootstrap) as c:
        for p in range(partitions):
            c.end_offset(topic, p)


def plain_batch(n: int = 1, ts: int | None = None) -> bytes:
    ts = now_ms() if ts is None else ts
    return rk.record_batch([rk.record(i, 0, f"k{i}".encode(), f"v{i}".encode()) for i in range(n)],
                           base_timestamp=ts)


def idempotent_producer_id(c: rk.Connection, timeout: float = 30.0) -> tuple[int, int]:
    """A producer id and epoch from InitProducerId with a null transactional id (what an
    idempotent producer gets), asked again while the broker is still loading its id block."""
    deadline = time.monotonic() + timeout
    while True:
        err, pid, epoch = c.init_producer_id(None)
        if err == rk.NONE:
            return pid, epoch
        assert err in RETRIABLE_COORDINATOR and time.monotonic() < deadline, f"InitProducerId(null): error {err}"
        time.sleep(0.2)


def wait_coordinator(c: rk.Connection, group: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while (err := c.find_coordinator(group)[0]) != rk.NONE:
        assert err in RETRIABLE_COORDINATOR and time.monotonic() < deadline, f"FindCoordinator({group}): error {err}"
        time.sleep(0.2)


def all_committed(c: rk.Connection, group: str, timeout: float = 30.0) -> dict:
    """Every offset the group has committed (OffsetFetch with null topics)."""
    deadline = time.monotonic() + timeout
    while True:
        err, offsets = c.offset_fetch(group)
        if err == rk.NONE:
            return offsets
        assert err in RETRIABLE_COORDINATOR and time.monotonic() < deadline, f"OffsetFetch({group}): error {err}"
        time.sleep(0.2)


def errors_of(answer: dict) -> dict:
    return {tp: r["error"] for tp, r in answer.items()}


def assert_serving(bootstrap: str, topic: str, conf: dict | None = None) -> None:
    """The broker survived: confluent-kafka produces a record to partition 0 of `topic` (acks=all)
    and a consumer reads it back at its acknowledged offset."""
    conf = {"bootstrap.servers": bootstrap, **(conf or {})}
    value = f"still-serving-{uuid.uuid4().hex}".encode()
    acked: list = []
    p = Producer({**conf, "acks": "all", "message.timeout.ms": 30000})
    p.produce(topic, value=value, partition=0, on_delivery=lambda err, msg: acked.append((err, msg.offset())))
    assert p.flush(40) == 0 and acked and acked[0][0] is None, f"a normal produce failed afterwards: {acked}"
    offset = acked[0][1]
    c = Consumer({**conf, "group.id": f"serving-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, offset)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(1)
            if m is not None and not m.error():
                assert (m.offset(), m.value()) == (offset, value)
                return
        raise AssertionError(f"the record produced at {topic}-0@{offset} was not read back within 30 s")
    finally:
        c.close()


def committed_offset(bootstrap: str, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        c.close()


def internal_partitions(bootstrap: str, name: str) -> list[int]:
    """The partitions of an internal topic as Metadata for all topics lists them (partition 0 if
    not listed; asking for the topic by name could create it)."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    t = md.topics.get(name)
    return sorted(t.partitions) if t is not None and t.partitions else [0]


# ------------------------------------------------------------------------------------------
# transaction markers and transactional batches from a client


def test_transactional_control_batch_without_transactional_id_is_refused(broker, topic):
    """A client writes its own transaction marker: a batch with attributes 0x30 (transactional +
    control) holding one COMMIT or ABORT control record (key: version 0 + type; value: version 0 +
    coordinator epoch), under the producer id InitProducerId(null) gave it or under a made-up one,
    and no transactional id on the Produce request.

    Kafka refuses the whole request before looking at any partition: every partition answers
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53), including a second partition of the same request
    that carried an ordinary batch, and nothing is written to either."""
    create_topic(broker.bootstrap, topic, partitions=2)
    with rk.Connection.to(broker.bootstrap) as c:
        pid, epoch = idempotent_producer_id(c)
        for producer in ((pid, epoch), (4242, 0)):
            for commit in (True, False):
                marker = rk.record_batch([rk.control_record(commit)], base_timestamp=now_ms(),
                                         attributes=rk.ATTR_TRANSACTIONAL | rk.ATTR_CONTROL,
                                         producer_id=producer[0], producer_epoch=producer[1])
                got = c.produce({(topic, 0): marker, (topic, 1): plain_batch()})
                what = f"{'COMMIT' if commit else 'ABORT'} marker as producer {producer}"
                assert errors_of(got) == {(topic, 0): rk.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                          (topic, 1): rk.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}, (what, got)
                assert (c.end_offset(topic, 0), c.end_offset(topic, 1)) == (0, 0), f"{what}: something was written"
    assert_serving(broker.bootstrap, topic)


def test_non_transactional_control_batch_is_refused(broker, topic):
    """A control batch that is not transactional (attributes 0x20) with a COMMIT or ABORT
    record, with and without a producer id: Kafka answers INVALID_RECORD (87) for that partition
    and writes nothing there. The refusal is per partition: an ordinary batch for another
    partition in the same request is written (error 0)."""
    create_topic(broker.bootstrap, topic, partitions=2)
    with rk.Connection.to(broker.bootstrap) as c:
        pid, epoch = idempotent_producer_id(c)
        written = 0
        for producer in ((pid, epoch), (-1, -1)):
            for commit in (True, False):
                marker = rk.record_batch([rk.control_record(commit)], base_timestamp=now_ms(),
                                         attributes=rk.ATTR_CONTROL, producer_id=producer[0],
                                         producer_epoch=producer[1])
                got = c.produce({(topic, 0): marker, (topic, 1): plain_batch()})
                what = f"control batch 0x20 ({'COMMIT' if commit else 'ABORT'}) as producer {producer}"
                assert errors_of(got) == {(topic, 0): rk.INVALID_RECORD, (topic, 1): rk.NONE}, (what, got)
                written += 1
                assert (c.end_offset(topic, 0), c.end_offset(topic, 1)) == (0, written), what
    assert_serving(broker.bootstrap, topic)


def test_transactional_batch_without_transactional_id_is_refused(broker, topic):
    """An ordinary record in a transactional batch (attributes 0x10) under the producer id of
    InitProducerId(null), with no transactional id on the Produce request: the records would sit
    in a transaction no coordinator knows, holding read_committed readers at the last stable
    offset for good. Kafka: TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53), nothing written."""
    create_topic(broker.bootstrap, topic)
    with rk.Connection.to(broker.bootstrap) as c:
        pid, epoch = idempotent_producer_id(c)
        batch = rk.record_batch([rk.record(0, 0, b"k", b"in a transaction nobody began")],
                                base_timestamp=now_ms(), attributes=rk.ATTR_TRANSACTIONAL,
                                producer_id=pid, producer_epoch=epoch, base_sequence=0)
        got = c.produce({(topic, 0): batch})
        assert errors_of(got) == {(topic, 0): rk.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}, got
        assert c.end_offset(topic) == 0
    assert_serving(broker.bootstrap, topic)


def test_transactional_batch_for_a_partition_outside_its_transaction_is_refused(broker, topic):
    """KIP-890 part 1: a transactional producer (InitProducerId with a transactional id) adds
    partition 0 to its transaction, then sends a transactional batch to partition 1, which it
    never added. The leader asks the transaction's coordinator (AddPartitionsToTxn verify_only)
    and refuses the batch with INVALID_TXN_STATE (48): it would open a transaction on partition 1
    that the coordinator will never close, holding its last stable offset for good. The same
    batch to partition 0 is written."""
    create_topic(broker.bootstrap, topic, partitions=2)
    tid = f"hostile-{uuid.uuid4().hex[:8]}"
    with rk.Connection.to(broker.bootstrap) as c:
        # FindCoordinator makes the transaction state topic when it is missing.
        deadline = time.monotonic() + 60
        while (err := c.find_coordinator(tid, 1)[0]) != rk.NONE:
            assert err in RETRIABLE_COORDINATOR and time.monotonic() < deadline, f"FindCoordinator({tid}): {err}"
            time.sleep(0.2)
        while True:
            err, pid, epoch = c.init_producer_id(tid)
            if err == rk.NONE:
                break
            assert err in RETRIABLE_COORDINATOR and time.monotonic() < deadline, f"InitProducerId({tid}): {err}"
            time.sleep(0.2)
        assert c.add_partitions_to_txn(tid, pid, epoch, {topic: [0]}) == {(topic, 0): rk.NONE}

        def batch() -> bytes:
            return rk.record_batch([rk.record(0, 0, b"k", b"v")], base_timestamp=now_ms(),
                                   attributes=rk.ATTR_TRANSACTIONAL, producer_id=pid,
                                   producer_epoch=epoch, base_sequence=0)

        got = c.produce({(topic, 1): batch()}, transactional_id=tid)
        assert errors_of(got) == {(topic, 1): rk.INVALID_TXN_STATE}, got
        assert c.end_offset(topic, 1) == 0, "the refused batch was written"
        got = c.produce({(topic, 0): batch()}, transactional_id=tid)
        assert errors_of(got) == {(topic, 0): rk.NONE}, got
        assert c.end_offset(topic, 0) == 1
        # Aborted, so that read_committed readers of partition 0 move on.
        assert c.end_txn(tid, pid, epoch, commit=False) == rk.NONE
    assert_serving(broker.bootstrap, topic)


def test_zstd_batch_on_a_produce_version_before_7_is_refused(broker, topic):
    """A zstd-compressed batch (codec 4) on Produce v3: clients that old cannot read zstd back, so
    Kafka refuses it with UNSUPPORTED_COMPRESSION_TYPE (76) and writes nothing; the same batch on
    Produce v8 is written."""
    import zstandard
    create_topic(broker.bootstrap, topic)
    records = rk.record(0, 0, b"k", b"zstd on an old produce version")
    compressed = zstandard.ZstdCompressor().compress(records)
    batch = rk.record_batch([compressed], base_timestamp=now_ms(), attributes=4)
    # record_batch counts its records: one compressed blob holds one record.
    with rk.Connection.to(broker.bootstrap) as c:
        assert c.produce_v3(topic, 0, batch) == rk.UNSUPPORTED_COMPRESSION_TYPE
        assert c.end_offset(topic) == 0
        assert errors_of(c.produce({(topic, 0): batch})) == {(topic, 0): rk.NONE}
        assert c.end_offset(topic) == 1
    assert_serving(broker.bootstrap, topic)


# ------------------------------------------------------------------------------------------
# internal topics


def test_internal_topics_refuse_produce_and_delete_records(broker, topic):
    """A client writes into `__consumer_offsets` (a forged offset-commit record moving a group's
    committed offset to 999, sent to every partition) and `__transaction_state` (a forged
    transaction-state record), and asks DeleteRecords to empty partition 0 of each. Both topics
    exist first (a group commits an offset; a transactional producer commits a transaction).

    Kafka answers INVALID_TOPIC_EXCEPTION (17) for every partition of both, to Produce and to
    DeleteRecords alike, and the group's committed offset stays where the group put it.

    Surprise, not tested here: Kafka lets a request whose client id is `__admin_client` (the id
    its old admin tools used) append to internal topics; such a forged record was written
    (error 0) in a manual run."""
    create_topic(broker.bootstrap, topic)
    group = f"g-{topic}"
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        p.produce(topic, value=f"r{i}".encode(), partition=0)
    assert p.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    consumer.close()
    assert committed_offset(broker.bootstrap, group, topic) == 3
    txn_id = f"tx-{topic}"
    tp = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id})
    tp.init_transactions(30)
    tp.begin_transaction()
    tp.produce(topic, value=b"transactional", partition=0)
    tp.commit_transaction(30)

    ts = now_ms()
    # OffsetCommitKey v1 (group, topic, partition) -> OffsetCommitValue v3 (offset 999).
    forged_commit = rk.record(0, 0, rk.i16(1) + rk.string(group) + rk.string(topic) + rk.i32(0),
                              rk.i16(3) + rk.i64(999) + rk.i32(-1) + rk.string("") + rk.i64(ts))
    # TransactionLogKey v0 -> TransactionLogValue v0: CompleteCommit (4) for a made-up producer.
    forged_txn = rk.record(0, 0, rk.i16(0) + rk.string(txn_id),
                           rk.i16(0) + rk.i64(4242) + rk.i16(0) + rk.i32(60000) + rk.i8(4)
                           + rk.i32(-1) + rk.i64(ts) + rk.i64(ts))
    batches = {("__consumer_offsets", p): rk.record_batch([forged_commit], base_timestamp=ts)
               for p in internal_partitions(broker.bootstrap, "__consumer_offsets")}
    batches.update({("__transaction_state", p): rk.record_batch([forged_txn], base_timestamp=ts)
                    for p in internal_partitions(broker.bootstrap, "__transaction_state")})
    with rk.Connection.to(broker.bootstrap) as c:
        got = errors_of(c.produce(batches))
        assert got == {tp: rk.INVALID_TOPIC_EXCEPTION for tp in batches}, \
            {tp: e for tp, e in got.items() if e != rk.INVALID_TOPIC_EXCEPTION} or got
        got = c.delete_records({("__consumer_offsets", 0): rk.LATEST, ("__transaction_state", 0): rk.LATEST})
        assert got == {("__consumer_offsets", 0): (-1, rk.INVALID_TOPIC_EXCEPTION),
                       ("__transaction_state", 0): (-1, rk.INVALID_TOPIC_EXCEPTION)}, got
    assert committed_offset(broker.bootstrap, group, topic) == 3, "a forged record moved the group's offset"
    assert_serving(broker.bootstrap, topic)


# ------------------------------------------------------------------------------------------
# timestamps


def test_batch_header_max_timestamp_is_recomputed_from_the_records(broker, topic):
    """A batch of two records timestamped now and now+7 ms whose header claims a max timestamp
    in the year 2200 (which would pin time-based retention and ListOffsets(MAX_TIMESTAMP)).
    Kafka accepts it and stores the records' real maximum: ListOffsets with timestamp -3
    (MAX_TIMESTAMP) answers now+7 at offset 1, and the batch read back by a raw Fetch carries
    max timestamp now+7 (and a CRC that matches the rewritten header)."""
    create_topic(broker.bootstrap, topic)
    ts = now_ms()
    batch = rk.record_batch([rk.record(0, 0, b"k0", b"v0"), rk.record(1, 7, b"k1", b"v1")],
                            base_timestamp=ts, max_timestamp=YEAR_2200_MS)
    with rk.Connection.to(broker.bootstrap) as c:
        got = c.produce({(topic, 0): batch})
        assert got[(topic, 0)]["error"] == rk.NONE and got[(topic, 0)]["base_offset"] == 0, got
        assert c.list_offset(topic, 0, rk.MAX_TIMESTAMP) == (rk.NONE, ts + 7, 1)
        fetched = c.fetch(topic, 0, 0)
        assert fetched["error"] == rk.NONE and fetched["high_watermark"] == 2, fetched
        headers = rk.batch_headers(fetched["records"])
        assert [(h.base_offset, h.records, h.base_timestamp, h.max_timestamp) for h in headers] == \
            [(0, 2, ts, ts + 7)], headers
        assert rk.batch_crc_ok(fetched["records"]), "the stored batch's CRC does not match its bytes"
    assert_serving(broker.bootstrap, topic)


@pytest.mark.parametrize("timestamp,version", [(-3, 6), (-4, 7), (-5, 8), (-6, 9), (-100, 9)])
def test_list_offsets_special_timestamps_before_their_version_are_unsupported(broker, topic, timestamp, version):
    """ListOffsets' special timestamps exist from the version that introduced them (-3 v7,
    -4 v8, -5 v9), and no other negative timestamp exists: asked before, or unknown, the
    partition answers UNSUPPORTED_VERSION (35), never a lookup of a negative time."""
    create_topic(broker.bootstrap, topic)
    with rk.Connection.to(broker.bootstrap) as c:
        c.produce({(topic, 0): plain_batch(3)})
        assert c.list_offset(topic, 0, timestamp, version)[0] == 35
        # The version that knows it (or any, for a time) answers.
        assert c.list_offset(topic, 0, rk.EARLIEST, version) == (rk.NONE, -1, 0)
    assert_serving(broker.bootstrap, topic)


def test_record_outside_the_timestamp_window_under_an_honest_looking_header(broker, topic):
    """`message.timestamp.after.max.ms=3600000` on the topic; a batch whose header says "now"
    (base and max timestamp) holds a record two days in the future (its timestamp delta). Kafka
    checks every record, not the header: INVALID_TIMESTAMP (32), record_errors naming record 0,
    nothing written."""
    create_topic(broker.bootstrap, topic, config={"message.timestamp.after.max.ms": "3600000"})
    ts = now_ms()
    batch = rk.record_batch([rk.record(0, TWO_DAYS_MS, b"k", b"from the future")],
                            base_timestamp=ts, max_timestamp=ts)
    with rk.Connection.to(broker.bootstrap) as c:
        got = c.produce({(topic, 0): batch})[(topic, 0)]
        assert got["error"] == rk.INVALID_TIMESTAMP, got
        assert [i for i, _ in got["record_errors"]] == [0], got
        assert c.end_offset(topic) == 0
    assert_serving(broker.bootstrap, topic)


# ------------------------------------------------------------------------------------------
# offset commits for partitions that do not exist


def test_offset_commit_for_partitions_that_do_not_exist(broker, topic):
    """OffsetCommit v8 as a simple client commits (generation -1, empty member id) for partition
    999 of a one-partition topic and for partition 0 of a topic that does not exist: Kafka
    answers UNKNOWN_TOPIC_OR_PARTITION (3) for each, and OffsetFetch (all topics) shows nothing
    committed for the group. A commit for the real partition 0 then works and is the only one."""
    create_topic(broker.bootstrap, topic)
    group, missing = f"g-{topic}", f"{topic}-missing"
    with rk.Connection.to(broker.bootstrap) as c:
        wait_coordinator(c, group)
        got = c.offset_commit(group, {topic: [(999, 5)], missing: [(0, 5)]})
        assert got == {(topic, 999): rk.UNKNOWN_TOPIC_OR_PARTITION,
                       (missing, 0): rk.UNKNOWN_TOPIC_OR_PARTITION}, got
        assert all_committed(c, group) == {}
        assert c.offset_commit(group, {topic: [(0, 0)]}) == {(topic, 0): rk.NONE}
        assert all_committed(c, group) == {(topic, 0): (0, rk.NONE)}
    assert_serving(broker.bootstrap, topic)


def test_offset_commit_with_five_thousand_made_up_partitions(broker, topic):
    """One OffsetCommit naming 5000 partitions that do not exist (1..2500 of a one-partition
    topic, 0..2499 of a missing topic): Kafka answers each of the 5000 with
    UNKNOWN_TOPIC_OR_PARTITION (3) and stores nothing for the group."""
    create_topic(broker.bootstrap, topic)
    group, missing = f"g-{topic}", f"{topic}-missing"
    request = {topic: [(p, 7) for p in range(1, 2501)], missing: [(p, 7) for p in range(2500)]}
    with rk.Connection.to(broker.bootstrap) as c:
        wait_coordinator(c, group)
        got = c.offset_commit(group, request)
        assert len(got) == 5000, len(got)
        wrong = {tp: e for tp, e in got.items() if e != rk.UNKNOWN_TOPIC_OR_PARTITION}
        assert not wrong, f"{len(wrong)} partitions not answered UNKNOWN_TOPIC_OR_PARTITION, e.g. {list(wrong.items())[:5]}"
        assert all_committed(c, group) == {}
    assert_serving(broker.bootstrap, topic)


# ------------------------------------------------------------------------------------------
# share groups (KIP-932)

def share_fetch_open(c: rk.Connection, group: str, member: str, topic_id: uuid.UUID) -> int:
    """ShareFetch v1 opening a share session (epoch 0) on partition 0, waiting for nothing: its
    top-level error code."""
    part = rk.i32(0) + rk.compact_array([], lambda x: x) + rk.NO_TAGS
    topic = topic_id.bytes + rk.compact_array([part], lambda x: x) + rk.NO_TAGS
    body = (rk.compact_string(group) + rk.compact_string(member) + rk.i32(0) + rk.i32(0) + rk.i32(1)
            + rk.i32(1 << 20) + rk.i32(100) + rk.i32(100) + rk.compact_array([topic], lambda x: x)
            + rk.compact_array([], lambda x: x) + rk.NO_TAGS)
    r = c.request(78, 1, body, flexible=True)
    r.i32()
    return r.i16()


def share_acknowledge(c: rk.Connection, group: str, member: str, epoch: int, topic_id: uuid.UUID,
                      first: int, last: int, types: list[int]) -> tuple[int, list[int]]:
    """ShareAcknowledge v1 of one batch on partition 0: (top-level error, partition errors)."""
    batch = rk.i64(first) + rk.i64(last) + rk.compact_array(types, rk.i8) + rk.NO_TAGS
    part = rk.i32(0) + rk.compact_array([batch], lambda x: x) + rk.NO_TAGS
    topic = topic_id.bytes + rk.compact_array([part], lambda x: x) + rk.NO_TAGS
    body = (rk.compact_string(group) + rk.compact_string(member) + rk.i32(epoch)
            + rk.compact_array([topic], lambda x: x) + rk.NO_TAGS)
    r = c.request(79, 1, body, flexible=True)
    r.i32()
    top = r.i16()
    r.compact_string()

    def partition(rd):
        rd.i32()
        code = rd.i16()
        rd.compact_string()
        rd.i32(), rd.i32(), rd.tags()  # CurrentLeader
        rd.tags()
        return code

    def topic_(rd):
        rd.raw(16)
        codes = rd.compact_array(partition)
        rd.tags()
        return codes

    topics = r.compact_array(topic_) or []
    return top, [code for t in topics for code in (t or [])]


@pytest.mark.parametrize("first,last,types", [
    (-(1 << 63), (1 << 63) - 1, [1]),  # every offset there is, one type
    (-(1 << 63), (1 << 63) - 1, [1, 1]),  # two types for 2^64 offsets
    (0, (1 << 63) - 1, [2]),  # from the start to the end of time
], ids=["all-of-i64", "all-of-i64-two-types", "to-i64-max"])
def test_share_acknowledgement_of_every_offset_there_is(broker, topic, first, last, types):
    """A share-group member acknowledges a batch spanning (nearly) all of i64: refused at once
    (INVALID_REQUEST or INVALID_RECORD_STATE for the partition), never walked offset by offset, and
    the broker keeps serving."""
    create_topic(broker.bootstrap, topic)
    group = f"hostile-share-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tid = admin.describe_topics(TopicCollection([topic]))[topic].result(30).topic_id
    mask = (1 << 64) - 1
    topic_id = uuid.UUID(int=((tid.get_most_significant_bits() & mask) << 64)
                         | (tid.get_least_significant_bits() & mask))
    # The group and its share state: --reset-offsets initializes them.
    from util import kafka_tool
    kafka_tool("org.apache.kafka.tools.consumer.group.ShareGroupCommand", "--bootstrap-server", broker.bootstrap,
               "--reset-offsets", "--to-earliest", "--execute", "--group", group, "--topic", topic)
    member = uuid.uuid4().hex[:22]
    with rk.Connection.to(broker.bootstrap) as c:
        deadline = time.monotonic() + 30
        while (err := share_fetch_open(c, group, member, topic_id)) != rk.NONE:
            assert time.monotonic() < deadline, f"ShareFetch: error {err}"
            time.sleep(0.2)
        started = time.monotonic()
        top, parts = share_acknowledge(c, group, member, 1, topic_id, first, last, types)
        assert time.monotonic() - started < 10
        assert top == rk.NONE, top
        assert len(parts) == 1 and parts[0] in (42, 121), parts  # INVALID_REQUEST, INVALID_RECORD_STATE
    assert_serving(broker.bootstrap, topic)


# ------------------------------------------------------------------------------------------
# before SASL authentication

IDLE_MS = 4000  # connections.max.idle.ms on the SASL broker
PLAIN_USERS = {"alice": "alice-secret"}


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    """A broker of the target under test with a PLAINTEXT listener (admin, bootstrap) and a
    SASL_PLAINTEXT one (PLAIN, user alice), `connections.max.idle.ms` = IDLE_MS, and
    `sasl.server.max.receive.size` left at Kafka's default, 524288."""
    b = make_broker(TARGET, tmp_path_factory.mktemp(f"{TARGET}-hostile-sasl"))
    b.sasl_port = free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}"
    protocols = "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
    controller = ""
    if isinstance(b, KafkaBroker):
        controller, protocols = f",CONTROLLER://127.0.0.1:{b.controller_port}", protocols + ",CONTROLLER:PLAINTEXT"
    users = " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items())
    b.overrides.update({
        "listeners": listeners + controller,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": protocols,
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};",
        "connections.max.idle.ms": str(IDLE_MS),
    })
    b.start()
    yield b
    b.stop()


def sasl_conf(b) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{b.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": PLAIN_USERS["alice"]}


def assert_sasl_serving(b, topic: str) -> None:
    """An authenticated client (PLAIN) still produces and reads back a record."""
    create_topic(b.bootstrap, topic)
    assert_serving(b.bootstrap, topic, sasl_conf(b))


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def unauthenticated(b, handshake: bool) -> rk.Connection:
    """A connection to the SASL listener, after a PLAIN SaslHandshake when `handshake`."""
    c = rk.Connection("127.0.0.1", b.sasl_port, timeout=10)
    if handshake:
        assert c.sasl_handshake("PLAIN") == (rk.NONE, ["PLAIN"])
    return c


@pytest.mark.sasl
@pytest.mark.parametrize("handshake", [True, False], ids=["after-handshake", "first-frame"])
def test_oversized_frame_before_authentication_closes_the_connection(sasl_broker, topic, handshake):
    """Before authentication, a frame whose size prefix announces 50 MB (under
    socket.request.max.bytes, far over sasl.server.max.receive.size = 524288), followed by 10
    bytes: Kafka closes the connection at once (0.1 s measured), reserving nothing, both after a
    SaslHandshake and as the connection's first frame. Asserted: closed within 2 s, well before
    connections.max.idle.ms (4 s) could be what closed it."""
    with unauthenticated(sasl_broker, handshake) as c:
        c.send_raw(struct.pack(">i", 50_000_000) + bytes(10))
        closed = c.wait_closed(2.0)
        assert closed is not None, "a 50 MB frame before authentication: connection still open after 2 s"
        print(f"50 MB frame ({'after a handshake' if handshake else 'first frame'}): closed after {closed:.2f} s")
    assert_sasl_serving(sasl_broker, topic)


@pytest.mark.sasl
@pytest.mark.parametrize("kind", ["stalled-after-handshake", "stalled-first-frame", "silent"])
def test_stalled_connection_before_authentication_is_closed(sasl_broker, topic, kind):
    """Before authentication, a frame that announces 100 bytes, sends 10 and then nothing more
    (after a SaslHandshake, or as the first frame), and a connection that sends nothing at all:
    Kafka closes each when connections.max.idle.ms (4 s here) passes without progress (4.2 s
    measured; its selector looks for idle connections between polls). Asserted: closed within 15 s."""
    with unauthenticated(sasl_broker, kind == "stalled-after-handshake") as c:
        if kind != "silent":
            c.send_raw(struct.pack(">i", 100) + bytes(10))
        closed = c.wait_closed(15.0)
        assert closed is not None, f"{kind}: connection still open 15 s later (connections.max.idle.ms = {IDLE_MS})"
        print(f"{kind}: closed after {closed:.2f} s (connections.max.idle.ms = {IDLE_MS})")
    assert_sasl_serving(sasl_broker, topic)


@pytest.mark.sasl
def test_many_stalled_large_frames_before_authentication_cost_no_memory(sasl_broker, topic):
    """200 connections (half after a SaslHandshake, half not) each announce a 1 MiB frame
    (over sasl.server.max.receive.size) and send 10 bytes of it: 200 MiB claimed. Kafka closes
    all 200 at once (within 0.1 s) and its resident memory grows by 20-35 MB (the JVM's noise). Asserted: the broker's RSS (/proc/PID/status VmRSS) grows by less than 100 MB while
    they are open, and every connection is closed within 15 s.

    Not asserted, observed: 200 frames announcing 500 000 bytes (under the limit) each make Kafka
    allocate the announced size (RSS +96 MB) until connections.max.idle.ms closes them."""
    pid = sasl_broker.proc.pid
    before = rss_mb(pid)
    conns = []
    try:
        for i in range(200):
            c = unauthenticated(sasl_broker, handshake=bool(i % 2))
            conns.append(c)
            c.send_raw(struct.pack(">i", 1 << 20) + bytes(10))
        peak = rss_mb(pid)
        time.sleep(0.5)
        peak = max(peak, rss_mb(pid))
        assert peak - before < 100, f"RSS grew from {before:.0f} MB to {peak:.0f} MB with 200 stalled 1 MiB frames"
        deadline = time.monotonic() + 15
        still_open = [i for i, c in enumerate(conns) if c.wait_closed(max(0.0, deadline - time.monotonic())) is None]
        print(f"RSS {before:.0f} MB before, {peak:.0f} MB with 200 stalled 1 MiB frames; "
              f"{200 - len(still_open)} of 200 closed, the last {15 - (deadline - time.monotonic()):.2f} s after the check")
        assert not still_open, f"{len(still_open)} of 200 connections still open after 15 s"
    finally:
        for c in conns:
            c.close()
    assert_sasl_serving(sasl_broker, topic)
