"""Hand-built StreamsGroupHeartbeats (KIP-1071) that no Kafka Streams client sends: each is refused
with Kafka 4.4's error code and message, nothing of the group changes, and the broker goes on
serving. Requests are written from Kafka 4.4's schema (the authorization matrix's SHARE_SCHEMAS,
api 88 v1) over a raw socket. Runs against Apache Kafka 4.4 too (E2E_TARGET=kafka): the expected
answers are Kafka's."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import rawkafka as rk
from test_authorization_matrix import share_request

SOURCE = "streams-hostile-in"


def subtopology(**over) -> dict:
    s = {"subtopology_id": "0", "source_topics": [SOURCE], "source_topic_regex": [], "state_changelog_topics": [],
         "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []}
    s.update(over)
    return s


def heartbeat(group: str, member: str | None = None, epoch: int = 0, topology: dict | None = None,
              **over) -> dict:
    """A join (epoch 0) as the 4.4 client sends it, or a later heartbeat, with `over` applied."""
    hb = {"group_id": group, "member_id": member or str(uuid.uuid4()), "member_epoch": epoch,
          "endpoint_information_epoch": -1, "instance_id": None, "rack_id": None,
          "rebalance_timeout_ms": 300000 if epoch == 0 else -1,
          "topology": ({"epoch": 0, "subtopologies": [subtopology()]} if topology is None else topology)
          if epoch == 0 else None,
          "active_tasks": [], "standby_tasks": [], "warmup_tasks": [], "process_id": str(uuid.uuid4()),
          "user_endpoint": None, "client_tags": [], "task_offsets": [], "task_end_offsets": [],
          "shutdown_application": False}
    hb.update(over)
    return hb


def send(b, hb: dict) -> dict:
    """One StreamsGroupHeartbeat to the (single) broker, which coordinates every group; sent again
    while the group's coordinator is still being set up (a fresh broker makes __consumer_offsets
    on the first FindCoordinator)."""
    deadline = time.time() + 30
    while True:
        with rk.Connection.to(b.bootstrap) as c:
            answer = share_request(c, 88, 1, **hb)
        if answer["error_code"] not in (14, 15, 16) or time.time() > deadline:
            return answer
        time.sleep(0.2)


@pytest.fixture(scope="module")
def source(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fs = admin.create_topics([NewTopic(SOURCE, num_partitions=2, replication_factor=1)])
    for f in fs.values():
        try:
            f.result(60)
        except Exception as e:  # noqa: BLE001 - already there from an earlier run of the module
            assert "already exists" in str(e).lower(), e
    # The group coordinator's topic exists (Kafka makes it on the first FindCoordinator).
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "streams-hostile-setup", "log_level": 3})
    c.commit(offsets=[TopicPartition(SOURCE, 0, 0)], asynchronous=False)
    c.close()
    return SOURCE


def changelog(partitions: int) -> dict:
    return {"name": "app-store-changelog", "partitions": partitions, "replication_factor": -1,
            "topic_configs": []}


CASES = [
    ("internal-topic", lambda g: heartbeat(g, topology={"epoch": 0, "subtopologies": [
        subtopology(source_topics=["__consumer_offsets"])]}),
     130, "Use of Kafka internal topics __consumer_offsets in a Kafka Streams topology is prohibited."),
    ("bad-topic-name", lambda g: heartbeat(g, topology={"epoch": 0, "subtopologies": [
        subtopology(source_topics=["bad topic"])]}),
     130, "Topic names bad topic are not valid topic names."),
    ("changelog-with-partitions", lambda g: heartbeat(g, topology={"epoch": 0, "subtopologies": [
        subtopology(state_changelog_topics=[changelog(3)])]}),
     130, "Changelog topic app-store-changelog must have an undefined partition count, but it is set to 3."),
    ("regex-source", lambda g: heartbeat(g, topology={"epoch": 0, "subtopologies": [
        subtopology(source_topic_regex=["in.*"])]}),
     42, "Regular expressions for source topics are not supported yet."),
    ("epoch-below-minus-two", lambda g: heartbeat(g, epoch=-3),
     42, "MemberEpoch is -3, but must be greater than or equal to -2."),
    ("join-without-task-lists", lambda g: heartbeat(g, active_tasks=None),
     42, "ActiveTasks must be empty when (re-)joining."),
    ("join-without-topology", lambda g: heartbeat(g, topology={"epoch": 0, "subtopologies": []}) | {"topology": None},
     42, "Topology must be non-null when (re-)joining."),
    ("join-without-rebalance-timeout", lambda g: heartbeat(g, rebalance_timeout_ms=-1),
     42, "RebalanceTimeoutMs must be provided in first request."),
    ("some-task-lists-null", lambda g: heartbeat(g, member="m", epoch=3, standby_tasks=None),
     42, "If one task-type is non-null, all must be non-null."),
    ("empty-member-id", lambda g: heartbeat(g, member=" "),
     42, "MemberId can't be empty."),
    ("heartbeat-of-a-missing-group", lambda g: heartbeat(g, member="m", epoch=5),
     69, None),
]


@pytest.mark.parametrize("make,code,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_streams_heartbeat_is_refused(broker, source, make, code, message):
    group = f"hostile-streams-{uuid.uuid4().hex[:8]}"
    answer = send(broker, make(group))
    assert answer["error_code"] == code, answer
    if message is not None:
        assert answer["error_message"] == message, answer
    else:
        assert answer["error_message"] == f"Streams group {group} not found.", answer
    # Nothing was made of the group: a member joining now starts it at its first epoch.
    fresh = send(broker, heartbeat(group))
    assert fresh["error_code"] == 0, fresh
    assert fresh["member_epoch"] == 1, fresh
    assert fresh["status"] is not None


def test_later_topologies_and_made_up_tasks_are_refused(broker, source):
    group = f"hostile-streams-{uuid.uuid4().hex[:8]}"
    first = send(broker, heartbeat(group, member="m1"))
    assert first["error_code"] == 0, first
    epoch = first["member_epoch"]
    other = send(broker, heartbeat(group, topology={"epoch": 0, "subtopologies": [
        subtopology(source_topics=[SOURCE, "another-topic"])]}))
    assert (other["error_code"], other["error_message"]) == (42, "Topology updates are not supported yet."), other
    bad = send(broker, heartbeat(group, member="m1", epoch=epoch,
                                 active_tasks=[{"subtopology_id": "0", "partitions": [999]}]))
    assert bad["error_code"] == 42, bad
    assert bad["error_message"].startswith("Task 999 for subtopology 0 is invalid."), bad
    unknown = send(broker, heartbeat(group, member="m1", epoch=epoch,
                                     active_tasks=[{"subtopology_id": "7", "partitions": [0]}]))
    assert (unknown["error_code"], unknown["error_message"]) == (
        42, "Subtopology 7 does not exist in the topology."), unknown
    newer = send(broker, heartbeat(group, member="m1", epoch=epoch + 10))
    assert newer["error_code"] == 110, newer
    # The member is still there, at its epoch.
    again = send(broker, heartbeat(group, member="m1", epoch=epoch))
    assert again["error_code"] == 0, again
    assert again["member_epoch"] >= epoch
    leave = send(broker, heartbeat(group, member="m1", epoch=-1))
    assert (leave["error_code"], leave["member_epoch"]) == (0, -1), leave
