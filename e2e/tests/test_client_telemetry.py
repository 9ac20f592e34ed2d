"""Client telemetry (KIP-714) with Kafka's own tools and Java client.

`kafka-client-metrics.sh` (ClientMetricsCommand) makes, lists, describes and deletes
client-metrics subscriptions (CLIENT_METRICS config resources); a Java producer with
`enable.metrics.push` (the default) then asks its broker for its subscription
(GetTelemetrySubscriptions), pushes the metrics it selects (PushTelemetry, OTLP), and the broker
exports them:

- Skein on its own `/metrics`, each sample labelled with the client's instance id, client id and
  software; only the metrics the subscription asked for;
- Apache Kafka through a plugin (it exports pushed metrics no other way): the suite's
  `skein.e2e.TelemetryFileExporter` (e2e/java), a metrics reporter that writes each pushed
  metric's name with the client instance id to a file.

Either way the test reads back the names the producer pushed under its instance id (the one
`KafkaProducer.clientInstanceId()` returns) and checks them against the subscription; a producer
no subscription selects pushes nothing. Refusals are the tool's output for Kafka's errors: an
interval out of range, an unknown match attribute, an unknown key.

On Skein, subscriptions are kept by the controller from `skein.version` 5 (a new single broker
starts there; the first test starts one at 1 with `--feature-level 1`: below 5 a subscription is
refused with UNSUPPORTED_VERSION, as the test checks, then `kafka-features upgrade` raises the
level). Runs against Apache Kafka 4.4 too (E2E_TARGET=kafka):
the expected outputs are Kafka's, observed."""

from __future__ import annotations

import os
import re
import time
import urllib.request
from pathlib import Path

import pytest

from brokers import make_broker
from util import java, kafka_tool, wait_until

pytestmark = [pytest.mark.cli]

TARGET = os.environ.get("E2E_TARGET", "skein")
CLIENT_METRICS = "org.apache.kafka.tools.ClientMetricsCommand"
FEATURES = "org.apache.kafka.tools.FeatureCommand"
PRODUCER_PREFIX = "org.apache.kafka.producer."


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp(f"{TARGET}-telemetry")
    b = make_broker(TARGET, d)
    b.telemetry_file = d / "pushed.tsv"
    if TARGET == "kafka":
        b.overrides.update({"metric.reporters": "skein.e2e.TelemetryFileExporter",
                            "skein.e2e.telemetry.file": str(b.telemetry_file)})
    b.start()
    try:
        yield b
    finally:
        b.stop()


def client_metrics(b, *args: str, check: bool = True):
    return kafka_tool(CLIENT_METRICS, "--bootstrap-server", b.bootstrap, *args, check=check)


def out(r) -> str:
    return (r.stdout.decode() + r.stderr.decode()).strip()


def pushed(b, instance_id: str) -> set[str]:
    """The metric names the broker received from client `instance_id`, as OTLP names."""
    if TARGET == "kafka":
        if not b.telemetry_file.exists():
            return set()
        rows = [line.split("\t") for line in b.telemetry_file.read_text().splitlines()]
        return {name for iid, name in rows if iid == instance_id}
    text = urllib.request.urlopen(f"http://127.0.0.1:{b.metrics_port}/metrics", timeout=10).read().decode()
    names = set()
    for line in text.splitlines():
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} \S+$", line)
        if m and f'client_instance_id="{instance_id}"' in m.group(2):
            names.add(m.group(1))
    return names


def otlp_as_prometheus(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_:]", "_", name)


def test_subscriptions_are_made_listed_described_checked_and_deleted(new_broker):
    def at_level_one(b):
        b.feature_level = 1
    broker = new_broker(before_start=at_level_one if TARGET == "skein" else None)
    if TARGET == "skein":
        r = client_metrics(broker, "--alter", "--name", "early", "--metrics", "*", check=False)
        assert r.returncode != 0 and "UnsupportedVersionException" in out(r), out(r)
        kafka_tool(FEATURES, "--bootstrap-server", broker.bootstrap, "upgrade", "--feature", "skein.version=5")

    r = client_metrics(broker, "--alter", "--name", "e2e-described", "--metrics",
                       "org.apache.kafka.producer.,org.apache.kafka.consumer.", "--interval", "2000",
                       "--match", "client_id=telemetry-.*,client_software_name=apache-kafka-java")
    assert "Altered client metrics config for e2e-described." in out(r), out(r)
    described = wait_until(lambda: (lambda t: t if "interval.ms=2000" in t else None)(
        out(client_metrics(broker, "--describe", "--name", "e2e-described"))), timeout=15,
        what="the subscription described")
    assert "Client metrics configs for e2e-described are:" in described, described
    assert "metrics=org.apache.kafka.producer.,org.apache.kafka.consumer." in described, described
    assert "match=client_id=telemetry-.*,client_software_name=apache-kafka-java" in described, described
    listed = out(client_metrics(broker, "--list"))
    assert "e2e-described" in listed.split(), listed

    # Kafka's refusals, as the tool prints them.
    r = client_metrics(broker, "--alter", "--name", "bad", "--interval", "50", check=False)
    assert r.returncode != 0 and "interval must be between 100 and 3600000" in out(r), out(r)
    r = client_metrics(broker, "--alter", "--name", "bad", "--match", "host=.*", check=False)
    assert r.returncode != 0 and "Illegal client matching pattern: host=.*" in out(r), out(r)

    # Deleted: no longer listed.
    client_metrics(broker, "--delete", "--name", "e2e-described")
    wait_until(lambda: "e2e-described" not in out(client_metrics(broker, "--list")).split(),
               timeout=15, what="the deleted subscription leaves the list")


def test_a_java_producers_metrics_reach_the_broker_under_a_subscription(broker):
    if TARGET == "skein":
        kafka_tool(FEATURES, "--bootstrap-server", broker.bootstrap, "upgrade", "--feature", "skein.version=5")
    client_metrics(broker, "--alter", "--name", "e2e-producers", "--metrics", PRODUCER_PREFIX,
                   "--interval", "500", "--match", "client_id=telemetry-.*")
    wait_until(lambda: "e2e-producers" in out(client_metrics(broker, "--list")).split(), timeout=15,
               what="the subscription listed")

    r = java("telemetry-produce", broker.bootstrap, topic="telemetry", client_id="telemetry-producer", seconds=6)
    assert r["sent"] > 0, r
    iid = r["client_instance_id"]
    names = wait_until(lambda: pushed(broker, iid) or None, timeout=20, what="the producer's pushed metrics")
    expected = {n if TARGET == "kafka" else otlp_as_prometheus(n) for n in [
        "org.apache.kafka.producer.record.send.total",
        "org.apache.kafka.producer.request.latency.avg",
    ]}
    assert expected <= names, sorted(names)
    prefix = PRODUCER_PREFIX if TARGET == "kafka" else otlp_as_prometheus(PRODUCER_PREFIX)
    assert all(n.startswith(prefix) for n in names), sorted(names)
    if TARGET == "skein":
        text = urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10).read().decode()
        sample = next(line for line in text.splitlines()
                      if line.startswith(otlp_as_prometheus("org.apache.kafka.producer.record.send.total") + "{")
                      and iid in line)
        assert 'client_id="telemetry-producer"' in sample, sample
        assert 'client_software_name="apache-kafka-java"' in sample, sample
        sent = float(sample.rsplit(" ", 1)[1])
        assert 0 < sent <= r["sent"], (sample, r)

    # A producer no subscription selects pushes nothing.
    other = java("telemetry-produce", broker.bootstrap, topic="telemetry", client_id="unwatched", seconds=3)
    time.sleep(2)
    assert pushed(broker, other["client_instance_id"]) == set()
