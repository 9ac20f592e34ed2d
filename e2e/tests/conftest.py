"""Fixtures: the broker under test (E2E_TARGET=skein (default) | kafka), unique topic names,
and broker logs attached to the report of every failed test."""

from __future__ import annotations

import os
import re
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import Broker, KafkaCluster, LocalCluster, make_broker  # noqa: E402
from seaweedfs import SeaweedS3  # noqa: E402

TARGET = os.environ.get("E2E_TARGET", "skein")
_active: list[Broker] = []


def pytest_report_header(config):
    return f"e2e target broker: {TARGET} (set E2E_TARGET=skein|kafka)"


def _start(b: Broker) -> Broker:
    _active.append(b)
    try:
        b.start()
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"could not start the {b.name} broker: {e}", pytrace=False)
    return b


@pytest.fixture(scope="session")
def broker(tmp_path_factory) -> Broker:
    """One broker shared by the tests that do not restart or crash it."""
    b = make_broker(TARGET, tmp_path_factory.mktemp(f"{TARGET}-shared"))
    _start(b)
    yield b
    b.stop()


# Broker settings for the consumer-group tests: no initial rebalance delay, short KIP-848 and streams sessions
# (Kafka's floors for them are lowered too; Skein ignores broker keys it does not know).
GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
    "group.streams.initial.rebalance.delay.ms": "0",
    "group.streams.session.timeout.ms": "6000",
    "group.streams.min.session.timeout.ms": "6000",
    "group.streams.heartbeat.interval.ms": "1000",
    "group.streams.min.heartbeat.interval.ms": "1000",
}


@pytest.fixture(scope="session")
def group_broker(tmp_path_factory) -> Broker:
    """One broker with GROUP_OVERRIDES, shared by the consumer-group tests that do not restart it."""
    b = make_broker(TARGET, tmp_path_factory.mktemp(f"{TARGET}-groups"), GROUP_OVERRIDES)
    _start(b)
    yield b
    b.stop()


@pytest.fixture
def new_broker(tmp_path):
    """Factory for a dedicated broker (durability tests); stopped at the end of the test."""
    made: list[Broker] = []

    def make(overrides: dict[str, str] | None = None, before_start=None) -> Broker:
        b = make_broker(TARGET, tmp_path / f"{TARGET}-{len(made)}", overrides)
        made.append(b)
        if before_start is not None:
            before_start(b)
        return _start(b)

    yield make
    for b in made:
        if b.running():
            b.stop()
        if b in _active:
            _active.remove(b)


# Short failure detection for the 3-broker local clusters.
CLUSTER3_OVERRIDES = {"replica.lag.time.max.ms": "2000", "broker.heartbeat.interval.ms": "500",
                      "group.initial.rebalance.delay.ms": "0",
                      # Streams groups (KIP-1071): a killed instance's tasks move after 10 s,
                      # not Kafka's 45 s floor.
                      "group.streams.initial.rebalance.delay.ms": "0",
                      "group.streams.min.session.timeout.ms": "6000",
                      "group.streams.session.timeout.ms": "10000",
                      "group.streams.min.heartbeat.interval.ms": "1000",
                      "group.streams.heartbeat.interval.ms": "1000"}


@pytest.fixture
def cluster3(tmp_path):
    """A 3-broker local cluster (`skein-operator local`, which restarts a killed broker) with
    short failure detection; Skein only."""
    if TARGET != "skein":
        pytest.skip("runs Skein's own local platform (skein-operator local)")
    yield from _running(LocalCluster(tmp_path / "cluster", 3, CLUSTER3_OVERRIDES))


@pytest.fixture
def replicated_cluster(tmp_path):
    """Three brokers of the target under test: Skein's local platform (as `cluster3`) or three
    Apache Kafka nodes (KRaft, each broker and controller). For tests that need replication but
    not the local platform's restart of a killed broker."""
    if TARGET == "kafka":
        c = KafkaCluster(tmp_path / "cluster", 3)
    else:
        c = LocalCluster(tmp_path / "cluster", 3, CLUSTER3_OVERRIDES)
    yield from _running(c)


def _running(c):
    """Starts a cluster for a fixture, stops it afterwards."""
    _start(c)
    yield c
    c.stop()
    if c in _active:
        _active.remove(c)


@pytest.fixture
def seaweedfs(tmp_path) -> SeaweedS3:
    """A SeaweedFS S3 server of the test's own (free ports, bucket `tiered`, data in tmp_path),
    stopped at the end of the test: e2e/tests/seaweedfs.py. Fails (never skips) when the binary
    is missing or the server does not come up."""
    s3 = SeaweedS3()
    _active.append(s3)
    try:
        s3.start(tmp_path / "seaweedfs")
    except Exception as e:  # noqa: BLE001
        _active.remove(s3)
        pytest.fail(f"could not start SeaweedFS: {e}", pytrace=False)
    yield s3
    s3.stop()
    _active.remove(s3)


@pytest.fixture
def topic(request) -> str:
    slug = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name).strip("-")[:60]
    return f"e2e-{slug}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def tmp(tmp_path) -> Path:
    return tmp_path


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    if rep.failed:
        for b in list(_active):
            rep.sections.append((f"{b.name} broker log tail ({b.log_path})", b.log_tail(120)))
    return rep
