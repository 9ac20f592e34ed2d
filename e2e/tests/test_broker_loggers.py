"""Log levels at run time: Kafka's `kafka-configs --entity-type broker-loggers` (BROKER_LOGGER
config resources; DescribeConfigs and IncrementalAlterConfigs) against one broker.

- `--describe` lists the broker's loggers with their levels, `root` among them;
- `--alter --add-config <logger>=DEBUG` changes a level at once and `--describe` shows it;
  `--delete-config` returns the logger to its start-up level;
- Kafka's refusals and messages: an unknown logger (refused by the tool, which describes the
  loggers first), a level that is not one of Kafka's, removing the root logger's level.

The loggers are each broker's own: Kafka's log4j loggers, Skein's `tracing` targets (its crates,
`skein_storage`, ...). On Skein the test also checks the effect: DEBUG lines
appear in the broker's log once `root` is set to DEBUG, and stop after it is set back to INFO.
Runs against Apache Kafka 4.4 too (E2E_TARGET=kafka)."""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka.admin import AdminClient

from brokers import make_broker
from util import kafka_tool, wait_until

pytestmark = [pytest.mark.cli]

TARGET = os.environ.get("E2E_TARGET", "skein")
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
# A logger each broker has (the e2e harness starts Kafka without a log4j2 configuration: its loggers
# are root and the controller's own).
LOGGER = "org.apache.kafka.server.logger.LoggingController" if TARGET == "kafka" else "skein_storage"
LEVELS = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = make_broker(TARGET, tmp_path_factory.mktemp(f"{TARGET}-loggers"))
    b.start()
    try:
        yield b
    finally:
        b.stop()


def loggers(b, *args: str, check: bool = True):
    return kafka_tool(CONFIGS, "--bootstrap-server", b.bootstrap, "--entity-type", "broker-loggers",
                      "--entity-name", "1", *args, check=check)


def out(r) -> str:
    return (r.stdout.decode() + r.stderr.decode()).strip()


def level_of(b, logger: str) -> str | None:
    for line in out(loggers(b, "--describe")).splitlines():
        line = line.strip()
        if line.startswith(f"{logger}="):
            return line.split("=", 1)[1].split()[0]
    return None


def debug_lines(b) -> int:
    return sum(1 for line in b.log_path.read_text(errors="replace").splitlines() if " DEBUG " in line)


def test_log_levels_are_described_changed_and_checked(broker):
    root = level_of(broker, "root")
    assert root in LEVELS, out(loggers(broker, "--describe"))
    if TARGET == "skein":
        assert root == "INFO" and level_of(broker, "skein_broker") == "INFO", out(loggers(broker, "--describe"))

    loggers(broker, "--alter", "--add-config", f"{LOGGER}=DEBUG")
    wait_until(lambda: level_of(broker, LOGGER) == "DEBUG", timeout=15, what="the logger at DEBUG")
    loggers(broker, "--alter", "--delete-config", LOGGER)
    wait_until(lambda: level_of(broker, LOGGER) in (root, None), timeout=15, what="the logger back at root's level")

    # Kafka's refusals, as the tool prints them.
    # (The tool refuses a logger the broker does not describe before asking it.)
    r = loggers(broker, "--alter", "--add-config", "no.such.logger=DEBUG", check=False)
    assert r.returncode != 0 and "Invalid broker logger(s): no.such.logger" in out(r), out(r)
    r = loggers(broker, "--alter", "--add-config", "root=LOUD", check=False)
    assert r.returncode != 0 and ("Cannot set the log level of root to LOUD as it is not a supported log level. "
                                  "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN") in out(r), out(r)
    r = loggers(broker, "--alter", "--delete-config", "root", check=False)
    assert r.returncode != 0 and "Removing the log level of the root logger is not allowed" in out(r), out(r)

    if TARGET == "skein":
        check_the_effect(broker)


def check_the_effect(broker) -> None:
    """DEBUG lines appear in Skein's log once root is at DEBUG, and stop once it is back at INFO
    (Kafka's log4j output is not read here)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    before = debug_lines(broker)
    loggers(broker, "--alter", "--add-config", "root=DEBUG")
    # Requests and connections log at DEBUG: some appear.
    wait_until(lambda: admin.list_topics(timeout=10) and debug_lines(broker) > before, timeout=30,
               what="DEBUG lines in the broker's log")
    loggers(broker, "--alter", "--add-config", "root=INFO")
    time.sleep(1)
    quiet = debug_lines(broker)
    for _ in range(5):
        admin.list_topics(timeout=10)
        kafka_tool(CONFIGS, "--bootstrap-server", broker.bootstrap, "--describe", "--entity-type", "brokers",
                   "--entity-name", "1")
    assert debug_lines(broker) == quiet, "no DEBUG line once root is back at INFO"
