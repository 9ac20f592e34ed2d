"""Apache Kafka's own CLI tools (the classes behind kafka-topics.sh, kafka-console-*.sh and
kafka-get-offsets.sh), run as `java -cp <kafka jars> org.apache.kafka.tools.*`."""

from __future__ import annotations

import re
import time

import pytest

from clients import ALL
from util import dataset, kafka_tool, verify, wait_until

pytestmark = pytest.mark.cli

TOPIC_CMD = "org.apache.kafka.tools.TopicCommand"
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"


def topics_listed(bootstrap):
    r = kafka_tool(TOPIC_CMD, "--bootstrap-server", bootstrap, "--list")
    return set(r.stdout.decode().split())


def end_offsets(bootstrap, topic, time_arg="-1") -> dict[int, int]:
    r = kafka_tool(GET_OFFSETS, "--bootstrap-server", bootstrap, "--topic", topic, "--time", str(time_arg))
    out = {}
    for ln in r.stdout.decode().split():
        m = re.fullmatch(re.escape(topic) + r":(\d+):(-?\d*)", ln)
        assert m, f"unexpected GetOffsetShell line {ln!r} in {r.stdout!r}"
        out[int(m.group(1))] = int(m.group(2)) if m.group(2) else None
    return out


def test_topic_command_create_list_describe_delete(broker, topic):
    b = broker.bootstrap
    kafka_tool(TOPIC_CMD, "--bootstrap-server", b, "--create", "--topic", topic, "--partitions", "3",
               "--replication-factor", "1")
    wait_until(lambda: topic in topics_listed(b), 30, f"TopicCommand --list to show {topic}")
    d = kafka_tool(TOPIC_CMD, "--bootstrap-server", b, "--describe", "--topic", topic).stdout.decode()
    assert re.search(r"PartitionCount:\s*3\b", d), d
    assert re.search(r"ReplicationFactor:\s*1\b", d), d
    for p in range(3):
        assert re.search(rf"Partition:\s*{p}\s+Leader:\s*\d+", d), f"partition {p} missing/leaderless:\n{d}"
    kafka_tool(TOPIC_CMD, "--bootstrap-server", b, "--delete", "--topic", topic)
    wait_until(lambda: topic not in topics_listed(b), 30, f"TopicCommand --list to drop {topic}")


def test_topic_command_describe_pages_through_describe_topic_partitions(broker, topic):
    """Kafka 4's TopicCommand describes with DescribeTopicPartitions (KIP-966) when the broker
    offers it: the eligible leader replicas are printed (Elr), and a small
    --partition-size-limit-per-response pages through every partition with the cursor."""
    b = broker.bootstrap
    kafka_tool(TOPIC_CMD, "--bootstrap-server", b, "--create", "--topic", topic, "--partitions", "7",
               "--replication-factor", "1")
    wait_until(lambda: topic in topics_listed(b), 30, f"TopicCommand --list to show {topic}")
    d = kafka_tool(TOPIC_CMD, "--bootstrap-server", b, "--describe", "--topic", topic,
                   "--partition-size-limit-per-response", "2").stdout.decode()
    rows = re.findall(r"Partition:\s*(\d+)\s+Leader:\s*(\d+).*?Elr:", d)
    assert sorted(int(p) for p, _ in rows) == list(range(7)), d
    # Through the Metadata fallback the tool knows no ELR and prints N/A.
    assert "Elr: N/A" not in d, d


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_console_producer_consumer(broker, topic, tmp, codec):
    """ConsoleProducer (keys, codec, acks=all) -> ConsoleConsumer per partition with --partition /
    --offset earliest / --max-messages (no consumer group), checked against what was sent, and
    cross-checked with confluent-kafka."""
    b = broker.bootstrap
    kafka_tool(TOPIC_CMD, "--bootstrap-server", b, "--create", "--topic", topic, "--partitions", "3",
               "--replication-factor", "1")
    recs = dataset(2000, seed=11, ascii_only=True, headers=False)
    data = b"".join(r.key + b"\t" + r.value + b"\n" for r in recs)
    kafka_tool(PRODUCER, "--bootstrap-server", b, "--topic", topic, "--compression-codec", codec,
               "--request-required-acks", "all", "--reader-property", "parse.key=true",
               "--reader-property", "key.separator=\t", input=data, timeout=120)
    ends = end_offsets(b, topic)
    assert sorted(ends) == [0, 1, 2] and sum(ends.values()) == len(recs), ends
    got = []
    for p, n in ends.items():
        if n == 0:
            continue
        r = kafka_tool(CONSUMER, "--bootstrap-server", b, "--topic", topic, "--partition", str(p),
                       "--offset", "earliest", "--max-messages", str(n), "--timeout-ms", "30000",
                       "--command-property", "enable.auto.commit=false",
                       "--formatter-property", "print.key=true", "--formatter-property", "print.offset=true",
                       "--formatter-property", "key.separator=\t", timeout=120)
        lines = [ln for ln in r.stdout.split(b"\n") if ln]
        assert len(lines) == n, f"partition {p}: {len(lines)} lines, want {n}; stderr: {r.stderr[-2000:]!r}"
        for ln in lines:
            off, key, value = ln.split(b"\t")
            assert off.startswith(b"Offset:"), ln
            got.append({"p": p, "o": int(off[7:]), "k": key.hex(), "v": value.hex(), "h": [], "ts": None})
    verify(recs, got, check_headers=False, check_ts=False, what=f"ConsoleProducer {codec} -> ConsoleConsumer")
    verify(recs, ALL["confluent-kafka"](b, tmp).consume(topic), check_headers=False, check_ts=False,
           what="ConsoleProducer -> confluent-kafka")


def test_get_offset_shell(broker, topic, tmp):
    """GetOffsetShell --time -1 / -2 / <timestamp> on records with known timestamps."""
    b = broker.bootstrap
    c = ALL["confluent-kafka"](b, tmp)
    c.create_topic(topic, 1)
    ts0 = int(time.time() * 1000) - 3_600_000
    c.produce(topic, dataset(100, seed=3, ts_base=ts0, ts_step=10), "none")
    assert end_offsets(b, topic, -1) == {0: 100}
    assert end_offsets(b, topic, -2) == {0: 0}
    assert end_offsets(b, topic, ts0 + 505) == {0: 51}
    assert end_offsets(b, topic, ts0) == {0: 0}


def test_config_command_lists_every_broker_config_with_its_source_and_synonyms(broker):
    """kafka-configs --describe --entity-type brokers --all: every broker config with its value,
    where it comes from and its synonyms, as Kafka 4.1 lists them (log.retention.ms unset is
    null, its value coming from log.retention.hours); the others show Kafka's defaults."""
    out = kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", broker.bootstrap, "--describe",
                     "--entity-type", "brokers", "--entity-name", "1", "--all").stdout.decode()
    for line in [
        "log.segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}",
        "log.retention.hours=168 sensitive=false synonyms={DEFAULT_CONFIG:log.retention.hours=168}",
        "log.retention.ms=null sensitive=false synonyms={}",
        "replica.selector.class=null sensitive=false synonyms={}",
        "message.max.bytes=1048588 sensitive=false synonyms={DEFAULT_CONFIG:message.max.bytes=1048588}",
        "log.cleaner.threads=1 sensitive=false synonyms={DEFAULT_CONFIG:log.cleaner.threads=1}",
        "log.message.timestamp.after.max.ms=3600000 sensitive=false "
        "synonyms={DEFAULT_CONFIG:log.message.timestamp.after.max.ms=3600000}",
        "log.local.retention.ms=-2 sensitive=false synonyms={DEFAULT_CONFIG:log.local.retention.ms=-2}",
        "log.local.retention.bytes=-2 sensitive=false synonyms={DEFAULT_CONFIG:log.local.retention.bytes=-2}",
    ]:
        assert line in out, f"{line!r} missing from:\n{out}"
    # Without --all only dynamic configs are listed: none are set.
    out = kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", broker.bootstrap, "--describe",
                     "--entity-type", "brokers", "--entity-name", "1").stdout.decode()
    assert "log.segment.bytes" not in out, out


FEATURES = "org.apache.kafka.tools.FeatureCommand"


def test_kafka_features_describes_and_finalizes_skein_version(cluster3):
    """kafka-features.sh against three brokers and their controller (the UpdateFeatures request
    travels broker -> controller over the control plane): describe shows skein.version's range and
    finalized level from ApiVersions; upgrade finalizes it (dry run first); a downgrade is refused."""
    b = cluster3.bootstrap

    def describe() -> str:
        return kafka_tool(FEATURES, "--bootstrap-server", b, "describe").stdout.decode()

    def finalized(out: str) -> str | None:
        m = re.search(r"Feature:\s*skein\.version\s+SupportedMinVersion:\s*1\s+SupportedMaxVersion:\s*(\d+)\s+"
                      r"FinalizedVersionLevel:\s*(\S+)", out)
        return m.group(2) if m else None

    out = describe()
    assert finalized(out) == "1", out
    assert "metadata.version" not in out, "Kafka's own features are not advertised"
    dry = kafka_tool(FEATURES, "--bootstrap-server", b, "upgrade", "--feature", "skein.version=2", "--dry-run")
    assert finalized(describe()) == "1", f"a dry run finalized: {dry.stdout.decode()}"
    kafka_tool(FEATURES, "--bootstrap-server", b, "upgrade", "--feature", "skein.version=2")
    # Each broker answers from the metadata it has heard; all three soon say 2.
    wait_until(lambda: finalized(describe()) == "2", 30, "skein.version finalized at 2")
    down = kafka_tool(FEATURES, "--bootstrap-server", b, "downgrade", "--feature", "skein.version=1",
                      check=False)
    text = (down.stdout + down.stderr).decode()
    assert down.returncode != 0 and "never lowered" in text, text
    too_high = kafka_tool(FEATURES, "--bootstrap-server", b, "upgrade", "--feature", "skein.version=9",
                          check=False)
    text = (too_high.stdout + too_high.stderr).decode()
    assert too_high.returncode != 0 and "supports skein.version" in text, text
    out = describe()
    assert finalized(out) == "2", out
    print(out)
