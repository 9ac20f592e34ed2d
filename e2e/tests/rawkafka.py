"""The Kafka wire protocol written by hand with `struct`, over a plain TCP socket: for tests that
send what no well-behaved client sends (`test_hostile_clients.py`).

Nothing here is clever: each request is laid out field by field as in Kafka's JSON message
definitions (clients/src/main/resources/common/message/*.json), at one fixed version per API, and
each answer is parsed just far enough for the tests. Record batches (magic 2) are built byte by
byte, CRC-32C included, so that a test can put anything in their headers.

Versions used (all served by Apache Kafka 4.1): ApiVersions v0, Produce v8, Fetch v11,
ListOffsets v7 (flexible; the first with MAX_TIMESTAMP), FindCoordinator v2, OffsetCommit v8
(flexible), OffsetFetch v5, DeleteRecords v1, InitProducerId v1, AddPartitionsToTxn v1,
EndTxn v1 and v5 (flexible; transaction version 2), DescribeTransactions v0 (flexible),
SaslHandshake v1.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

from kafka.record.util import calc_crc32c

# Error codes (org.apache.kafka.common.protocol.Errors).
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_TOPIC_EXCEPTION = 17
INVALID_TIMESTAMP = 32
INVALID_TXN_STATE = 48
CONCURRENT_TRANSACTIONS = 51
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87

# ListOffsets special timestamps.
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3

# Record batch attributes (magic 2).
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

API_PRODUCE, API_FETCH, API_LIST_OFFSETS = 0, 1, 2
API_OFFSET_COMMIT, API_OFFSET_FETCH, API_FIND_COORDINATOR = 8, 9, 10
API_SASL_HANDSHAKE, API_API_VERSIONS, API_DELETE_RECORDS, API_INIT_PRODUCER_ID = 17, 18, 21, 22
API_ADD_PARTITIONS_TO_TXN, API_END_TXN = 24, 26
API_DESCRIBE_TRANSACTIONS = 65


# ------------------------------------------------------------------------------------------
# encoding


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(s: str | None) -> bytes:
    """STRING / NULLABLE_STRING: int16 length (-1 for null), UTF-8 bytes."""
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def bytes_(b: bytes | None) -> bytes:
    """BYTES / NULLABLE_BYTES (RECORDS in a non-flexible version): int32 length, bytes."""
    if b is None:
        return i32(-1)
    return i32(len(b)) + b


def array(items, encode) -> bytes:
    """ARRAY: int32 count (-1 for null), then each item."""
    if items is None:
        return i32(-1)
    items = list(items)
    return i32(len(items)) + b"".join(encode(x) for x in items)


def uvarint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(v: int) -> bytes:
    """Zigzag varint / varlong (record fields)."""
    return uvarint((v << 1) ^ (v >> 63))


def compact_string(s: str | None) -> bytes:
    """COMPACT_STRING / COMPACT_NULLABLE_STRING: uvarint length+1 (0 for null)."""
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


def compact_array(items, encode) -> bytes:
    if items is None:
        return uvarint(0)
    items = list(items)
    return uvarint(len(items) + 1) + b"".join(encode(x) for x in items)


NO_TAGS = uvarint(0)


# ------------------------------------------------------------------------------------------
# decoding


class Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.at = 0

    def _take(self, fmt: str):
        v = struct.unpack_from(fmt, self.data, self.at)[0]
        self.at += struct.calcsize(fmt)
        return v

    def i8(self) -> int:
        return self._take(">b")

    def i16(self) -> int:
        return self._take(">h")

    def i32(self) -> int:
        return self._take(">i")

    def i64(self) -> int:
        return self._take(">q")

    def raw(self, n: int) -> bytes:
        b = self.data[self.at:self.at + n]
        assert len(b) == n, f"response truncated: {n} bytes wanted at {self.at}, {len(self.data)} in all"
        self.at += n
        return b

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self.raw(n).decode()

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self.raw(n)

    def array(self, decode) -> list | None:
        n = self.i32()
        return None if n < 0 else [decode(self) for _ in range(n)]

    def uvarint(self) -> int:
        shift = v = 0
        while True:
            b = self.data[self.at]
            self.at += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7

    def compact_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.raw(n - 1).decode()

    def compact_array(self, decode) -> list | None:
        n = self.uvarint()
        return None if n == 0 else [decode(self) for _ in range(n - 1)]

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.raw(self.uvarint())


# ------------------------------------------------------------------------------------------
# record batches (magic 2)


def record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
           headers: list[tuple[str, bytes]] = ()) -> bytes:
    """One record of a v2 batch: varint length, then attributes, deltas, key, value, headers."""
    def blob(b: bytes | None) -> bytes:
        return varint(-1) if b is None else varint(len(b)) + b
    body = (i8(0) + varint(timestamp_delta) + varint(offset_delta) + blob(key) + blob(value)
            + varint(len(headers)) + b"".join(blob(k.encode()) + blob(v) for k, v in headers))
    return varint(len(body)) + body


def control_record(commit: bool, coordinator_epoch: int = 0) -> bytes:
    """An end-transaction marker: key = version 0 + type (0 ABORT, 1 COMMIT), value = version 0 +
    coordinator epoch."""
    return record(0, 0, i16(0) + i16(1 if commit else 0), i16(0) + i32(coordinator_epoch))


def record_batch(records: list[bytes], *, base_timestamp: int, max_timestamp: int | None = None,
                 attributes: int = 0, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, base_offset: int = 0, last_offset_delta: int | None = None) -> bytes:
    """A v2 record batch around already encoded records. `max_timestamp` defaults to the base
    timestamp and `last_offset_delta` to len(records) - 1; the CRC-32C covers attributes onwards."""
    after_crc = (i16(attributes) + i32(len(records) - 1 if last_offset_delta is None else last_offset_delta)
                 + i64(base_timestamp) + i64(base_timestamp if max_timestamp is None else max_timestamp)
                 + i64(producer_id) + i16(producer_epoch) + i32(base_sequence)
                 + i32(len(records)) + b"".join(records))
    crc = calc_crc32c(after_crc)
    # partitionLeaderEpoch + magic + crc + the rest: what batchLength counts.
    tail = i32(-1) + i8(2) + struct.pack(">I", crc) + after_crc
    return i64(base_offset) + i32(len(tail)) + tail


@dataclass
class BatchHeader:
    base_offset: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    records: int


def batch_headers(records: bytes) -> list[BatchHeader]:
    """The headers of the v2 batches in a Fetch response's records (a partial last batch left out)."""
    out, at = [], 0
    while at + 61 <= len(records):
        base_offset, length = struct.unpack_from(">qi", records, at)
        if at + 12 + length > len(records):
            break
        magic = records[at + 16]
        assert magic == 2, f"magic {magic} at {at}"
        attributes, last_delta, base_ts, max_ts, pid = struct.unpack_from(">hiqqq", records, at + 21)
        count = struct.unpack_from(">i", records, at + 57)[0]
        out.append(BatchHeader(base_offset, attributes, last_delta, base_ts, max_ts, pid, count))
        at += 12 + length
    return out


def batch_crc_ok(records: bytes) -> bool:
    """Whether every whole v2 batch in `records` carries the CRC-32C of its bytes."""
    at, checked = 0, 0
    while at + 61 <= len(records):
        length = struct.unpack_from(">i", records, at + 8)[0]
        end = at + 12 + length
        if end > len(records):
            break
        crc = struct.unpack_from(">I", records, at + 17)[0]
        if calc_crc32c(records[at + 21:end]) != crc:
            return False
        at, checked = end, checked + 1
    return checked > 0


# ------------------------------------------------------------------------------------------
# connection


class Connection:
    """One TCP connection speaking the request/response framing; one request in flight."""

    def __init__(self, host: str, port: int, *, client_id: str = "e2e-hostile", timeout: float = 30.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.client_id = client_id
        self.correlation = 0

    @classmethod
    def to(cls, bootstrap: str, **kw) -> Connection:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        return cls(host, int(port), **kw)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, api: int, version: int, body: bytes, *, flexible: bool = False) -> Reader:
        """Sends one request (header v1, or v2 with empty tagged fields when `flexible`) and
        returns a reader over the response body (after the correlation id and, for a flexible
        version other than ApiVersions', the header's tagged fields)."""
        self.correlation += 1
        header = i16(api) + i16(version) + i32(self.correlation) + string(self.client_id)
        if flexible:
            header += NO_TAGS
        frame = header + body
        self.sock.sendall(i32(len(frame)) + frame)
        size = struct.unpack(">i", self._exact(4))[0]
        r = Reader(self._exact(size))
        corr = r.i32()
        assert corr == self.correlation, f"correlation id {corr}, expected {self.correlation}"
        if flexible and api != API_API_VERSIONS:
            r.tags()
        return r

    def _exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError(f"closed by the broker ({len(out)} of {n} bytes read)")
            out += chunk
        return bytes(out)

    def wait_closed(self, timeout: float) -> float | None:
        """Seconds until the broker closes the connection (EOF or reset), or None if it is still
        open after `timeout`. Whatever the broker sends meanwhile is read and dropped."""
        start = time.monotonic()
        deadline = start + timeout
        while True:
            # At least one look, however short the timeout (a close already received counts).
            self.sock.settimeout(max(deadline - time.monotonic(), 0.001))
            try:
                if self.sock.recv(65536) == b"":
                    return time.monotonic() - start
            except socket.timeout:
                return None
            except (ConnectionResetError, BrokenPipeError):
                return time.monotonic() - start

    # -- APIs ---------------------------------------------------------------------------------

    def api_versions(self) -> dict[int, tuple[int, int]]:
        r = self.request(API_API_VERSIONS, 0, b"")
        assert r.i16() == NONE
        return {k: (lo, hi) for k, lo, hi in r.array(lambda r: (r.i16(), r.i16(), r.i16()))}

    def produce(self, batches: dict[tuple[str, int], bytes], *, transactional_id: str | None = None,
                acks: int = -1, timeout_ms: int = 30000) -> dict[tuple[str, int], dict]:
        """Produce v8. `batches`: (topic, partition) -> the partition's record bytes. Answers per
        partition: {"error", "base_offset", "record_errors": [(index, message)], "message"}."""
        by_topic: dict[str, list[tuple[int, bytes]]] = {}
        for (t, p), data in batches.items():
            by_topic.setdefault(t, []).append((p, data))
        body = (string(transactional_id) + i16(acks) + i32(timeout_ms)
                + array(by_topic.items(), lambda tp: string(tp[0]) + array(
                    tp[1], lambda pd: i32(pd[0]) + bytes_(pd[1]))))
        r = self.request(API_PRODUCE, 8, body)
        out = {}

        def partition(r: Reader, topic: str) -> None:
            p = r.i32()
            res = {"error": r.i16(), "base_offset": r.i64()}
            r.i64()  # log_append_time_ms
            r.i64()  # log_start_offset
            res["record_errors"] = r.array(lambda r: (r.i32(), r.string()))
            res["message"] = r.string()
            out[(topic, p)] = res

        def topic(r: Reader) -> None:
            name = r.string()
            r.array(lambda r: partition(r, name))

        r.array(topic)
        return out

    def produce_v3(self, topic: str, partition: int, data: bytes, acks: int = -1) -> int:
        """Produce v3 (the oldest Kafka 4 serves) of one partition's records: its error code."""
        body = (string(None) + i16(acks) + i32(30000)
                + array([topic], lambda t: string(t) + array([partition], lambda p: i32(p) + bytes_(data))))
        r = self.request(API_PRODUCE, 3, body)
        errors = []
        r.array(lambda r: (r.string(), r.array(lambda r: (r.i32(), errors.append(r.i16()), r.i64(), r.i64()))))
        assert len(errors) == 1, errors
        return errors[0]

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20) -> dict:
        """Fetch v11 (no session, read_uncommitted, no wait): {"error", "high_watermark", "records"}."""
        body = (i32(-1) + i32(0) + i32(1) + i32(max_bytes) + i8(0) + i32(0) + i32(-1)
                + array([topic], lambda t: string(t) + array(
                    [partition], lambda p: i32(p) + i32(-1) + i64(offset) + i64(-1) + i32(max_bytes)))
                + array([], None) + string(""))
        r = self.request(API_FETCH, 11, body)
        r.i32()  # throttle
        assert r.i16() == NONE
        r.i32()  # session id
        out = {}

        def part(r: Reader) -> None:
            r.i32()
            out["error"] = r.i16()
            out["high_watermark"] = r.i64()
            r.i64()  # last stable offset
            r.i64()  # log start offset
            r.array(lambda r: (r.i64(), r.i64()))  # aborted transactions
            r.i32()  # preferred read replica
            out["records"] = r.bytes_() or b""

        r.array(lambda r: (r.string(), r.array(part)))
        return out

    def list_offset(self, topic: str, partition: int, timestamp: int, version: int = 7) -> tuple[int, int, int]:
        """ListOffsets (v6-v9, v7 unless told) for one partition: (error, timestamp, offset)."""
        assert 6 <= version <= 9, version
        body = (i32(-1) + i8(0)
                + compact_array([topic], lambda t: compact_string(t) + compact_array(
                    [partition], lambda p: i32(p) + i32(-1) + i64(timestamp) + NO_TAGS) + NO_TAGS)
                + NO_TAGS)
        r = self.request(API_LIST_OFFSETS, version, body, flexible=True)
        r.i32()  # throttle
        got = []

        def part(r: Reader) -> None:
            r.i32()
            got.append((r.i16(), r.i64(), r.i64()))
            r.i32()  # leader epoch
            r.tags()

        r.compact_array(lambda r: (r.compact_string(), r.compact_array(part), r.tags()))
        assert len(got) == 1, got
        return got[0]

    def end_offset(self, topic: str, partition: int = 0, timeout: float = 30.0) -> int:
        """The partition's high watermark (ListOffsets latest), asked again while the partition
        has no leader yet (a topic just created: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER)."""
        deadline = time.monotonic() + timeout
        while True:
            err, _, offset = self.list_offset(topic, partition, LATEST)
            if err == NONE:
                return offset
            if err not in (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER) or time.monotonic() > deadline:
                raise AssertionError(f"ListOffsets(latest) {topic}-{partition}: error {err}")
            time.sleep(0.1)

    def init_producer_id(self, transactional_id: str | None = None, timeout_ms: int = 60000) -> tuple[int, int, int]:
        """InitProducerId v1: (error, producer id, epoch)."""
        r = self.request(API_INIT_PRODUCER_ID, 1, string(transactional_id) + i32(timeout_ms))
        r.i32()  # throttle
        return r.i16(), r.i64(), r.i16()

    def find_coordinator(self, key: str, key_type: int = 0) -> tuple[int, int]:
        """FindCoordinator v2 for a group (key type 0) or a transactional id (1): (error, node id)."""
        r = self.request(API_FIND_COORDINATOR, 2, string(key) + i8(key_type))
        r.i32()  # throttle
        err = r.i16()
        r.string()  # message
        return err, r.i32()

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: dict[str, list[int]]) -> dict[tuple[str, int], int]:
        """AddPartitionsToTxn v1 (what a transactional producer sends before its first batch to a
        partition): the error code per partition."""
        body = (string(transactional_id) + i64(producer_id) + i16(producer_epoch)
                + array(partitions.items(), lambda tp: string(tp[0]) + array(tp[1], i32)))
        r = self.request(API_ADD_PARTITIONS_TO_TXN, 1, body)
        r.i32()  # throttle
        out = {}
        r.array(lambda r: (lambda name: r.array(lambda r: out.__setitem__((name, r.i32()), r.i16())))(r.string()))
        return out

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> int:
        """EndTxn v1: the error code."""
        body = string(transactional_id) + i64(producer_id) + i16(producer_epoch) + i8(1 if commit else 0)
        r = self.request(API_END_TXN, 1, body)
        r.i32()  # throttle
        return r.i16()

    def end_txn_v5(self, transactional_id: str, producer_id: int, producer_epoch: int,
                   commit: bool) -> tuple[int, int, int]:
        """EndTxn v5, as a transaction version 2 client sends it: (error, producer id, epoch) of
        the answer (the epoch the producer goes on with)."""
        body = (compact_string(transactional_id) + i64(producer_id) + i16(producer_epoch)
                + i8(1 if commit else 0) + NO_TAGS)
        r = self.request(API_END_TXN, 5, body, flexible=True)
        r.i32()  # throttle
        return r.i16(), r.i64(), r.i16()

    def describe_transaction(self, transactional_id: str) -> dict:
        """DescribeTransactions v0 of one id: {"error", "state", "producer_id", "epoch",
        "partitions": [(topic, partition)]}."""
        body = compact_array([transactional_id], compact_string) + NO_TAGS
        r = self.request(API_DESCRIBE_TRANSACTIONS, 0, body, flexible=True)
        r.i32()  # throttle

        def topic(r: Reader) -> list[tuple[str, int]]:
            name = r.compact_string()
            parts = r.compact_array(lambda r: r.i32())
            r.tags()
            return [(name, p) for p in parts or []]

        def state(r: Reader) -> dict:
            out = {"error": r.i16()}
            r.compact_string()  # transactional id
            out["state"] = r.compact_string()
            r.i32()  # timeout
            r.i64()  # start
            out["producer_id"], out["epoch"] = r.i64(), r.i16()
            out["partitions"] = [tp for t in r.compact_array(topic) or [] for tp in t]
            r.tags()
            return out

        return r.compact_array(state)[0]

    def offset_commit(self, group: str, offsets: dict[str, list[tuple[int, int]]], *,
                      generation: int = -1, member_id: str = "") -> dict[tuple[str, int], int]:
        """OffsetCommit v8 as a simple (non-member) client commits: generation -1, empty member
        id. `offsets`: topic -> [(partition, offset)]. Answers the error code per partition."""
        body = (compact_string(group) + i32(generation) + compact_string(member_id) + compact_string(None)
                + compact_array(offsets.items(), lambda tp: compact_string(tp[0]) + compact_array(
                    tp[1], lambda po: i32(po[0]) + i64(po[1]) + i32(-1) + compact_string("") + NO_TAGS)
                    + NO_TAGS)
                + NO_TAGS)
        r = self.request(API_OFFSET_COMMIT, 8, body, flexible=True)
        r.i32()  # throttle
        out = {}

        def topic(r: Reader) -> None:
            name = r.compact_string()

            def part(r: Reader) -> None:
                p = r.i32()
                out[(name, p)] = r.i16()
                r.tags()

            r.compact_array(part)
            r.tags()

        r.compact_array(topic)
        return out

    def offset_fetch(self, group: str, topics: dict[str, list[int]] | None = None) -> tuple[int, dict]:
        """OffsetFetch v5 (`topics` None: every committed offset of the group): (group error,
        {(topic, partition): (offset, error)})."""
        body = string(group) + array(None if topics is None else topics.items(),
                                     lambda tp: string(tp[0]) + array(tp[1], i32))
        r = self.request(API_OFFSET_FETCH, 5, body)
        r.i32()  # throttle
        out = {}

        def topic(r: Reader) -> None:
            name = r.string()

            def part(r: Reader) -> None:
                p, offset = r.i32(), r.i64()
                r.i32()  # leader epoch
                r.string()  # metadata
                out[(name, p)] = (offset, r.i16())

            r.array(part)

        r.array(topic)
        return r.i16(), out

    def delete_records(self, offsets: dict[tuple[str, int], int], timeout_ms: int = 30000) -> dict:
        """DeleteRecords v1: (topic, partition) -> delete before this offset. Answers
        (topic, partition) -> (low watermark, error)."""
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (t, p), o in offsets.items():
            by_topic.setdefault(t, []).append((p, o))
        body = array(by_topic.items(), lambda tp: string(tp[0]) + array(tp[1], lambda po: i32(po[0]) + i64(po[1]))) \
            + i32(timeout_ms)
        r = self.request(API_DELETE_RECORDS, 1, body)
        r.i32()  # throttle
        out = {}

        def topic(r: Reader) -> None:
            name = r.string()

            def part(r: Reader) -> None:
                p = r.i32()
                low = r.i64()
                out[(name, p)] = (low, r.i16())

            r.array(part)

        r.array(topic)
        return out

    def sasl_handshake(self, mechanism: str) -> tuple[int, list[str]]:
        """SaslHandshake v1: (error, enabled mechanisms)."""
        r = self.request(API_SASL_HANDSHAKE, 1, string(mechanism))
        return r.i16(), r.array(lambda r: r.string())

    # -- added for test_authorization_matrix.py -----------------------------------------------

    def sasl_plain(self, user: str, password: str) -> None:
        """SaslHandshake v1 (PLAIN) then SaslAuthenticate v1 with the PLAIN token; raises
        AssertionError unless both succeed."""
        err, mechanisms = self.sasl_handshake("PLAIN")
        assert err == NONE, f"SaslHandshake(PLAIN): error {err}, mechanisms {mechanisms}"
        r = self.request(API_SASL_AUTHENTICATE, 1, bytes_(b"\0" + user.encode() + b"\0" + password.encode()))
        err, message = r.i16(), r.string()
        assert err == NONE, f"SaslAuthenticate(PLAIN {user}): error {err}: {message}"

    def message(self, request, response_class):
        """Sends a kafka-python protocol object (`kafka.protocol.*`, e.g. `MetadataRequest[12](...)`,
        its version already chosen) and decodes the answer with `response_class` at that version."""
        version = request.API_VERSION
        r = self.request(request.API_KEY, version, request.encode(),
                         flexible=request.flexible_version_q(version))
        return response_class.decode(r.data[r.at:], version=version)

    def consumer_group_heartbeat(self, group: str, member_id: str, member_epoch: int = 0,
                                 topics: list[str] | None = None) -> tuple[int, str | None]:
        """ConsumerGroupHeartbeat v1 (KIP-848; flexible), a member joining with epoch 0 and a
        subscription by name: (error, error message)."""
        body = (compact_string(group) + compact_string(member_id) + i32(member_epoch)
                + compact_string(None) + compact_string(None) + i32(30000)
                + compact_array(topics, compact_string) + compact_string(None)  # subscribed regex
                + compact_string(None) + compact_array([], None) + NO_TAGS)
        r = self.request(API_CONSUMER_GROUP_HEARTBEAT, 1, body, flexible=True)
        r.i32()  # throttle
        return r.i16(), r.compact_string()

    def consumer_group_describe(self, groups: list[str]) -> list[tuple[int, str]]:
        """ConsumerGroupDescribe v1: (error, group id) per group (what follows them is skipped:
        only the first group is read when the answer carries members)."""
        body = compact_array(groups, compact_string) + i8(0) + NO_TAGS
        r = self.request(API_CONSUMER_GROUP_DESCRIBE, 1, body, flexible=True)
        r.i32()  # throttle
        n = r.uvarint() - 1
        out = []
        for _ in range(max(n, 0)):
            err = r.i16()
            r.compact_string()  # message
            out.append((err, r.compact_string()))
            r.compact_string()  # state
            r.i32()  # group epoch
            r.i32()  # assignment epoch
            r.compact_string()  # assignor
            if r.uvarint() != 1:  # members: stop at a group that has some
                break
            r.i32()  # authorized operations
            r.tags()
        return out


API_SASL_AUTHENTICATE = 36
API_CONSUMER_GROUP_HEARTBEAT, API_CONSUMER_GROUP_DESCRIBE = 68, 69
