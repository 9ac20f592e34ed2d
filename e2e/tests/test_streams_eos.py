"""A Kafka Streams application (the real kafka-streams jar) with processing.guarantee=exactly_once_v2
counting records per key on a 3-broker local cluster, while brokers are SIGKILLed several times and
the application instance is killed and started again: read read_committed, the output's last count
of every key equals the number of input records with that key (nothing counted twice, nothing
lost). It runs on both group protocols: the classic one (JoinGroup/SyncGroup, the client's own
assignor) and KIP-1071's streams protocol (StreamsGroupHeartbeat: the broker assigns the tasks and
creates the changelog topic)."""

from __future__ import annotations

import signal
import struct
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import util
from conftest import TARGET
from util import java_cmd

pytestmark = [
    pytest.mark.transactions,
    pytest.mark.skipif(TARGET != "skein", reason="runs Skein's own local platform (skein-operator local)"),
]

KEYS = 40
STREAMS_GROUPS = "org.apache.kafka.tools.streams.StreamsGroupCommand"


def last_counts(bootstrap: str, topic: str) -> dict[str, int]:
    """The last count of every key in the output, read_committed, from the start to the end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.time_ns()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False, "log_level": 3})
    md = c.list_topics(topic, timeout=10).topics.get(topic)
    if md is None or not md.partitions:
        c.close()
        return {}
    tps = [TopicPartition(topic, p, 0) for p in md.partitions]
    ends = {tp.partition: c.get_watermark_offsets(tp, timeout=10, cached=False)[1] for tp in tps}
    c.assign(tps)
    out: dict[str, int] = {}
    done = {p for p, e in ends.items() if e == 0}
    deadline = time.time() + 60
    try:
        while len(done) < len(tps) and time.time() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out[m.key().decode()] = struct.unpack(">q", m.value())[0]
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
            # Control records take offsets too: a partition may end past its last record.
            for tp in c.position(tps):
                if tp.offset >= ends[tp.partition]:
                    done.add(tp.partition)
    finally:
        c.close()
    return out


@pytest.mark.parametrize("protocol", ["classic", "streams"])
def test_streams_exactly_once_count_survives_broker_and_instance_kills(cluster3, tmp, protocol):
    c = cluster3
    src, dst, app = "eos-in", "eos-counts", f"eos-count-{protocol}"
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    for f in admin.create_topics([NewTopic(src, num_partitions=3, replication_factor=3),
                                  NewTopic(dst, num_partitions=3, replication_factor=3)]).values():
        f.result(60)
    stop = tmp / "stop"

    def start_app(n: int) -> subprocess.Popen:
        return subprocess.Popen(
            java_cmd("streams-count", "--bootstrap", c.bootstrap, "--in", src, "--out", dst, "--app-id", app,
                     "--state-dir", str(tmp / f"state-{n}"), "--stop-file", str(stop), "--timeout-ms", "400000",
                     "--group-protocol", protocol),
            stdout=subprocess.PIPE, stderr=open(tmp / f"app-{n}.err", "wb"))

    expected = {f"k{i}": 0 for i in range(KEYS)}
    sent = [0]
    failed: list = []
    done = threading.Event()

    def feed():
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 180000, "log_level": 3})
        i = 0

        def acked(err, msg):
            # Counted once the broker acknowledged it (idempotent, acks=all: exactly once).
            if err is None:
                expected[msg.key().decode()] += 1
            else:
                failed.append(err)

        while not done.is_set():
            key = f"k{i % KEYS}"
            p.produce(src, key=key.encode(), value=f"v{i}".encode(), on_delivery=acked)
            i += 1
            p.poll(0)
            time.sleep(0.004)
        assert p.flush(180) == 0, "input records left unsent"
        sent[0] = i

    app_proc = start_app(0)
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    util.wait_until(lambda: len(last_counts(c.bootstrap, dst)) > 0, 120, "the application's first counts")
    # Brokers die under it (each comes back: the local platform restarts it), then the instance.
    for victim in (1, 2, 3):
        time.sleep(4)
        c.signal_broker(victim, signal.SIGKILL)
        time.sleep(6)
    app_proc.send_signal(signal.SIGKILL)
    app_proc.wait(30)
    time.sleep(2)
    app_proc = start_app(1)
    time.sleep(8)
    done.set()
    feeder.join(240)
    total = sent[0]
    assert total > 1000, f"only {total} input records were sent"
    assert not failed, f"{len(failed)} input records were not acknowledged: {failed[:3]}"

    def settled():
        got = last_counts(c.bootstrap, dst)
        over = {k: (v, expected[k]) for k, v in got.items() if v > expected[k]}
        assert not over, f"counted more than once (got, expected): {over}"
        return got == expected

    util.wait_until(settled, 180, "every key's count to reach its number of input records")
    if protocol == "streams":
        # The broker, not the client, ran the group: kafka-streams-groups.sh lists it as a
        # streams group whose one member holds the three tasks, and the changelog topic exists
        # at the partition count the broker decided.
        listed = util.kafka_tool(STREAMS_GROUPS, "--bootstrap-server", c.bootstrap, "--list").stdout.decode()
        assert app in listed.split(), listed
        members = util.kafka_tool(STREAMS_GROUPS, "--bootstrap-server", c.bootstrap, "--describe",
                                  "--members", "--group", app).stdout.decode()
        assert "ACTIVE: 0:[0,1,2]" in members, members
        md = admin.list_topics(timeout=10)
        changelog = f"{app}-counts-changelog"
        assert changelog in md.topics, f"{changelog} was not created: {sorted(md.topics)}"
        assert len(md.topics[changelog].partitions) == 3
    stop.touch()
    out, _ = app_proc.communicate(timeout=60)
    print(f"\n[{protocol}] {total} input records over {KEYS} keys counted exactly once; "
          f"app: {out.decode().strip()}")
