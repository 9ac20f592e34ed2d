"""Group configs (GROUP config resources, Kafka 4.x) with Kafka's own `kafka-configs`:

- `--alter --entity-type groups` sets `consumer.session.timeout.ms`,
  `consumer.heartbeat.interval.ms` and a share-group key; `--describe` shows the group's values
  (and the broker's defaults for the rest); `--delete-config` removes one;
- refusals with Kafka's messages: an unknown name, a value outside the broker's bounds
  (`group.consumer.min/max.*`), a session timeout not above the heartbeat interval, a bad
  `share.auto.offset.reset`;
- the values act on KIP-848 consumer groups: a member joining with ConsumerGroupHeartbeat (sent raw)
  is told the group's heartbeat interval, and a member that stops heartbeating is gone after the
  group's session timeout (6 s here: the broker's bounds are lowered to allow it), not the
  broker's 45 s.

On Skein group configs are kept by the controller from `skein.version` 5 (a single broker starts at
1; `kafka-features upgrade` raises it). Runs against Apache Kafka 4.4 too (E2E_TARGET=kafka)."""

from __future__ import annotations

import os
import time

import pytest

import rawkafka as rk
from brokers import make_broker
from util import kafka_tool, wait_until

pytestmark = [pytest.mark.cli]

TARGET = os.environ.get("E2E_TARGET", "skein")
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
FEATURES = "org.apache.kafka.tools.FeatureCommand"
GROUP = "configured-group"
UNKNOWN_MEMBER_ID = 25


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = make_broker(TARGET, tmp_path_factory.mktemp(f"{TARGET}-group-configs"))
    # Bounds that let a group ask for a 6 s session (Kafka's floor is 45 s).
    b.overrides.update({"group.consumer.min.session.timeout.ms": "5000",
                        "group.consumer.min.heartbeat.interval.ms": "1000"})
    b.start()
    try:
        if TARGET == "skein":
            kafka_tool(FEATURES, "--bootstrap-server", b.bootstrap, "upgrade", "--feature", "skein.version=5")
        yield b
    finally:
        b.stop()


def configs(b, *args: str, check: bool = True):
    return kafka_tool(CONFIGS, "--bootstrap-server", b.bootstrap, "--entity-type", "groups", *args,
                      check=check)


def out(r) -> str:
    return (r.stdout.decode() + r.stderr.decode()).strip()


def described(b, group: str) -> str:
    return out(configs(b, "--describe", "--entity-name", group))


def heartbeat(c: rk.Connection, group: str, member: str, epoch: int, topics: list[str] | None):
    """ConsumerGroupHeartbeat v1 (a client-chosen member id): (error, epoch, heartbeat interval)."""
    body = (rk.compact_string(group) + rk.compact_string(member) + rk.i32(epoch)
            + rk.compact_string(None) + rk.compact_string(None) + rk.i32(30000)
            + (rk.compact_array(topics, rk.compact_string) if topics is not None else b"\x00")
            + rk.compact_string(None)  # subscribed_topic_regex
            + rk.compact_string(None)  # server_assignor
            + (b"\x01" if epoch == 0 else b"\x00")  # owned partitions: [] on a join, else null
            + b"\x00")
    r = c.request(68, 1, body, flexible=True)
    r.i32()
    error = r.i16()
    r.compact_string()
    r.compact_string()
    member_epoch = r.i32()
    interval = r.i32()
    return error, member_epoch, interval


def test_group_configs_are_set_described_checked_and_act(broker):
    configs(broker, "--alter", "--entity-name", GROUP, "--add-config",
            "consumer.session.timeout.ms=6000,consumer.heartbeat.interval.ms=2000,share.delivery.count.limit=3")
    text = wait_until(lambda: (lambda t: t if "consumer.session.timeout.ms=6000" in t else None)(
        described(broker, GROUP)), timeout=15, what="the group's configs described")
    assert "consumer.heartbeat.interval.ms=2000" in text, text
    assert "share.delivery.count.limit=3" in text, text

    # Kafka's refusals, as the tool prints them.
    r = configs(broker, "--alter", "--entity-name", GROUP, "--add-config", "no.such.config=1", check=False)
    assert r.returncode != 0 and "Unknown group config name: no.such.config" in out(r), out(r)
    r = configs(broker, "--alter", "--entity-name", GROUP, "--add-config", "consumer.session.timeout.ms=70000",
                check=False)
    assert r.returncode != 0 and \
        "consumer.session.timeout.ms must be in the range 5000 to 60000 inclusive." in out(r), out(r)
    r = configs(broker, "--alter", "--entity-name", GROUP, "--add-config",
                "consumer.session.timeout.ms=5000,consumer.heartbeat.interval.ms=5000", check=False)
    assert r.returncode != 0 and \
        "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms" in out(r), out(r)
    r = configs(broker, "--alter", "--entity-name", GROUP, "--add-config", "share.auto.offset.reset=middle",
                check=False)
    assert r.returncode != 0 and "share.auto.offset.reset" in out(r), out(r)

    # A joining member is told the group's heartbeat interval; one that stops heartbeating is gone
    # after the group's 6 s session timeout.
    kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", broker.bootstrap, "--create",
               "--topic", "group-config-topic", "--partitions", "1")
    with rk.Connection.to(broker.bootstrap) as c:
        # FindCoordinator first: it creates __consumer_offsets (Kafka answers NOT_COORDINATOR before).
        wait_until(lambda: c.find_coordinator(GROUP)[0] == 0, timeout=30, what="the group's coordinator")
        member = "m-" + os.urandom(6).hex()
        error, epoch, interval = wait_until(
            lambda: (lambda r: r if r[0] == 0 else None)(heartbeat(c, GROUP, member, 0, ["group-config-topic"])),
            timeout=30, what="the member joined")
        assert interval == 2000, (error, epoch, interval)
        assert heartbeat(c, GROUP, member, epoch, None)[0] == 0
        time.sleep(8)
        assert heartbeat(c, GROUP, member, epoch, None)[0] == UNKNOWN_MEMBER_ID, "expired after 6 s"

    # Deleted: the broker's default again.
    configs(broker, "--alter", "--entity-name", GROUP, "--delete-config", "consumer.heartbeat.interval.ms")
    wait_until(lambda: "consumer.heartbeat.interval.ms=2000" not in described(broker, GROUP), timeout=15,
               what="the deleted value gone")
