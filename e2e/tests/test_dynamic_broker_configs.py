"""Dynamic broker configs with Kafka's own `kafka-configs`: values set for one broker
(`--entity-name ID`) or for all (`--entity-default`) are stored by the controller, shown with
their source (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG), applied without a restart
(a topic without its own `max.message.bytes` takes the broker's new `message.max.bytes`), kept
across a restart, and refused by name for configs that only a restart can change. Runs against
Apache Kafka too (E2E_TARGET=kafka)."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import TARGET
from brokers import make_broker
from util import kafka_tool, wait_until


@pytest.fixture
def own_broker(tmp_path):
    b = make_broker(TARGET, tmp_path / "broker")
    b.start()
    yield b
    b.stop()


def configs(bootstrap: str, *args: str, check: bool = True):
    r = kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap, *args, check=check)
    return r if not check else r.stdout.decode()


def describe_broker(bootstrap: str, entity: str, *extra: str) -> str:
    where = ["--entity-default"] if entity == "" else ["--entity-name", entity]
    return configs(bootstrap, "--describe", "--entity-type", "brokers", *where, *extra)


def produce_one(bootstrap: str, topic: str, size: int) -> str | None:
    """Sends one record of `size` bytes; the delivery error's name, or None."""
    errors: list = []
    p = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 10_000_000, "retries": 0})
    p.produce(topic, b"x" * size, on_delivery=lambda err, _msg: errors.append(err))
    p.flush(30)
    assert len(errors) == 1, errors
    return errors[0].name() if errors[0] else None


def test_dynamic_broker_configs_are_shown_applied_and_kept_across_a_restart(own_broker, topic):
    b = own_broker
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)

    # The cluster-wide default, then one broker's own value.
    configs(b.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default",
            "--add-config", "log.retention.ms=3600000,log.cleaner.threads=2")
    configs(b.bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", "1",
            "--add-config", "message.max.bytes=2048")
    wait_until(lambda: "message.max.bytes=2048" in describe_broker(b.bootstrap, "1"), 30,
               "the broker's own value described")
    out = describe_broker(b.bootstrap, "")
    assert ("log.retention.ms=3600000 sensitive=false "
            "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}") in out, out
    assert "log.cleaner.threads=2" in out and "message.max.bytes" not in out, out
    # Without --all only dynamic values; each with where it comes from, highest first.
    out = describe_broker(b.bootstrap, "1")
    assert ("message.max.bytes=2048 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:message.max.bytes=2048, "
            "DEFAULT_CONFIG:message.max.bytes=1048588}") in out, out
    out = describe_broker(b.bootstrap, "1", "--all")
    assert ("log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
            "log.retention.ms=3600000, DEFAULT_CONFIG:log.retention.hours=168}") in out, out
    assert "log.segment.bytes=1073741824 sensitive=false" in out, out
    # A topic without its own values takes them, and says where they come from.
    out = configs(b.bootstrap, "--describe", "--entity-type", "topics", "--entity-name", topic, "--all")
    assert "retention.ms=3600000" in out and "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000" in out, out
    assert "max.message.bytes=2048" in out and "DYNAMIC_BROKER_CONFIG:message.max.bytes=2048" in out, out

    # In force without a restart: a record over the broker's new limit is refused.
    assert produce_one(b.bootstrap, topic, 4000) == "MSG_SIZE_TOO_LARGE"
    assert produce_one(b.bootstrap, topic, 1000) is None

    # A config only a restart can change is refused by name; so is a value that does not parse.
    r = configs(b.bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", "1",
                "--add-config", "num.partitions=5", check=False)
    assert r.returncode != 0 and b"Cannot update these configs dynamically" in r.stdout + r.stderr, r
    r = configs(b.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default",
                "--add-config", "log.segment.bytes=many", check=False)
    assert r.returncode != 0 and b"log.segment.bytes" in r.stdout + r.stderr, r
    assert "log.segment.bytes" not in describe_broker(b.bootstrap, "")

    # Stored by the controller: still there after a restart, and still in force.
    b.stop()
    b.start()
    wait_until(lambda: "message.max.bytes=2048" in describe_broker(b.bootstrap, "1"), 60,
               "the broker's own value after a restart")
    assert "log.retention.ms=3600000" in describe_broker(b.bootstrap, "")
    assert produce_one(b.bootstrap, topic, 4000) == "MSG_SIZE_TOO_LARGE"

    # Deleted: the static value (here Kafka's default) is back in force.
    configs(b.bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", "1",
            "--delete-config", "message.max.bytes")
    wait_until(lambda: "message.max.bytes" not in describe_broker(b.bootstrap, "1"), 30,
               "the broker's own value gone")
    wait_until(lambda: produce_one(b.bootstrap, topic, 4000) is None, 30,
               "a 4000-byte record taken again")


def test_each_broker_of_a_cluster_takes_the_default_and_only_its_own_values(replicated_cluster):
    c = replicated_cluster
    configs(c.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default",
            "--add-config", "log.retention.bytes=123456789")
    configs(c.bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", "2",
            "--add-config", "log.cleaner.backoff.ms=1000")
    for broker_id in ("1", "2", "3"):
        wait_until(lambda: "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=123456789"
                   in describe_broker(c.bootstrap, broker_id, "--all"), 30,
                   f"broker {broker_id} showing the cluster default")
    wait_until(lambda: "log.cleaner.backoff.ms=1000" in describe_broker(c.bootstrap, "2"), 30,
               "broker 2 showing its own value")
    out = describe_broker(c.bootstrap, "3", "--all")
    assert "log.cleaner.backoff.ms=15000 sensitive=false synonyms={DEFAULT_CONFIG:" in out, out


def isr(bootstrap: str, topic: str) -> list[int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return sorted(md.topics[topic].partitions[0].isrs)


@pytest.mark.serial
def test_reassignment_throttle_holds_a_moving_replica_to_its_rate(replicated_cluster, topic, tmp_path):
    """`kafka-reassign-partitions --throttle`: the tool sets the brokers' dynamic
    leader/follower.replication.throttled.rate and the topic's *.replication.throttled.replicas;
    a new replica outside the ISR then copies the partition at about that rate (after the first
    window: the rate is measured over 10 s), where unthrottled it takes a second or two; --verify
    removes every throttle once the move is done."""
    c = replicated_cluster
    a = AdminClient({"bootstrap.servers": c.bootstrap})
    a.create_topics([NewTopic(topic, num_partitions=1, replication_factor=-1, replica_assignment=[[1]])])[topic].result(30)
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "1", "linger.ms": 20,
                  "batch.size": 1_000_000, "compression.type": "none"})
    value = bytes(range(256)) * 4
    for i in range(24_000):  # 24 MiB on broker 1
        while True:
            try:
                p.produce(topic, value, key=str(i).encode())
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0

    plan = tmp_path / "reassign.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}]}))
    tool = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    start = time.monotonic()
    r = kafka_tool(tool, "--bootstrap-server", c.bootstrap, "--reassignment-json-file", str(plan),
                   "--execute", "--throttle", "1000000", check=False)
    out = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
    assert r.returncode == 0, out
    assert "follower.replication.throttled.rate=1000000" in describe_broker(c.bootstrap, "2"), out
    topic_configs = configs(c.bootstrap, "--describe", "--entity-type", "topics", "--entity-name", topic)
    assert "follower.replication.throttled.replicas=0:2" in topic_configs, topic_configs
    wait_until(lambda: isr(c.bootstrap, topic) == [1, 2], 180, "the new replica in the ISR")
    took = time.monotonic() - start
    print(f"24 MiB copied in {took:.1f} s under a 1 MB/s throttle")
    assert took > 8, f"the new replica caught up in {took:.1f} s: not held to 1 MB/s"

    last: list[str] = []

    def verified():
        v = kafka_tool(tool, "--bootstrap-server", c.bootstrap, "--reassignment-json-file", str(plan),
                       "--verify", check=False)
        text = v.stdout.decode(errors="replace") + v.stderr.decode(errors="replace")
        last[:] = [text]
        return v.returncode == 0 and "is completed" in text and "Clearing broker-level throttles" in text
    try:
        wait_until(verified, 60, "--verify: completed, throttle removed")
    except AssertionError:
        raise AssertionError(f"kafka-reassign-partitions --verify said:\n{last[0] if last else ''}") from None
    for broker_id in ("1", "2"):
        assert "replication.throttled.rate" not in describe_broker(c.bootstrap, broker_id)
    topic_configs = configs(c.bootstrap, "--describe", "--entity-type", "topics", "--entity-name", topic)
    assert "throttled.replicas" not in topic_configs, topic_configs


def test_keys_kafka_changes_at_run_time_are_accepted_and_refused_as_kafka_does(own_broker):
    """librdkafka's admin test (0081) sets `sasl.kerberos.min.time.before.relogin` on a broker:
    Kafka accepts every key it changes at run time, even one with no effect here (no Kerberos),
    refuses a per-broker key on the cluster default, a keystore without a listener prefix and a
    static key, all with INVALID_REQUEST."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, ResourceType

    b = own_broker
    a = AdminClient({"bootstrap.servers": b.bootstrap})

    def alter(name: str, values: dict):
        res = ConfigResource(ResourceType.BROKER, name, set_config=values)
        return a.alter_configs([res])[res].result(30)

    def refused(name: str, values: dict) -> str:
        with pytest.raises(KafkaException) as e:
            alter(name, values)
        err = e.value.args[0]
        assert err.name() == "INVALID_REQUEST", err
        return err.str()

    alter("1", {"sasl.kerberos.min.time.before.relogin": "58000"})
    wait_until(lambda: "sasl.kerberos.min.time.before.relogin=58000" in describe_broker(b.bootstrap, "1"),
               30, "the stored value described")
    # Per listener: a keystore location under a listener prefix, a connection limit.
    alter("1", {"listener.name.plaintext.max.connections": "1000",
                "sasl.kerberos.min.time.before.relogin": "58000"})
    r = configs(b.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default",
                "--add-config", "sasl.kerberos.min.time.before.relogin=58000", check=False)
    assert r.returncode != 0 and b"at default cluster level" in r.stdout + r.stderr, r
    assert "per-listener" in refused("1", {"ssl.keystore.location": "/nowhere.jks"})
    assert "Cannot update these configs dynamically" in refused("1", {"num.partitions": "3"})
    assert "sasl.kerberos.min.time.before.relogin" in refused("1", {"sasl.kerberos.min.time.before.relogin": "soon"})
