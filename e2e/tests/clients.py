"""One adapter per client with the same interface, so tests can be parametrized over clients.

    create_topic(topic, partitions)      admin API (None for kcat: it has none)
    delete_topic(topic)
    list_topics() -> set[str]
    produce(topic, recs, codec) -> {index: (partition, offset)} of acknowledged records (may be {})
    consume(topic) -> [normalised record dicts]       manual assignment, from the beginning to the end
    offsets(topic, partition, [ts]) -> {"earliest": int, "latest": int, "times": {ts: offset|None}}
"""

from __future__ import annotations

import time
from pathlib import Path

import util
from util import PARTITIONS, Rec

TIMEOUT = 90.0


class ClientBase:
    name = "?"
    codecs = util.CODECS
    has_admin = True
    has_headers = True
    has_manual_assign = True
    ascii_only = False  # can only carry ASCII text without tabs/newlines

    def __init__(self, bootstrap: str, tmp: Path):
        self.bootstrap = bootstrap
        self.tmp = Path(tmp)

    def __repr__(self):
        return self.name


# -------------------------------------------------------------------------------------------
class Confluent(ClientBase):
    name = "confluent-kafka"

    def _admin(self):
        # keep the handle alive: futures of a destroyed AdminClient fail with _DESTROY
        if getattr(self, "_admin_client", None) is None:
            from confluent_kafka.admin import AdminClient
            self._admin_client = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 4})
        return self._admin_client

    def create_topic(self, topic, partitions=PARTITIONS):
        from confluent_kafka.admin import NewTopic
        fs = self._admin().create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                         operation_timeout=30, request_timeout=30)
        fs[topic].result(timeout=TIMEOUT)

    def delete_topic(self, topic):
        fs = self._admin().delete_topics([topic], operation_timeout=30, request_timeout=30)
        fs[topic].result(timeout=TIMEOUT)

    def list_topics(self):
        return set(self._admin().list_topics(timeout=30).topics)

    def produce(self, topic, recs, codec, acks="all", extra=None):
        from confluent_kafka import KafkaException, Producer
        conf = {"bootstrap.servers": self.bootstrap, "compression.type": codec, "acks": acks,
                "enable.idempotence": acks == "all", "linger.ms": 5, "message.timeout.ms": 60000,
                "log_level": 4}
        conf.update(extra or {})
        p = Producer(conf)
        acked, errors = {}, []

        def cb(i):
            def f(err, msg):
                if err is not None:
                    errors.append((i, err))
                else:
                    acked[i] = (msg.partition(), msg.offset())
            return f

        for i, r in enumerate(recs):
            kw = {"key": r.key, "value": r.value, "on_delivery": cb(i)}
            if r.headers:
                kw["headers"] = list(r.headers)
            if r.ts is not None:
                kw["timestamp"] = r.ts
            while True:
                try:
                    p.produce(topic, **kw)
                    break
                except BufferError:
                    p.poll(0.1)
            p.poll(0)
        left = p.flush(TIMEOUT)
        if left or errors:
            raise AssertionError(f"confluent-kafka produce: {left} not delivered, {len(errors)} errors, "
                                 f"first: {errors[:3]}")
        return acked

    def _consumer(self):
        from confluent_kafka import Consumer
        # group.id is required by the Python Consumer constructor; no subscribe/commit is used, so no
        # group coordinator is involved (librdkafka may still look the coordinator up in the background).
        return Consumer({"bootstrap.servers": self.bootstrap, "group.id": "e2e-unused-manual-assign",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "auto.offset.reset": "earliest", "log_level": 4})

    def consume(self, topic):
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        c = self._consumer()
        try:
            md = c.list_topics(topic, timeout=30)
            parts = sorted(md.topics[topic].partitions)
            assert parts, f"no partitions for {topic}"
            end = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in parts}
            c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
            out, pos = [], {p: 0 for p in parts}
            deadline = time.monotonic() + TIMEOUT
            while any(pos[p] < end[p] for p in parts):
                if time.monotonic() > deadline:
                    raise AssertionError(f"confluent-kafka consume timed out: positions {pos}, end {end}")
                for m in c.consume(num_messages=1000, timeout=0.5):
                    if m.error():
                        raise AssertionError(f"confluent-kafka consume error: {m.error()}")
                    hs = [[k, v.hex() if v is not None else None] for k, v in (m.headers() or [])]
                    out.append({"p": m.partition(), "o": m.offset(), "k": m.key().hex() if m.key() is not None
                                else None, "v": m.value().hex() if m.value() is not None else None,
                                "h": hs, "ts": m.timestamp()[1]})
                    pos[m.partition()] = m.offset() + 1
            return out
        finally:
            c.close()

    def offsets(self, topic, partition, tss):
        from confluent_kafka import TopicPartition
        c = self._consumer()
        try:
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            times = {}
            for ts in tss:
                r = c.offsets_for_times([TopicPartition(topic, partition, ts)], timeout=30)[0]
                assert r.error is None, f"offsets_for_times error {r.error}"
                times[ts] = None if r.offset < 0 else r.offset
            return {"earliest": lo, "latest": hi, "times": times}
        finally:
            c.close()

    def admin_list_offsets(self, topic, partition, tss):
        """AdminClient.list_offsets (ListOffsets via the admin API): earliest, latest, for_timestamp."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec
        a = self._admin()
        tp = TopicPartition(topic, partition)

        def one(spec):
            fut = a.list_offsets({tp: spec}, request_timeout=30)
            res = fut[tp].result(timeout=TIMEOUT)
            return res.offset

        times = {}
        for ts in tss:
            o = one(OffsetSpec.for_timestamp(ts))
            times[ts] = None if o < 0 else o
        return {"earliest": one(OffsetSpec.earliest()), "latest": one(OffsetSpec.latest()), "times": times}


# -------------------------------------------------------------------------------------------
class KafkaPython(ClientBase):
    name = "kafka-python"

    def _admin(self):
        from kafka import KafkaAdminClient
        return KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=30000)

    def create_topic(self, topic, partitions=PARTITIONS):
        from kafka.admin import NewTopic
        a = self._admin()
        try:
            a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)], timeout_ms=30000)
        finally:
            a.close()

    def delete_topic(self, topic):
        a = self._admin()
        try:
            a.delete_topics([topic], timeout_ms=30000)
        finally:
            a.close()

    def list_topics(self):
        a = self._admin()
        try:
            return set(a.list_topics())
        finally:
            a.close()

    def produce(self, topic, recs, codec):
        from kafka import KafkaProducer
        p = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=5,
                          compression_type=None if codec == "none" else codec, request_timeout_ms=30000)
        try:
            futs = []
            for r in recs:
                futs.append(p.send(topic, key=r.key, value=r.value, headers=list(r.headers) or None,
                                   timestamp_ms=r.ts))
            p.flush(timeout=TIMEOUT)
            acked = {}
            for i, f in enumerate(futs):
                md = f.get(timeout=TIMEOUT)
                acked[i] = (md.partition, md.offset)
            return acked
        finally:
            p.close(timeout=10)

    def _consumer(self):
        from kafka import KafkaConsumer
        return KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", request_timeout_ms=30000)

    def consume(self, topic):
        from kafka import TopicPartition
        c = self._consumer()
        try:
            parts = util.wait_until(lambda: c.partitions_for_topic(topic), 30, f"partitions of {topic}")
            tps = [TopicPartition(topic, p) for p in sorted(parts)]
            c.assign(tps)
            c.seek_to_beginning(*tps)
            end = c.end_offsets(tps)
            out = []
            deadline = time.monotonic() + TIMEOUT
            while any(c.position(tp) < end[tp] for tp in tps):
                if time.monotonic() > deadline:
                    raise AssertionError(f"kafka-python consume timed out: positions "
                                         f"{ {tp.partition: c.position(tp) for tp in tps} }, end {end}")
                for tp, msgs in c.poll(timeout_ms=500, max_records=2000).items():
                    for m in msgs:
                        out.append({"p": m.partition, "o": m.offset,
                                    "k": m.key.hex() if m.key is not None else None,
                                    "v": m.value.hex() if m.value is not None else None,
                                    "h": [[k, v.hex() if v is not None else None] for k, v in (m.headers or [])],
                                    "ts": m.timestamp})
            return out
        finally:
            c.close()

    def offsets(self, topic, partition, tss):
        from kafka import TopicPartition
        c = self._consumer()
        tp = TopicPartition(topic, partition)
        try:
            lo = c.beginning_offsets([tp])[tp]
            hi = c.end_offsets([tp])[tp]
            times = {}
            for ts in tss:
                r = c.offsets_for_times({tp: ts})[tp]
                times[ts] = None if r is None else r.offset
            return {"earliest": lo, "latest": hi, "times": times}
        finally:
            c.close()


# -------------------------------------------------------------------------------------------
class Java(ClientBase):
    name = "java"

    def create_topic(self, topic, partitions=PARTITIONS):
        util.java("create-topic", self.bootstrap, topic=topic, partitions=partitions)

    def delete_topic(self, topic):
        util.java("delete-topic", self.bootstrap, topic=topic)

    def list_topics(self):
        return set(util.java("list-topics", self.bootstrap)["topics"])

    def produce(self, topic, recs, codec):
        inp = util.write_tsv(recs, self.tmp / f"java-in-{topic}.tsv")
        out = self.tmp / f"java-acked-{topic}.jsonl"
        util.java("produce", self.bootstrap, topic=topic, input=inp, out=out, compression=codec)
        return {d["i"]: (d["p"], d["o"]) for d in util.read_jsonl(out)}

    def consume(self, topic):
        out = self.tmp / f"java-consumed-{topic}.jsonl"
        util.java("consume", self.bootstrap, topic=topic, out=out, timeout_ms=int(TIMEOUT * 1000))
        return util.read_jsonl(out)

    def offsets(self, topic, partition, tss):
        r = util.java("offsets", self.bootstrap, topic=topic, partition=partition, ts=",".join(map(str, tss)))
        return {"earliest": r["earliest"], "latest": r["latest"],
                "times": {int(k): v for k, v in r["times"].items()}}


# -------------------------------------------------------------------------------------------
class KafkaJS(ClientBase):
    name = "kafkajs"
    codecs = util.KAFKAJS_CODECS
    has_manual_assign = False  # kafkajs consumes only through a consumer group

    def create_topic(self, topic, partitions=PARTITIONS):
        util.js("create-topic", self.bootstrap, topic=topic, partitions=partitions)

    def delete_topic(self, topic):
        util.js("delete-topic", self.bootstrap, topic=topic)

    def list_topics(self):
        return set(util.js("list-topics", self.bootstrap)["topics"])

    def produce(self, topic, recs, codec):
        inp = util.write_tsv(recs, self.tmp / f"js-in-{topic}.tsv")
        out = self.tmp / f"js-acked-{topic}.jsonl"
        r = util.js("produce", self.bootstrap, topic=topic, input=inp, out=out, compression=codec)
        assert r["produced"] == len(recs)
        return {}  # kafkajs reports base offsets per partition only

    def consume(self, topic):
        raise AssertionError("kafkajs has no manual partition assignment; use consume_group()")

    def consume_group(self, topic, group, expected):
        out = self.tmp / f"js-group-{topic}.jsonl"
        util.js("consume-group", self.bootstrap, topic=topic, group=group, out=out, expected=expected,
                timeout_ms=90000)
        return util.read_jsonl(out)

    def offsets(self, topic, partition, tss):
        r = util.js("offsets", self.bootstrap, topic=topic, partition=partition, ts=",".join(map(str, tss)))
        return {"earliest": r["earliest"], "latest": r["latest"],
                "times": {int(k): v for k, v in r["times"].items()}}


# -------------------------------------------------------------------------------------------
class Kcat(ClientBase):
    name = "kcat"
    has_admin = False
    ascii_only = True
    HEADER = ("src", "kcat")  # kcat -H sets the same header on every record

    def list_topics(self):
        return set(util.kcat_topics(self.bootstrap))

    def produce(self, topic, recs, codec):
        util.kcat_produce(self.bootstrap, topic, recs, codec, self.HEADER)
        return {}

    def consume(self, topic):
        return util.kcat_consume(self.bootstrap, topic)

    def offsets(self, topic, partition, tss):
        times = {}
        for ts in tss:
            o = util.kcat_query(self.bootstrap, topic, partition, ts)
            times[ts] = None if o < 0 else o
        return {"earliest": util.kcat_query(self.bootstrap, topic, partition, -2),
                "latest": util.kcat_query(self.bootstrap, topic, partition, -1), "times": times}


ALL = {c.name: c for c in (Confluent, KafkaPython, KafkaJS, Java, Kcat)}
