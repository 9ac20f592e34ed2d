"""An authorization matrix (issue #41): every API Skein serves to clients, called by an
authenticated principal that has no ACL at all, on a broker with the authorizer on
(`authorizer.class.name` = Kafka's StandardAuthorizer, `super.users=User:admin`,
`allow.everyone.if.no.acl.found=false`) and a SASL_PLAINTEXT listener with PLAIN users admin,
mallory and member.

As admin the module first makes what the requests name: a topic with records, a group with a
committed offset, a transactional id that has committed a transaction (its producer id and epoch
are used by mallory's transactional requests), and two share groups (KIP-932) whose start offset
on the topic admin set with AlterShareGroupOffsets (which makes a missing share group). Then mallory
sends, over a raw socket (`rawkafka.py`; requests built with kafka-python's protocol classes,
`kafka.protocol.*`, or, for the APIs it has no classes for, written by hand: the delegation token
and telemetry bodies, and the share-group APIs from their schemas in SHARE_SCHEMAS), one minimal
well-formed request per API at a version both brokers serve (the highest, unless the row says why
not), and each answer must be Apache Kafka 4.4.0's, recorded by running this file with
E2E_TARGET=kafka (first with 4.1.1; every answer is the same on 4.4.0; the share-group rows were
recorded with 4.4.0): the error codes of the answer, wherever they sit in it, and for the APIs that
answer with a filtered list (Metadata, ListGroups, ListTransactions, DescribeCluster) the list.

Share groups: Kafka 4.4.0 serves them from `share.version` 1 and a new cluster starts at 2 (Kafka's
default, left as it is here); a new Skein cluster starts at 1. Either way the share APIs are on,
so they are rows like the others: mallory is refused on the group (30) or, for the share
coordinator's RPCs, on the cluster (31). Streams groups (KIP-1071) are on in both too
(`streams.version` 1 on a new cluster): their three APIs are rows, written from their schemas like
the share-group ones. What follows the group check is in MEMBER_ROWS, sent as
member, who holds Read on one share group and Delete and Alter on the other and nothing on any
topic (and, as member too, the streams APIs past the group check: Describe on the topology's
topics, a share group that is not a streams group, no topology description plugin): which operation
each API asks for on the group (ShareGroupHeartbeat, ShareFetch,
ShareAcknowledge and AlterShareGroupOffsets Read; DeleteShareGroupOffsets Delete; ShareGroupDescribe
and DescribeShareGroupOffsets Describe), then its topic check (29 where it sits in the answer).

Inter-broker forms a client can send are rows too: Fetch from a follower (ReplicaId in v11, the
ReplicaState tagged field in v17), OffsetForLeaderEpoch from a follower, WriteTxnMarkers,
AddPartitionsToTxn's batched v4 form, FindCoordinator for a share coordinator's key and the share
coordinator's five state RPCs (Initialize/Read/Write/DeleteShareGroupState,
ReadShareGroupStateSummary): without ClusterAction mallory must be refused (a follower fetch moves
the high watermark). The controller-only and removed ZooKeeper-era APIs, which neither broker
advertises, are sent too: Kafka closes the connection without an answer.

APIs only one of the two brokers serves and the pre-authentication APIs are listed below with
the reason (no test case, nothing skipped); `test_served_apis_are_all_in_the_matrix` fails
when the broker under test serves an API the matrix does not name.

Destructive requests come last (DeleteTopics, DeleteRecords, ...), and
`test_nothing_changed_after_the_matrix` checks, as admin, that the topics, the records, the group's
offset, the share groups' start offsets, the configs, the ACLs, the client quotas and the SCRAM
users are as they were.
"""

from __future__ import annotations

import base64
import os
import uuid
from dataclasses import dataclass, field
from typing import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ConfigResource, NewTopic, ResourcePatternType, ResourceType)
from kafka.protocol.admin import (AlterClientQuotasRequest, AlterClientQuotasResponse, AlterConfigsRequest,
                                  AlterConfigsResponse, AlterPartitionReassignmentsRequest,
                                  AlterPartitionReassignmentsResponse, AlterUserScramCredentialsRequest,
                                  AlterUserScramCredentialsResponse, CreateAclsRequest, CreateAclsResponse,
                                  CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
                                  CreateTopicsResponse, DeleteAclsRequest, DeleteAclsResponse, DeleteGroupsRequest,
                                  DeleteGroupsResponse, DeleteRecordsRequest, DeleteRecordsResponse,
                                  DeleteTopicsRequest, DeleteTopicsResponse, DescribeAclsRequest,
                                  DescribeAclsResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
                                  DescribeClusterRequest, DescribeClusterResponse, DescribeConfigsRequest,
                                  DescribeConfigsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
                                  DescribeLogDirsRequest, DescribeLogDirsResponse, DescribeProducersRequest,
                                  DescribeProducersResponse, DescribeTopicPartitionsRequest,
                                  DescribeTopicPartitionsResponse, DescribeTransactionsRequest,
                                  DescribeTransactionsResponse, DescribeUserScramCredentialsRequest,
                                  DescribeUserScramCredentialsResponse, ElectLeadersRequest, ElectLeadersResponse,
                                  IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
                                  ListGroupsRequest, ListGroupsResponse, ListPartitionReassignmentsRequest,
                                  ListPartitionReassignmentsResponse, ListTransactionsRequest,
                                  ListTransactionsResponse, UpdateFeaturesRequest, UpdateFeaturesResponse)
from kafka.protocol.consumer import (FetchRequest, FetchResponse, HeartbeatRequest, HeartbeatResponse,
                                     JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
                                     ListOffsetsRequest, ListOffsetsResponse, OffsetCommitRequest,
                                     OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
                                     OffsetFetchRequest, OffsetFetchResponse, OffsetForLeaderEpochRequest,
                                     OffsetForLeaderEpochResponse, SyncGroupRequest, SyncGroupResponse)
from kafka.protocol.metadata import (FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest,
                                     MetadataResponse)
from kafka.protocol.producer import (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
                                     AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse,
                                     InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse,
                                     TxnOffsetCommitRequest, TxnOffsetCommitResponse, WriteTxnMarkersRequest,
                                     WriteTxnMarkersResponse)

import rawkafka as rk
from brokers import KafkaBroker, free_port, make_broker

pytestmark = pytest.mark.acls

TARGET = os.environ.get("E2E_TARGET", "skein")
USERS = {"admin": "admin-secret", "mallory": "mallory-secret", "member": "member-secret"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

TOPIC = "authz-topic"          # 1 partition, RECORDS records, made by admin
GROUP = "authz-group"          # committed offset COMMITTED on TOPIC-0, made by admin
TXN = "authz-txn"              # a transactional id that committed one transaction
SHARE_GROUP = "authz-share"    # share groups whose start offset on TOPIC-0 admin set to SHARE_START;
OTHER_SHARE_GROUP = "authz-share-other"  # member's ACLs differ on the two (MEMBER_ROWS)
SHARE_GROUPS = (SHARE_GROUP, OTHER_SHARE_GROUP)
NEW_TOPIC = "authz-new-topic"  # never created: mallory's CreateTopics
MISSING = "authz-missing"      # never created: Metadata by name for a topic that does not exist
RECORDS, COMMITTED, SHARE_START = 5, 3, 2

# Errors (org.apache.kafka.common.protocol.Errors).
TOPIC_AUTH = 29            # TOPIC_AUTHORIZATION_FAILED
GROUP_AUTH = 30            # GROUP_AUTHORIZATION_FAILED
CLUSTER_AUTH = 31          # CLUSTER_AUTHORIZATION_FAILED
TXN_ID_AUTH = 53           # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
CLOSED = "connection closed without an answer"

# ------------------------------------------------------------------------------------------
# which APIs

# Answered before (or as part of) authentication: nothing to authorize. Not in the matrix.
PRE_AUTH = {
    17: "SaslHandshake: pre-authentication (the SASL exchange itself)",
    18: "ApiVersions: pre-authentication (answered to anyone, before SASL)",
    36: "SaslAuthenticate: pre-authentication (the SASL exchange itself)",
}

# Advertised by Apache Kafka 4.4.0 on its broker listener (ApiVersions) but not by Skein: no
# row (docs/compatibility.md lists them as not served). Kafka's answers to them are not part of this matrix.
KAFKA_ONLY = {
    34: "AlterReplicaLogDirs: served by Kafka 4.4.0 only (moving replicas between a broker's log dirs)",
    55: "DescribeQuorum: served by Kafka 4.4.0 only (the KRaft quorum; Skein has no KRaft controller)",
    64: "UnregisterBroker: served by Kafka 4.4.0 only (KRaft broker registrations)",
    80: "AddRaftVoter: served by Kafka 4.4.0 only (KRaft quorum membership, KIP-853)",
    81: "RemoveRaftVoter: served by Kafka 4.4.0 only (KRaft quorum membership, KIP-853)",
    94: "UnregisterController: served by Kafka 4.4.0 only (KRaft controller registrations)",
}

# Advertised by Skein but not by Kafka 4.4.0: none (every key Skein serves, Kafka serves).
SKEIN_ONLY: dict[int, str] = {}

# Advertised by neither on the client listener: the ZooKeeper-era inter-broker APIs (gone from
# Kafka 4) and the KRaft controller's own. A client can still send them; sent with an empty body
# at the version named (the header is all a broker reads of an API it does not serve).
NOT_SERVED = {
    4: ("LeaderAndIsr", 7), 5: ("StopReplica", 4), 6: ("UpdateMetadata", 8), 7: ("ControlledShutdown", 3),
    52: ("Vote", 1), 53: ("BeginQuorumEpoch", 1), 54: ("EndQuorumEpoch", 1), 56: ("AlterPartition", 3),
    58: ("Envelope", 0), 59: ("FetchSnapshot", 1), 62: ("BrokerRegistration", 4), 63: ("BrokerHeartbeat", 1),
    67: ("AllocateProducerIds", 0), 70: ("ControllerRegistration", 0), 73: ("AssignReplicasToDirs", 0),
}


# ------------------------------------------------------------------------------------------
# the broker and what admin makes


@dataclass
class Setup:
    broker: object
    sasl_port: int
    topic_id: uuid.UUID
    producer_id: int
    producer_epoch: int
    before: dict = field(default_factory=dict)  # what test_nothing_changed_after_the_matrix compares

    def conf(self, user: str) -> dict:
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}

    def connect(self, user: str) -> rk.Connection:
        c = rk.Connection("127.0.0.1", self.sasl_port, client_id=f"authz-{user}", timeout=30)
        try:
            c.sasl_plain(user, USERS[user])
        except BaseException:
            c.close()
            raise
        return c


def jaas(*, client_user: str | None = None) -> str:
    login = f' username="{client_user}" password="{USERS[client_user]}"' if client_user else ""
    users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required{login} {users};"


@pytest.fixture(scope="module")
def authz(tmp_path_factory):
    """The broker under test with the authorizer on, PLAINTEXT (User:ANONYMOUS, no ACL) and
    SASL_PLAINTEXT (PLAIN: admin, a super user, and mallory). Kafka also needs its controller
    listener and inter-broker listener to authenticate as a super user (SASL_PLAINTEXT, PLAIN as
    admin): its broker registers with the controller, which authorizes that (ClusterAction)."""
    b = make_broker(TARGET, tmp_path_factory.mktemp(f"{TARGET}-authz"))
    sasl_port = free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    overrides = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas(),
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false",
    }
    if isinstance(b, KafkaBroker):
        overrides.update({
            "listeners": listeners + f",CONTROLLER://127.0.0.1:{b.controller_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                              "CONTROLLER:SASL_PLAINTEXT",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas(client_user="admin"),
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": jaas(client_user="admin"),
        })
    if isinstance(b, KafkaBroker):
        # Kafka serves GetTelemetrySubscriptions and PushTelemetry only with a client telemetry
        # exporter (Skein's is built in): the suite's own (e2e/java).
        overrides.update({"metric.reporters": "skein.e2e.TelemetryFileExporter",
                          "skein.e2e.telemetry.file": str(b.workdir / "pushed.tsv")})
    b.overrides.update(overrides)
    b.start()
    try:
        yield make_resources(b, sasl_port)
    finally:
        b.stop()


def make_resources(b, sasl_port: int) -> Setup:
    s = Setup(b, sasl_port, uuid.UUID(int=0), -1, -1)
    admin = AdminClient(s.conf("admin"))
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1)], operation_timeout=30).values():
        f.result(30)
    p = Producer({**s.conf("admin"), "acks": "all"})
    for i in range(RECORDS):
        p.produce(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0
    c = Consumer({**s.conf("admin"), "group.id": GROUP, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(TOPIC, 0, COMMITTED)], asynchronous=False)
    c.close()
    tp = Producer({**s.conf("admin"), "transactional.id": TXN})
    tp.init_transactions(30)
    tp.begin_transaction()
    tp.produce(TOPIC, value=b"in a transaction", partition=0)
    tp.commit_transaction(30)
    tp.flush(10)
    del tp
    with s.connect("admin") as c:
        md = c.message(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                           allow_auto_topic_creation=False), MetadataResponse)
        assert md.topics[0].error_code == 0, md
        s.topic_id = md.topics[0].topic_id
        # The transactional id's current producer id and epoch (what mallory's requests carry).
        d = c.message(DescribeTransactionsRequest[0](transactional_ids=[TXN]), DescribeTransactionsResponse)
        state = d.transaction_states[0]
        assert state.error_code == 0, d
        s.producer_id, s.producer_epoch = state.producer_id, state.producer_epoch
        # The share groups, made by setting their start offset (AlterShareGroupOffsets makes a missing group).
        for group in SHARE_GROUPS:
            made = share_request(c, 91, 0, group_id=group, topics=[
                {"topic_name": TOPIC, "partitions": [{"partition_index": 0, "start_offset": SHARE_START}]}])
            assert codes(made) == {"error_code": 0, "responses[0].partitions[0].error_code": 0}, made
    # member's ACLs (MEMBER_ROWS): Read on SHARE_GROUP, Delete and Alter on OTHER_SHARE_GROUP.
    bindings = [AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:member", "*", op,
                           AclPermissionType.ALLOW)
                for group, op in ((SHARE_GROUP, AclOperation.READ), (OTHER_SHARE_GROUP, AclOperation.DELETE),
                                  (OTHER_SHARE_GROUP, AclOperation.ALTER))]
    for f in admin.create_acls(bindings, request_timeout=30).values():
        assert f.result(30) is None
    s.before = snapshot(s)
    return s


def snapshot(s: Setup) -> dict:
    """What mallory's requests must not change, read as admin: topics, partitions, watermarks, the
    group's offset, the share groups' start offsets, a topic and a broker config, ACLs, client quotas
    and SCRAM users."""
    admin = AdminClient(s.conf("admin"))
    md = admin.list_topics(timeout=30)
    c = Consumer({**s.conf("admin"), "group.id": GROUP, "enable.auto.commit": False})
    try:
        committed = c.committed([TopicPartition(TOPIC, 0)], timeout=30)[0].offset
        low, high = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
    finally:
        c.close()
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    acls = admin.describe_acls(everything, request_timeout=30).result(30)
    configs = {}
    for kind, name, key in ((ConfigResource.Type.TOPIC, TOPIC, "retention.ms"),
                            (ConfigResource.Type.BROKER, "1", "log.retention.ms")):
        for f in admin.describe_configs([ConfigResource(kind, name)], request_timeout=30).values():
            entry = f.result(30).get(key)
            configs[f"{name} {key}"] = None if entry is None else entry.value
    with s.connect("admin") as raw:
        quotas = raw.message(build(DescribeClientQuotasRequest, 1, components=[], strict=False),
                             DescribeClientQuotasResponse)
        assert quotas.error_code == 0, quotas
        scram = raw.message(build(DescribeUserScramCredentialsRequest, 0, users=[{"name": "mallory"}]),
                            DescribeUserScramCredentialsResponse)
    return {
        "topics": sorted(t for t in md.topics if not t.startswith("__")),
        "partitions": len(md.topics[TOPIC].partitions) if TOPIC in md.topics else None,
        "committed": committed,
        "share groups": share_offsets(s),
        "watermarks": (low, high),
        "configs": configs,
        "acls": sorted(str(a) for a in acls),
        "client quotas": sorted(str(e.to_dict()) for e in quotas.entries or []),
        "mallory's SCRAM credentials": [(r.error_code, len(r.credential_infos)) for r in scram.results],
    }


# ------------------------------------------------------------------------------------------
# building requests and reading answers


def build(cls, version: int, **values):
    """A kafka-python request at `version`; nested structs and struct arrays given as dicts."""
    return cls[version](**_values(cls._struct.fields, values))


def _values(fields, values: dict) -> dict:
    out = {}
    for name, v in values.items():
        f = fields[name]
        if v is not None and f.is_struct_array():
            v = [f.data_class(**_values(f.fields, x)) for x in v]
        elif v is not None and f.is_struct():
            v = f.data_class(**_values(f.fields, v))
        out[name] = v
    return out


def codes(answer) -> dict[str, int]:
    """Every error code in a decoded answer, by its path: {"topics[0].error_code": 29, ...}."""
    out: dict[str, int] = {}

    def walk(v, path: str) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                p = f"{path}.{k}" if path else k
                if k.endswith("error_code") and isinstance(x, int):
                    out[p] = x
                else:
                    walk(x, p)
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, f"{path}[{i}]")

    walk(answer if isinstance(answer, dict) else answer.to_dict(), "")
    return out


def send(request, response_class, extract: Callable = codes):
    """A row's call: sends `request` as mallory and extracts the answer."""
    return lambda c, s: extract(c.message(request(s) if callable(request) else request, response_class))


# ------------------------------------------------------------------------------------------
# the matrix


@dataclass
class Row:
    id: str
    api: int
    version: int
    call: Callable  # (mallory's connection, Setup) -> the answer
    kafka: object   # Kafka 4.4.0's answer
    doc: str


def batch(**kw) -> bytes:
    return rk.record_batch([rk.record(0, 0, b"k", b"mallory")], base_timestamp=1_700_000_000_000, **kw)


def authorized_operations(bits: set[int] | None) -> list[int] | None:
    """An authorized-operations bitfield as kafka-python decodes it (the set bits; None for
    -2147483648, "not asked for"), as a list of AclOperation codes."""
    return None if bits is None else sorted(bits)


def metadata_topics(answer) -> dict:
    return {"error_code": answer.error_code, "topics": {t.name: t.error_code for t in answer.topics}}


ROWS: list[Row] = [
    Row("Produce", 0, 13,
        send(lambda s: build(ProduceRequest, 13, transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
            {"topic_id": s.topic_id, "partition_data": [{"index": 0, "records": batch()}]}]), ProduceResponse),
        {"responses[0].partition_responses[0].error_code": TOPIC_AUTH},
        "Write on the topic"),
    Row("Produce-transactional", 0, 13,
        send(lambda s: build(ProduceRequest, 13, transactional_id=TXN, acks=-1, timeout_ms=30000, topic_data=[
            {"topic_id": s.topic_id, "partition_data": [{"index": 0, "records": batch(
                attributes=rk.ATTR_TRANSACTIONAL, producer_id=s.producer_id, producer_epoch=s.producer_epoch,
                base_sequence=0)}]}]), ProduceResponse),
        {"responses[0].partition_responses[0].error_code": TXN_ID_AUTH},
        "Write on the transactional id"),
    Row("Fetch", 1, 17,
        send(lambda s: build(FetchRequest, 17, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
            {"topic_id": s.topic_id, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                     "partition_max_bytes": 1 << 20}]}],
            forgotten_topics_data=[]), FetchResponse),
        {"error_code": 0, "responses[0].partitions[0].error_code": TOPIC_AUTH},
        "Read on the topic"),
    Row("Fetch-follower-v17", 1, 17,
        send(lambda s: build(FetchRequest, 17, replica_state={"replica_id": 1, "replica_epoch": -1},
                             max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
            {"topic_id": s.topic_id, "partitions": [{"partition": 0, "fetch_offset": RECORDS + 2,
                                                     "partition_max_bytes": 1 << 20}]}],
            forgotten_topics_data=[]), FetchResponse),
        {"error_code": 0, "responses[0].partitions[0].error_code": TOPIC_AUTH},
        "a follower fetch (ReplicaState.ReplicaId 1, the broker's id): without ClusterAction on the "
        "cluster every partition is refused with 29"),
    Row("Fetch-follower-v11", 1, 11,
        send(build(FetchRequest, 11, replica_id=1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
            {"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": RECORDS + 2,
                                             "partition_max_bytes": 1 << 20}]}],
            forgotten_topics_data=[]), FetchResponse),
        {"error_code": 0, "responses[0].partitions[0].error_code": TOPIC_AUTH},
        "a follower fetch (ReplicaId 1): without ClusterAction on the cluster every partition is "
        "refused with 29"),
    Row("ListOffsets", 2, 10,
        send(build(ListOffsetsRequest, 10, replica_id=-1, topics=[
            {"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}], timeout_ms=30000),
            ListOffsetsResponse),
        {"topics[0].partitions[0].error_code": TOPIC_AUTH},
        "Describe on the topic"),
    Row("Metadata-by-name", 3, 13,
        send(build(MetadataRequest, 13, topics=[{"name": TOPIC}], allow_auto_topic_creation=False),
             MetadataResponse, metadata_topics),
        {"error_code": 0, "topics": {TOPIC: TOPIC_AUTH}},
        "Describe on the topic"),
    Row("Metadata-missing-topic", 3, 13,
        send(build(MetadataRequest, 13, topics=[{"name": MISSING}], allow_auto_topic_creation=True),
             MetadataResponse, metadata_topics),
        {"error_code": 0, "topics": {MISSING: TOPIC_AUTH}},
        "a topic that does not exist, auto-creation asked: Describe (and Create) on it"),
    Row("Metadata-all-topics", 3, 13,
        send(build(MetadataRequest, 13, topics=None, allow_auto_topic_creation=False),
             MetadataResponse, metadata_topics),
        {"error_code": 0, "topics": {}},
        "all topics: only the describable ones are listed"),
    Row("OffsetCommit", 8, 9,
        send(build(OffsetCommitRequest, 9, group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
                   group_instance_id=None, topics=[{"name": TOPIC, "partitions": [
                       {"partition_index": 0, "committed_offset": 0, "committed_metadata": ""}]}]),
             OffsetCommitResponse),
        {"topics[0].partitions[0].error_code": GROUP_AUTH},
        "Read on the group"),
    Row("OffsetFetch", 9, 9,
        send(build(OffsetFetchRequest, 9, groups=[{"group_id": GROUP, "topics": None}]), OffsetFetchResponse),
        {"groups[0].error_code": GROUP_AUTH},
        "Describe on the group"),
    Row("FindCoordinator-group", 10, 6,
        send(build(FindCoordinatorRequest, 6, key_type=0, coordinator_keys=[GROUP]), FindCoordinatorResponse),
        {"coordinators[0].error_code": GROUP_AUTH},
        "Describe on the group"),
    Row("FindCoordinator-transaction", 10, 6,
        send(build(FindCoordinatorRequest, 6, key_type=1, coordinator_keys=[TXN]), FindCoordinatorResponse),
        {"coordinators[0].error_code": TXN_ID_AUTH},
        "Describe on the transactional id"),
    Row("FindCoordinator-share", 10, 6,
        send(lambda s: build(FindCoordinatorRequest, 6, key_type=2,
                             coordinator_keys=[f"{SHARE_GROUP}:{kafka_uuid(s.topic_id)}:0"]), FindCoordinatorResponse),
        {"coordinators[0].error_code": CLUSTER_AUTH},
        "a share coordinator's key (group:topicId:partition; KIP-932), asked for by brokers: ClusterAction on "
        "the cluster"),
    Row("JoinGroup", 11, 9,
        send(build(JoinGroupRequest, 9, group_id=GROUP, session_timeout_ms=10000, rebalance_timeout_ms=30000,
                   member_id="", group_instance_id=None, protocol_type="consumer",
                   protocols=[{"name": "range", "metadata": b""}], reason=None), JoinGroupResponse),
        {"error_code": GROUP_AUTH},
        "Read on the group"),
    Row("Heartbeat", 12, 4,
        send(build(HeartbeatRequest, 4, group_id=GROUP, generation_id=1, member_id="mallory-member",
                   group_instance_id=None), HeartbeatResponse),
        {"error_code": GROUP_AUTH},
        "Read on the group"),
    Row("SyncGroup", 14, 5,
        send(build(SyncGroupRequest, 5, group_id=GROUP, generation_id=1, member_id="mallory-member",
                   group_instance_id=None, protocol_type="consumer", protocol_name="range", assignments=[]),
             SyncGroupResponse),
        {"error_code": GROUP_AUTH},
        "Read on the group"),
    Row("LeaveGroup", 13, 5,
        send(build(LeaveGroupRequest, 5, group_id=GROUP, members=[
            {"member_id": "mallory-member", "group_instance_id": None, "reason": None}]), LeaveGroupResponse),
        {"error_code": GROUP_AUTH},
        "Read on the group"),
    Row("DescribeGroups", 15, 6,
        send(build(DescribeGroupsRequest, 6, groups=[GROUP], include_authorized_operations=False),
             DescribeGroupsResponse),
        {"groups[0].error_code": GROUP_AUTH},
        "Describe on the group"),
    Row("ListGroups", 16, 5,
        send(build(ListGroupsRequest, 5, states_filter=[], types_filter=[]), ListGroupsResponse,
             lambda a: {"error_code": a.error_code, "groups": [g.group_id for g in a.groups]}),
        {"error_code": 0, "groups": []},
        "only the groups the principal may describe are listed"),
    Row("CreateTopics", 19, 7,
        send(build(CreateTopicsRequest, 7, topics=[{"name": NEW_TOPIC, "num_partitions": 1, "replication_factor": 1,
                                                    "assignments": [], "configs": []}],
                   timeout_ms=30000, validate_only=False), CreateTopicsResponse),
        {"topics[0].error_code": TOPIC_AUTH, "topics[0].topic_config_error_code": 0},
        "Create on the cluster or the topic"),
    Row("InitProducerId-transactional", 22, 5,
        send(build(InitProducerIdRequest, 5, transactional_id=TXN, transaction_timeout_ms=60000,
                   producer_id=-1, producer_epoch=-1), InitProducerIdResponse),
        {"error_code": TXN_ID_AUTH},
        "Write on the transactional id"),
    Row("InitProducerId-idempotent", 22, 5,
        send(build(InitProducerIdRequest, 5, transactional_id=None, transaction_timeout_ms=60000,
                   producer_id=-1, producer_epoch=-1), InitProducerIdResponse),
        {"error_code": CLUSTER_AUTH},
        "IdempotentWrite on the cluster, or Write on some topic (KIP-679)"),
    Row("OffsetForLeaderEpoch", 23, 4,
        send(build(OffsetForLeaderEpochRequest, 4, replica_id=-1, topics=[
            {"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]),
            OffsetForLeaderEpochResponse),
        {"topics[0].partitions[0].error_code": TOPIC_AUTH},
        "Describe on the topic"),
    Row("OffsetForLeaderEpoch-follower", 23, 4,
        send(build(OffsetForLeaderEpochRequest, 4, replica_id=1, topics=[
            {"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]),
            OffsetForLeaderEpochResponse),
        {"topics[0].partitions[0].error_code": TOPIC_AUTH},
        "from a follower (ReplicaId 1): Kafka asks ClusterAction on the cluster or Describe on the topic "
        "whatever the ReplicaId (KIP-320)"),
    Row("AddPartitionsToTxn-v3-client", 24, 3,
        send(lambda s: build(AddPartitionsToTxnRequest, 3, v3_and_below_transactional_id=TXN,
                             v3_and_below_producer_id=s.producer_id, v3_and_below_producer_epoch=s.producer_epoch,
                             v3_and_below_topics=[{"name": TOPIC, "partitions": [0]}]), AddPartitionsToTxnResponse),
        {"results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code": TXN_ID_AUTH},
        "the client form (v3, the highest a client sends; v4+ is inter-broker): Write on the transactional id"),
    Row("AddPartitionsToTxn-v4-broker", 24, 4,
        send(lambda s: build(AddPartitionsToTxnRequest, 4, transactions=[
            {"transactional_id": TXN, "producer_id": s.producer_id, "producer_epoch": s.producer_epoch,
             "verify_only": False, "topics": [{"name": TOPIC, "partitions": [0]}]}]), AddPartitionsToTxnResponse),
        {"error_code": CLUSTER_AUTH},
        "the batched inter-broker form (v4+): ClusterAction on the cluster"),
    Row("AddPartitionsToTxn-v4-verify-only", 24, 4,
        send(lambda s: build(AddPartitionsToTxnRequest, 4, transactions=[
            {"transactional_id": TXN, "producer_id": s.producer_id, "producer_epoch": s.producer_epoch,
             "verify_only": True, "topics": [{"name": TOPIC, "partitions": [0]}]}]), AddPartitionsToTxnResponse),
        {"error_code": CLUSTER_AUTH},
        "the inter-broker verification (KIP-890): ClusterAction on the cluster"),
    Row("AddOffsetsToTxn", 25, 4,
        send(lambda s: build(AddOffsetsToTxnRequest, 4, transactional_id=TXN, producer_id=s.producer_id,
                             producer_epoch=s.producer_epoch, group_id=GROUP), AddOffsetsToTxnResponse),
        {"error_code": TXN_ID_AUTH},
        "Write on the transactional id"),
    Row("EndTxn", 26, 4,
        send(lambda s: build(EndTxnRequest, 4, transactional_id=TXN, producer_id=s.producer_id,
                             producer_epoch=s.producer_epoch, committed=False), EndTxnResponse),
        {"error_code": TXN_ID_AUTH},
        "Write on the transactional id"),
    Row("WriteTxnMarkers", 27, 1,
        send(lambda s: build(WriteTxnMarkersRequest, 1, markers=[
            {"producer_id": s.producer_id, "producer_epoch": s.producer_epoch, "transaction_result": False,
             "topics": [{"name": TOPIC, "partition_indexes": [0]}], "coordinator_epoch": 0}]),
            WriteTxnMarkersResponse),
        {"markers[0].topics[0].partitions[0].error_code": CLUSTER_AUTH},
        "inter-broker (from the transaction coordinator): ClusterAction on the cluster"),
    Row("TxnOffsetCommit", 28, 4,
        send(lambda s: build(TxnOffsetCommitRequest, 4, transactional_id=TXN, group_id=GROUP,
                             producer_id=s.producer_id, producer_epoch=s.producer_epoch, generation_id=-1,
                             member_id="", group_instance_id=None, topics=[
                                 {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                                 "committed_metadata": ""}]}]),
             TxnOffsetCommitResponse),
        {"topics[0].partitions[0].error_code": TXN_ID_AUTH},
        "Write on the transactional id (then Read on the group)"),
    Row("DescribeAcls", 29, 3,
        send(build(DescribeAclsRequest, 3, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                   principal_filter=None, host_filter=None, operation=1, permission_type=1), DescribeAclsResponse),
        {"error_code": CLUSTER_AUTH},
        "Describe on the cluster"),
    Row("CreateAcls", 30, 3,
        send(build(CreateAclsRequest, 3, creations=[
            {"resource_type": 2, "resource_name": TOPIC, "resource_pattern_type": 3, "principal": "User:mallory",
             "host": "*", "operation": 2, "permission_type": 3}]), CreateAclsResponse),
        {"results[0].error_code": CLUSTER_AUTH},
        "Alter on the cluster"),
    Row("DescribeConfigs-topic", 32, 4,
        send(build(DescribeConfigsRequest, 4, resources=[
            {"resource_type": 2, "resource_name": TOPIC, "configuration_keys": None}],
            include_synonyms=False, include_documentation=False), DescribeConfigsResponse),
        {"results[0].error_code": TOPIC_AUTH},
        "DescribeConfigs on the topic"),
    Row("DescribeConfigs-broker", 32, 4,
        send(build(DescribeConfigsRequest, 4, resources=[
            {"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
            include_synonyms=False, include_documentation=False), DescribeConfigsResponse),
        {"results[0].error_code": CLUSTER_AUTH},
        "DescribeConfigs on the cluster"),
    Row("DescribeLogDirs", 35, 4,
        send(build(DescribeLogDirsRequest, 4, topics=None), DescribeLogDirsResponse,
             lambda a: {**codes(a), "results": len(a.results)}),
        {"error_code": CLUSTER_AUTH, "results": 0},
        "Describe on the cluster"),
    Row("ListPartitionReassignments", 46, 0,
        send(build(ListPartitionReassignmentsRequest, 0, timeout_ms=30000, topics=None),
             ListPartitionReassignmentsResponse),
        {"error_code": CLUSTER_AUTH},
        "Describe on the cluster"),
    Row("DescribeClientQuotas", 48, 1,
        send(build(DescribeClientQuotasRequest, 1, components=[], strict=False), DescribeClientQuotasResponse),
        {"error_code": CLUSTER_AUTH},
        "DescribeConfigs on the cluster"),
    Row("DescribeUserScramCredentials", 50, 0,
        send(build(DescribeUserScramCredentialsRequest, 0, users=[{"name": "admin"}]),
             DescribeUserScramCredentialsResponse),
        {"error_code": CLUSTER_AUTH, "results[0].error_code": CLUSTER_AUTH},
        "Describe on the cluster. Asked for user admin: Kafka 4.4.0 never answers users=null (all "
              "users) when refusing it (a NullPointerException building the error response)"),
    Row("DescribeCluster", 60, 1,
        send(build(DescribeClusterRequest, 1, include_cluster_authorized_operations=True, endpoint_type=1),
             DescribeClusterResponse,
             lambda a: {"error_code": a.error_code, "brokers": [b.broker_id for b in a.brokers],
                        "cluster_authorized_operations": authorized_operations(a.authorized_operations)}),
        {"error_code": 0, "brokers": [1], "cluster_authorized_operations": []},
        "no authorization; the cluster's authorized operations asked for are mallory's: none (0)"),
    Row("DescribeProducers", 61, 0,
        send(build(DescribeProducersRequest, 0, topics=[{"name": TOPIC, "partition_indexes": [0]}]),
             DescribeProducersResponse),
        {"topics[0].partitions[0].error_code": TOPIC_AUTH},
        "Read on the topic"),
    Row("DescribeTransactions", 65, 0,
        send(build(DescribeTransactionsRequest, 0, transactional_ids=[TXN]), DescribeTransactionsResponse),
        {"transaction_states[0].error_code": TXN_ID_AUTH},
        "Describe on the transactional id"),
    Row("ListTransactions", 66, 2,
        send(build(ListTransactionsRequest, 2, state_filters=[], producer_id_filters=[], duration_filter=-1,
                   transactional_id_pattern=None), ListTransactionsResponse,
             lambda a: {"error_code": a.error_code,
                        "transactions": [t.transactional_id for t in a.transaction_states]}),
        {"error_code": 0, "transactions": []},
        "only the transactional ids the principal may describe are listed"),
    Row("ConsumerGroupHeartbeat", 68, 1,
        lambda c, s: c.consumer_group_heartbeat(GROUP, str(uuid.uuid4()), 0, [TOPIC])[0],
        GROUP_AUTH,
        "Read on the group"),
    Row("ConsumerGroupDescribe", 69, 1,
        lambda c, s: c.consumer_group_describe([GROUP]),
        [(GROUP_AUTH, GROUP)],
        "Describe on the group"),
    Row("DescribeTopicPartitions", 75, 0,
        send(build(DescribeTopicPartitionsRequest, 0, topics=[{"name": TOPIC}], response_partition_limit=2000,
                   cursor=None), DescribeTopicPartitionsResponse,
             lambda a: {"topics": {t.name: t.error_code for t in a.topics}}),
        {"topics": {TOPIC: TOPIC_AUTH}},
        "Describe on the topic"),
    # -- requests that would change something: last -----------------------------------------
    Row("UpdateFeatures", 57, 2,
        send(build(UpdateFeaturesRequest, 2, timeout_ms=30000, feature_updates=[
            {"feature": "transaction.version", "max_version_level": 0, "upgrade_type": 2}], validate_only=True),
            UpdateFeaturesResponse),
        {"error_code": CLUSTER_AUTH},
        "Alter on the cluster (validate only: a downgrade the broker would refuse anyway)"),
    Row("ElectLeaders", 43, 2,
        send(build(ElectLeadersRequest, 2, election_type=0, topic_partitions=[{"topic": TOPIC, "partitions": [0]}],
                   timeout_ms=30000), ElectLeadersResponse),
        {"error_code": CLUSTER_AUTH, "replica_election_results[0].partition_result[0].error_code": CLUSTER_AUTH},
        "Alter on the cluster"),
    Row("AlterPartitionReassignments", 45, 1,
        send(build(AlterPartitionReassignmentsRequest, 1, timeout_ms=30000, allow_replication_factor_change=True,
                   topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": [1]}]}]),
             AlterPartitionReassignmentsResponse),
        {"error_code": CLUSTER_AUTH, "responses[0].partitions[0].error_code": CLUSTER_AUTH},
        "Alter on the cluster"),
    Row("AlterClientQuotas", 49, 1,
        send(build(AlterClientQuotasRequest, 1, entries=[
            {"entity": [{"entity_type": "user", "entity_name": "mallory"}],
             "ops": [{"key": "producer_byte_rate", "value": 1e12, "remove": False}]}], validate_only=False),
            AlterClientQuotasResponse),
        {"entries[0].error_code": CLUSTER_AUTH},
        "AlterConfigs on the cluster"),
    Row("AlterUserScramCredentials", 51, 0,
        send(build(AlterUserScramCredentialsRequest, 0, deletions=[], upsertions=[
            {"name": "mallory", "mechanism": 1, "iterations": 8192, "salt": b"mallory-salt",
             "salted_password": bytes(32)}]), AlterUserScramCredentialsResponse),
        {"results[0].error_code": CLUSTER_AUTH},
        "Alter on the cluster"),
    Row("AlterConfigs-topic", 33, 2,
        send(build(AlterConfigsRequest, 2, resources=[
            {"resource_type": 2, "resource_name": TOPIC, "configs": [{"name": "retention.ms", "value": "1000"}]}],
            validate_only=False), AlterConfigsResponse),
        {"responses[0].error_code": TOPIC_AUTH},
        "AlterConfigs on the topic"),
    Row("AlterConfigs-broker", 33, 2,
        send(build(AlterConfigsRequest, 2, resources=[
            {"resource_type": 4, "resource_name": "1", "configs": [{"name": "log.retention.ms", "value": "1000"}]}],
            validate_only=False), AlterConfigsResponse),
        {"responses[0].error_code": CLUSTER_AUTH},
        "AlterConfigs on the cluster"),
    Row("IncrementalAlterConfigs-topic", 44, 1,
        send(build(IncrementalAlterConfigsRequest, 1, resources=[
            {"resource_type": 2, "resource_name": TOPIC,
             "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1000"}]}],
            validate_only=False), IncrementalAlterConfigsResponse),
        {"responses[0].error_code": TOPIC_AUTH},
        "AlterConfigs on the topic"),
    Row("IncrementalAlterConfigs-broker", 44, 1,
        send(build(IncrementalAlterConfigsRequest, 1, resources=[
            {"resource_type": 4, "resource_name": "1",
             "configs": [{"name": "log.retention.ms", "config_operation": 0, "value": "1000"}]}],
            validate_only=False), IncrementalAlterConfigsResponse),
        {"responses[0].error_code": CLUSTER_AUTH},
        "AlterConfigs on the cluster"),
    Row("CreatePartitions", 37, 3,
        send(build(CreatePartitionsRequest, 3, topics=[{"name": TOPIC, "count": 2, "assignments": None}],
                   timeout_ms=30000, validate_only=False), CreatePartitionsResponse),
        {"results[0].error_code": TOPIC_AUTH},
        "Alter on the topic"),
    Row("DeleteAcls", 31, 3,
        send(build(DeleteAclsRequest, 3, filters=[
            {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
             "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]),
            DeleteAclsResponse),
        {"filter_results[0].error_code": CLUSTER_AUTH},
        "Alter on the cluster"),
    Row("OffsetDelete", 47, 0,
        send(build(OffsetDeleteRequest, 0, group_id=GROUP, topics=[{"name": TOPIC, "partitions": [
            {"partition_index": 0}]}]), OffsetDeleteResponse),
        {"error_code": GROUP_AUTH},
        "Delete on the group"),
    Row("DeleteGroups", 42, 2,
        send(build(DeleteGroupsRequest, 2, groups_names=[GROUP]), DeleteGroupsResponse),
        {"results[0].error_code": GROUP_AUTH},
        "Delete on the group"),
    Row("DeleteRecords", 21, 2,
        send(build(DeleteRecordsRequest, 2, topics=[{"name": TOPIC, "partitions": [
            {"partition_index": 0, "offset": 2}]}], timeout_ms=30000), DeleteRecordsResponse),
        {"topics[0].partitions[0].error_code": TOPIC_AUTH},
        "Delete on the topic"),
    Row("DeleteTopics", 20, 6,
        send(build(DeleteTopicsRequest, 6, topics=[{"name": TOPIC}], timeout_ms=30000), DeleteTopicsResponse),
        {"responses[0].error_code": TOPIC_AUTH},
        "Delete on the topic"),
]

# The delegation token APIs, which kafka-python has no classes for: raw flexible bodies.
NO_TOKEN_KEY = 61  # DELEGATION_TOKEN_AUTH_DISABLED: neither broker has delegation.token.secret.key
NULL, EMPTY_ARRAY, NO_TAGS_ = b"\x00", b"\x01", b"\x00"
HMAC = b"\x05" + b"abcd"  # compact bytes: length + 1, then 4 bytes
MINUS_ONE = (-1).to_bytes(8, "big", signed=True)


def first_error_code(r) -> dict:
    return {"error_code": r.i16()}


def raw(api: int, version: int, body: bytes):
    return lambda c, s: first_error_code(c.request(api, version, body, flexible=True))


ROWS[0:0] = [  # not destructive: before the rows that are
    Row("CreateDelegationToken", 38, 3,
        raw(38, 3, NULL + NULL + EMPTY_ARRAY + MINUS_ONE + NO_TAGS_),
        {"error_code": NO_TOKEN_KEY},
        "a token for oneself needs no ACL; tokens are off on this broker"),
    Row("RenewDelegationToken", 39, 2,
        raw(39, 2, HMAC + MINUS_ONE + NO_TAGS_),
        {"error_code": NO_TOKEN_KEY},
        "tokens are off on this broker"),
    Row("ExpireDelegationToken", 40, 2,
        raw(40, 2, HMAC + MINUS_ONE + NO_TAGS_),
        {"error_code": NO_TOKEN_KEY},
        "tokens are off on this broker"),
    Row("DescribeDelegationToken", 41, 3,
        raw(41, 3, NULL + NO_TAGS_),
        {"error_code": NO_TOKEN_KEY},
        "tokens are off on this broker"),
]


def error_after_throttle(r) -> dict:
    """The error code of an answer that starts with its throttle time."""
    r.i32()
    return {"error_code": r.i16()}


ZERO_UUID = bytes(16)
ROWS[0:0] = [  # client telemetry (KIP-714) and ListConfigResources: raw flexible bodies too
    Row("GetTelemetrySubscriptions", 71, 0,
        lambda c, s: error_after_throttle(c.request(71, 0, ZERO_UUID + NO_TAGS_, flexible=True)),
        {"error_code": 0},
        "no ACL: any authenticated client gets its subscription (and an instance id)"),
    Row("PushTelemetry", 72, 0,
        lambda c, s: error_after_throttle(c.request(
            72, 0, ZERO_UUID + (0).to_bytes(4, "big") + b"\x00" + b"\x00" + EMPTY_ARRAY + NO_TAGS_,
            flexible=True)),
        {"error_code": 42},
        "no ACL; the zero client instance id is INVALID_REQUEST"),
    Row("ListConfigResources", 74, 1,
        lambda c, s: error_after_throttle(c.request(74, 1, EMPTY_ARRAY + NO_TAGS_, flexible=True)),
        {"error_code": CLUSTER_AUTH},
        "DescribeConfigs on the cluster"),
]


# ------------------------------------------------------------------------------------------
# share groups (KIP-932): kafka-python has no classes for them, so each request is written and
# each answer read from its message schema below (Kafka 4.4's, at the version the row sends; all
# flexible). A schema is a list of (field, type): "i8" ... "i64", "bool", "str" (compact, nullable),
# "bytes", "uuid", "[t]" an array of t, a list an array of structs, ("struct", schema) and
# ("struct?", schema) a struct (nullable). Every struct ends with its tagged fields (none sent).

LEADER = [("leader_id", "i32"), ("leader_epoch", "i32")]
ENDPOINTS = [("node_id", "i32"), ("host", "str"), ("port", "i32"), ("rack", "str")]
ACK_BATCHES = [("first_offset", "i64"), ("last_offset", "i64"), ("acknowledge_types", "[i8]")]
STATE_BATCHES = [("first_offset", "i64"), ("last_offset", "i64"), ("delivery_state", "i8"),
                 ("delivery_count", "i16")]
STATE_RESULTS = [("results", [("topic_id", "uuid"), ("partitions", [
    ("partition", "i32"), ("error_code", "i16"), ("error_message", "str")])])]

SHARE_SCHEMAS: dict[tuple[int, int], tuple[list, list]] = {  # (api, version): (request, answer)
    (76, 1): ([("group_id", "str"), ("member_id", "str"), ("member_epoch", "i32"), ("rack_id", "str"),
               ("subscribed_topic_names", "[str]")],
              [("throttle_time_ms", "i32"), ("error_code", "i16"), ("error_message", "str"), ("member_id", "str"),
               ("member_epoch", "i32"), ("heartbeat_interval_ms", "i32"), ("assignment", ("struct?", [
                   ("topic_partitions", [("topic_id", "uuid"), ("partitions", "[i32]")])]))]),
    (77, 1): ([("group_ids", "[str]"), ("include_authorized_operations", "bool")],
              [("throttle_time_ms", "i32"), ("groups", [
                  ("error_code", "i16"), ("error_message", "str"), ("group_id", "str"), ("group_state", "str"),
                  ("group_epoch", "i32"), ("assignment_epoch", "i32"), ("assignor_name", "str"), ("members", [
                      ("member_id", "str"), ("rack_id", "str"), ("member_epoch", "i32"), ("client_id", "str"),
                      ("client_host", "str"), ("subscribed_topic_names", "[str]"), ("assignment", ("struct", [
                          ("topic_partitions", [("topic_id", "uuid"), ("topic_name", "str"),
                                                ("partitions", "[i32]")])]))]),
                  ("authorized_operations", "i32")])]),
    (78, 2): ([("group_id", "str"), ("member_id", "str"), ("share_session_epoch", "i32"), ("max_wait_ms", "i32"),
               ("min_bytes", "i32"), ("max_bytes", "i32"), ("max_records", "i32"), ("batch_size", "i32"),
               ("share_acquire_mode", "i8"), ("is_renew_ack", "bool"), ("topics", [
                   ("topic_id", "uuid"), ("partitions", [("partition_index", "i32"),
                                                         ("acknowledgement_batches", ACK_BATCHES)])]),
               ("forgotten_topics_data", [("topic_id", "uuid"), ("partitions", "[i32]")])],
              [("throttle_time_ms", "i32"), ("error_code", "i16"), ("error_message", "str"),
               ("acquisition_lock_timeout_ms", "i32"), ("responses", [("topic_id", "uuid"), ("partitions", [
                   ("partition_index", "i32"), ("error_code", "i16"), ("error_message", "str"),
                   ("acknowledge_error_code", "i16"), ("acknowledge_error_message", "str"),
                   ("current_leader", ("struct", LEADER)), ("records", "bytes"), ("acquired_records", [
                       ("first_offset", "i64"), ("last_offset", "i64"), ("delivery_count", "i16")])])]),
               ("node_endpoints", ENDPOINTS)]),
    (79, 2): ([("group_id", "str"), ("member_id", "str"), ("share_session_epoch", "i32"), ("is_renew_ack", "bool"),
               ("topics", [("topic_id", "uuid"), ("partitions", [("partition_index", "i32"),
                                                                 ("acknowledgement_batches", ACK_BATCHES)])])],
              [("throttle_time_ms", "i32"), ("error_code", "i16"), ("error_message", "str"),
               ("acquisition_lock_timeout_ms", "i32"), ("responses", [("topic_id", "uuid"), ("partitions", [
                   ("partition_index", "i32"), ("error_code", "i16"), ("error_message", "str"),
                   ("current_leader", ("struct", LEADER))])]),
               ("node_endpoints", ENDPOINTS)]),
    (83, 0): ([("group_id", "str"), ("topics", [("topic_id", "uuid"), ("partitions", [
                   ("partition", "i32"), ("state_epoch", "i32"), ("start_offset", "i64")])])],
              STATE_RESULTS),
    (84, 0): ([("group_id", "str"), ("topics", [("topic_id", "uuid"), ("partitions", [
                   ("partition", "i32"), ("leader_epoch", "i32")])])],
              [("results", [("topic_id", "uuid"), ("partitions", [
                  ("partition", "i32"), ("error_code", "i16"), ("error_message", "str"), ("state_epoch", "i32"),
                  ("start_offset", "i64"), ("state_batches", STATE_BATCHES)])])]),
    (85, 1): ([("group_id", "str"), ("topics", [("topic_id", "uuid"), ("partitions", [
                   ("partition", "i32"), ("state_epoch", "i32"), ("leader_epoch", "i32"), ("start_offset", "i64"),
                   ("delivery_complete_count", "i32"), ("state_batches", STATE_BATCHES)])])],
              STATE_RESULTS),
    (86, 0): ([("group_id", "str"), ("topics", [("topic_id", "uuid"), ("partitions", [("partition", "i32")])])],
              STATE_RESULTS),
    (87, 1): ([("group_id", "str"), ("topics", [("topic_id", "uuid"), ("partitions", [
                   ("partition", "i32"), ("leader_epoch", "i32")])])],
              [("results", [("topic_id", "uuid"), ("partitions", [
                  ("partition", "i32"), ("error_code", "i16"), ("error_message", "str"), ("state_epoch", "i32"),
                  ("leader_epoch", "i32"), ("start_offset", "i64"), ("delivery_complete_count", "i32")])])]),
    (90, 1): ([("groups", [("group_id", "str"), ("topics", [("topic_name", "str"), ("partitions", "[i32]")])])],
              [("throttle_time_ms", "i32"), ("groups", [
                  ("group_id", "str"), ("topics", [("topic_name", "str"), ("topic_id", "uuid"), ("partitions", [
                      ("partition_index", "i32"), ("start_offset", "i64"), ("leader_epoch", "i32"), ("lag", "i64"),
                      ("error_code", "i16"), ("error_message", "str")])]),
                  ("error_code", "i16"), ("error_message", "str")])]),
    (91, 0): ([("group_id", "str"), ("topics", [("topic_name", "str"), ("partitions", [
                   ("partition_index", "i32"), ("start_offset", "i64")])])],
              [("throttle_time_ms", "i32"), ("error_code", "i16"), ("error_message", "str"), ("responses", [
                  ("topic_name", "str"), ("topic_id", "uuid"), ("partitions", [
                      ("partition_index", "i32"), ("error_code", "i16"), ("error_message", "str")])])]),
    (92, 0): ([("group_id", "str"), ("topics", [("topic_name", "str")])],
              [("throttle_time_ms", "i32"), ("error_code", "i16"), ("error_message", "str"), ("responses", [
                  ("topic_name", "str"), ("topic_id", "uuid"), ("error_code", "i16"), ("error_message", "str")])]),
}

# Streams groups (KIP-1071), Kafka 4.4's schemas.
KEY_VALUE = [("key", "str"), ("value", "str")]
TOPIC_INFO = [("name", "str"), ("partitions", "i32"), ("replication_factor", "i16"), ("topic_configs", KEY_VALUE)]
TASK_IDS = [("subtopology_id", "str"), ("partitions", "[i32]")]
TASK_OFFSET = [("subtopology_id", "str"), ("partition", "i32"), ("offset", "i64")]
ENDPOINT = [("host", "str"), ("port", "u16")]
DESCRIBED_TOPIC_PARTITIONS = [("topic", "str"), ("partitions", "[i32]")]
ASSIGNMENT = [("active_tasks", TASK_IDS), ("standby_tasks", TASK_IDS), ("warmup_tasks", TASK_IDS)]
NODE = [("name", "str"), ("node_type", "i8"), ("source_topics", "[str]"), ("sink_topic", "str"),
        ("stores", "[str]"), ("successors", "[str]")]
SHARE_SCHEMAS.update({
    (88, 1): ([("group_id", "str"), ("member_id", "str"), ("member_epoch", "i32"),
               ("endpoint_information_epoch", "i32"), ("instance_id", "str"), ("rack_id", "str"),
               ("rebalance_timeout_ms", "i32"), ("topology", ("struct?", [("epoch", "i32"), ("subtopologies", [
                   ("subtopology_id", "str"), ("source_topics", "[str]"), ("source_topic_regex", "[str]"),
                   ("state_changelog_topics", TOPIC_INFO), ("repartition_sink_topics", "[str]"),
                   ("repartition_source_topics", TOPIC_INFO), ("copartition_groups", [
                       ("source_topics", "[i16]"), ("source_topic_regex", "[i16]"),
                       ("repartition_source_topics", "[i16]")])])])),
               ("active_tasks", TASK_IDS), ("standby_tasks", TASK_IDS), ("warmup_tasks", TASK_IDS),
               ("process_id", "str"), ("user_endpoint", ("struct?", ENDPOINT)), ("client_tags", KEY_VALUE),
               ("task_offsets", TASK_OFFSET), ("task_end_offsets", TASK_OFFSET), ("shutdown_application", "bool")],
              [("throttle_time_ms", "i32"), ("error_code", "i16"), ("error_message", "str"), ("member_id", "str"),
               ("member_epoch", "i32"), ("heartbeat_interval_ms", "i32"), ("task_offset_interval_ms", "i32"),
               ("acceptable_recovery_lag", "i64"), ("status", [("status_code", "i8"), ("status_detail", "str")]),
               ("active_tasks", TASK_IDS), ("standby_tasks", TASK_IDS), ("warmup_tasks", TASK_IDS),
               ("topology_description_required", "bool"), ("endpoint_information_epoch", "i32"),
               ("partitions_by_user_endpoint", [("user_endpoint", ("struct", ENDPOINT)),
                                                ("active_partitions", DESCRIBED_TOPIC_PARTITIONS),
                                                ("standby_partitions", DESCRIBED_TOPIC_PARTITIONS)])]),
    (89, 1): ([("group_ids", "[str]"), ("include_authorized_operations", "bool"),
               ("include_topology_description", "bool")],
              [("throttle_time_ms", "i32"), ("groups", [
                  ("error_code", "i16"), ("error_message", "str"), ("group_id", "str"), ("group_state", "str"),
                  ("group_epoch", "i32"), ("assignment_epoch", "i32"), ("topology", ("struct?", [
                      ("epoch", "i32"), ("subtopologies", [
                          ("subtopology_id", "str"), ("source_topics", "[str]"), ("repartition_sink_topics", "[str]"),
                          ("state_changelog_topics", TOPIC_INFO), ("repartition_source_topics", TOPIC_INFO)])])),
                  ("members", [("member_id", "str"), ("member_epoch", "i32"), ("instance_id", "str"),
                               ("rack_id", "str"), ("client_id", "str"), ("client_host", "str"),
                               ("topology_epoch", "i32"), ("process_id", "str"),
                               ("user_endpoint", ("struct?", ENDPOINT)), ("client_tags", KEY_VALUE),
                               ("task_offsets", TASK_OFFSET), ("task_end_offsets", TASK_OFFSET),
                               ("assignment", ("struct", ASSIGNMENT)), ("target_assignment", ("struct", ASSIGNMENT)),
                               ("is_classic", "bool")]),
                  ("authorized_operations", "i32"), ("topology_description", ("struct?", [
                      ("subtopologies", [("subtopology_id", "str"), ("nodes", NODE)]),
                      ("global_stores", [("source", ("struct", NODE)), ("processor", ("struct", NODE))])])),
                  ("topology_description_status", "i8"), ("assignor_name", "str")])]),
    (93, 0): ([("group_id", "str"), ("member_id", "str"), ("topology_epoch", "i32"), ("topology_description", (
                   "struct", [("subtopologies", [("subtopology_id", "str"), ("nodes", NODE)]),
                              ("global_stores", [("source", ("struct", NODE)), ("processor", ("struct", NODE))])]))],
              [("throttle_time_ms", "i32"), ("error_code", "i16"), ("error_message", "str")]),
})

_PUT = {"i8": rk.i8, "i16": rk.i16, "i32": rk.i32, "i64": rk.i64, "bool": lambda v: rk.i8(int(v)),
        "u16": lambda v: v.to_bytes(2, "big"),
        "str": rk.compact_string, "uuid": lambda v: v.bytes,
        "bytes": lambda v: rk.uvarint(0) if v is None else rk.uvarint(len(v) + 1) + v}
_GET = {"i8": rk.Reader.i8, "i16": rk.Reader.i16, "i32": rk.Reader.i32, "i64": rk.Reader.i64,
        "u16": lambda r: int.from_bytes(r.raw(2), "big"),
        "bool": lambda r: bool(r.i8()), "str": rk.Reader.compact_string, "uuid": lambda r: uuid.UUID(bytes=r.raw(16)),
        "bytes": lambda r: (lambda n: None if n == 0 else r.raw(n - 1))(r.uvarint())}


def encode_struct(schema: list, values: dict) -> bytes:
    assert set(values) == {name for name, _ in schema}, f"fields {sorted(values)}, schema {schema}"
    return b"".join(_encode(t, values[name]) for name, t in schema) + rk.NO_TAGS


def _encode(t, v) -> bytes:
    if isinstance(t, list):
        return rk.compact_array(v, lambda x: encode_struct(t, x))
    if isinstance(t, tuple):
        kind, schema = t
        if kind == "struct?":
            return rk.i8(-1) if v is None else rk.i8(1) + encode_struct(schema, v)
        return encode_struct(schema, v)
    if t.startswith("["):
        return rk.compact_array(v, _PUT[t[1:-1]])
    return _PUT[t](v)


def decode_struct(r: rk.Reader, schema: list) -> dict:
    out = {name: _decode(r, t) for name, t in schema}
    r.tags()
    return out


def _decode(r: rk.Reader, t):
    if isinstance(t, list):
        return r.compact_array(lambda r: decode_struct(r, t))
    if isinstance(t, tuple):
        kind, schema = t
        if kind == "struct?" and r.i8() < 0:
            return None
        return decode_struct(r, schema)
    if t.startswith("["):
        return r.compact_array(_GET[t[1:-1]])
    return _GET[t](r)


def share_request(c: rk.Connection, api: int, version: int, **values) -> dict:
    """One share-group request (SHARE_SCHEMAS) on `c`; the whole answer, decoded."""
    request, answer = SHARE_SCHEMAS[(api, version)]
    r = c.request(api, version, encode_struct(request, values), flexible=True)
    out = decode_struct(r, answer)
    assert r.at == len(r.data), f"api {api} v{version}: {len(r.data) - r.at} bytes left over in {out}"
    return out


def share(api: int, version: int, values: Callable[[Setup], dict], extract: Callable = codes):
    """A row's call: one share-group request, `values` built from the Setup."""
    return lambda c, s: extract(share_request(c, api, version, **values(s)))


def kafka_uuid(u: uuid.UUID) -> str:
    """A UUID as org.apache.kafka.common.Uuid writes it: 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def share_member_id() -> str:
    """A member id as KafkaShareConsumer makes one (a Kafka Uuid); ShareFetch and ShareAcknowledge
    parse it."""
    return kafka_uuid(uuid.uuid4())


def heartbeat(group: str) -> Callable:
    """ShareGroupHeartbeat: a new member (epoch 0) joining `group`, subscribed to TOPIC."""
    return share(76, 1, lambda s: {"group_id": group, "member_id": share_member_id(), "member_epoch": 0,
                                   "rack_id": None, "subscribed_topic_names": [TOPIC]})


def streams_heartbeat(group: str) -> Callable:
    """StreamsGroupHeartbeat: a Kafka Streams instance joining `group` (epoch 0) with a one-node
    topology reading TOPIC, as the 4.4 client sends it."""
    topology = {"epoch": 0, "subtopologies": [{
        "subtopology_id": "0", "source_topics": [TOPIC], "source_topic_regex": [], "state_changelog_topics": [],
        "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []}]}
    return share(88, 1, lambda s: {
        "group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0, "endpoint_information_epoch": -1,
        "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 300000, "topology": topology,
        "active_tasks": [], "standby_tasks": [], "warmup_tasks": [], "process_id": str(uuid.uuid4()),
        "user_endpoint": None, "client_tags": [], "task_offsets": [], "task_end_offsets": [],
        "shutdown_application": False})


def streams_describe(group: str) -> Callable:
    return share(89, 1, lambda s: {"group_ids": [group], "include_authorized_operations": True,
                                   "include_topology_description": False})


def topology_update(group: str) -> Callable:
    return share(93, 0, lambda s: {"group_id": group, "member_id": str(uuid.uuid4()), "topology_epoch": 0,
                                   "topology_description": {"subtopologies": [], "global_stores": []}})


def share_describe(group: str) -> Callable:
    return share(77, 1, lambda s: {"group_ids": [group], "include_authorized_operations": True})


def share_fetch(group: str, member_id: str, epoch: int, topic_id: uuid.UUID | None) -> dict:
    return {"group_id": group, "member_id": member_id, "share_session_epoch": epoch, "max_wait_ms": 0,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500, "share_acquire_mode": 0,
            "is_renew_ack": False, "forgotten_topics_data": [],
            "topics": [] if topic_id is None else [
                {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]}


def fetch(group: str) -> Callable:
    """ShareFetch opening a share session (epoch 0) on TOPIC-0."""
    return share(78, 2, lambda s: share_fetch(group, share_member_id(), 0, s.topic_id))


def share_acknowledge(group: str, member_id: str, epoch: int, topic_id: uuid.UUID) -> dict:
    return {"group_id": group, "member_id": member_id, "share_session_epoch": epoch, "is_renew_ack": False,
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}]}]}


def acknowledge(group: str) -> Callable:
    """ShareAcknowledge (ACCEPT of TOPIC-0's offset 0) at epoch 1 of a share session: the session
    opened first on the same connection by a ShareFetch of no partition. Kafka looks at the group
    first, so where that refuses, the session need not exist (and is not opened)."""
    def call(c: rk.Connection, s: Setup):
        member = share_member_id()
        opened = share_request(c, 78, 2, **share_fetch(group, member, 0, None))
        if opened["error_code"] not in (0, GROUP_AUTH):
            return {"ShareFetch opening the session": codes(opened)}
        return codes(share_request(c, 79, 2, **share_acknowledge(group, member, 1, s.topic_id)))
    return call


def describe_offsets(group: str) -> Callable:
    return share(90, 1, lambda s: {"groups": [{"group_id": group, "topics": [
        {"topic_name": TOPIC, "partitions": [0]}]}]})


def alter_offsets(group: str) -> Callable:
    return share(91, 0, lambda s: {"group_id": group, "topics": [
        {"topic_name": TOPIC, "partitions": [{"partition_index": 0, "start_offset": 0}]}]})


def delete_offsets(group: str) -> Callable:
    return share(92, 0, lambda s: {"group_id": group, "topics": [{"topic_name": TOPIC}]})


def state_request(s: Setup, **partition) -> dict:
    """The body of a share-state request (83-87): SHARE_GROUP's state of TOPIC-0."""
    return {"group_id": SHARE_GROUP, "topics": [{"topic_id": s.topic_id, "partitions": [
        {"partition": 0, **partition}]}]}


def share_offsets(s: Setup) -> list:
    """As admin, DescribeShareGroupOffsets v1 of both share groups: per group its error and, per
    partition, (topic, partition, error, start offset)."""
    with s.connect("admin") as c:
        answer = share_request(c, 90, 1, groups=[{"group_id": g, "topics": None} for g in SHARE_GROUPS])
    return [(g["group_id"], g["error_code"], [(t["topic_name"], p["partition_index"], p["error_code"],
                                               p["start_offset"]) for t in g["topics"] for p in t["partitions"]])
            for g in answer["groups"]]


ROWS[0:0] = [  # share groups (KIP-932), the requests that change nothing
    Row("ShareGroupHeartbeat", 76, 1, heartbeat(SHARE_GROUP),
        {"error_code": GROUP_AUTH},
        "Read on the group (then Describe on each subscribed topic: MEMBER_ROWS)"),
    Row("ShareGroupDescribe", 77, 1, share_describe(SHARE_GROUP),
        {"groups[0].error_code": GROUP_AUTH},
        "Describe on the group"),
    Row("ShareFetch", 78, 2, fetch(SHARE_GROUP),
        {"error_code": GROUP_AUTH},
        "Read on the group (then Read on the topic: MEMBER_ROWS)"),
    Row("ShareAcknowledge", 79, 2, acknowledge(SHARE_GROUP),
        {"error_code": GROUP_AUTH},
        "Read on the group (then Read on the topic: MEMBER_ROWS)"),
    Row("ReadShareGroupState", 84, 0,
        share(84, 0, lambda s: state_request(s, leader_epoch=0)),
        {"results[0].partitions[0].error_code": CLUSTER_AUTH},
        "inter-broker (share-partition leader to share coordinator): ClusterAction on the cluster"),
    Row("ReadShareGroupStateSummary", 87, 1,
        share(87, 1, lambda s: state_request(s, leader_epoch=0)),
        {"results[0].partitions[0].error_code": CLUSTER_AUTH},
        "inter-broker (group coordinator to share coordinator): ClusterAction on the cluster"),
    Row("DescribeShareGroupOffsets", 90, 1, describe_offsets(SHARE_GROUP),
        {"groups[0].error_code": GROUP_AUTH},
        "Describe on the group (then Describe on the topic: MEMBER_ROWS)"),
    # Streams groups (KIP-1071): on in both (streams.version 1 on a new cluster).
    Row("StreamsGroupHeartbeat", 88, 1, streams_heartbeat(SHARE_GROUP),
        {"error_code": GROUP_AUTH},
        "Read on the group (then Describe on every topic of the topology: MEMBER_ROWS)"),
    Row("StreamsGroupDescribe", 89, 1, streams_describe(SHARE_GROUP),
        {"groups[0].error_code": GROUP_AUTH},
        "Describe on the group"),
    Row("StreamsGroupTopologyDescriptionUpdate", 93, 0, topology_update(SHARE_GROUP),
        {"error_code": GROUP_AUTH},
        "Read on the group (then: no topology description plugin, MEMBER_ROWS)"),
]

SHARE_WRITES = [  # share groups, the requests that would change something: with the other writes
    Row("InitializeShareGroupState", 83, 0,
        share(83, 0, lambda s: state_request(s, state_epoch=5, start_offset=0)),
        {"results[0].partitions[0].error_code": CLUSTER_AUTH},
        "inter-broker (group coordinator to share coordinator): ClusterAction on the cluster"),
    Row("WriteShareGroupState", 85, 1,
        share(85, 1, lambda s: state_request(s, state_epoch=5, leader_epoch=5, start_offset=0,
                                             delivery_complete_count=0, state_batches=[])),
        {"results[0].partitions[0].error_code": CLUSTER_AUTH},
        "inter-broker (share-partition leader to share coordinator): ClusterAction on the cluster"),
    Row("DeleteShareGroupState", 86, 0,
        share(86, 0, lambda s: state_request(s)),
        {"results[0].partitions[0].error_code": CLUSTER_AUTH},
        "inter-broker (group coordinator to share coordinator): ClusterAction on the cluster"),
    Row("AlterShareGroupOffsets", 91, 0, alter_offsets(SHARE_GROUP),
        {"error_code": GROUP_AUTH},
        "Read on the group, not Alter (then Read on the topic: MEMBER_ROWS)"),
    Row("DeleteShareGroupOffsets", 92, 0, delete_offsets(SHARE_GROUP),
        {"error_code": GROUP_AUTH},
        "Delete on the group (then Read on the topic: MEMBER_ROWS)"),
]
_at = next(i for i, r in enumerate(ROWS) if r.id == "OffsetDelete")
ROWS[_at:_at] = SHARE_WRITES

# The share-group APIs past their group check, as member: Read on SHARE_GROUP; Delete and Alter
# on OTHER_SHARE_GROUP (both imply Describe, neither is Read); nothing on any topic. Which
# operation each API asks for on the group (a refusal on the group member holds the others on),
# then its topic check.
MEMBER_ROWS: list[Row] = [
    Row("ShareGroupHeartbeat-topic", 76, 1, heartbeat(SHARE_GROUP),
        {"error_code": TOPIC_AUTH},
        "Read on the group passes; Describe on the subscribed topic is missing"),
    Row("ShareGroupHeartbeat-not-read", 76, 1, heartbeat(OTHER_SHARE_GROUP),
        {"error_code": GROUP_AUTH},
        "Delete, Alter and Describe on the group are not Read"),
    Row("StreamsGroupHeartbeat-topic", 88, 1, streams_heartbeat(SHARE_GROUP),
        {"error_code": TOPIC_AUTH},
        "Read on the group passes; Describe on the topology's source topic is missing"),
    Row("StreamsGroupHeartbeat-not-read", 88, 1, streams_heartbeat(OTHER_SHARE_GROUP),
        {"error_code": GROUP_AUTH},
        "Delete, Alter and Describe on the group are not Read"),
    Row("StreamsGroupDescribe-not-streams", 89, 1, streams_describe(OTHER_SHARE_GROUP),
        {"groups[0].error_code": 69},
        "Describe on the group passes; a share group is not a streams group (GROUP_ID_NOT_FOUND)"),
    Row("StreamsGroupTopologyDescriptionUpdate-no-plugin", 93, 0, topology_update(SHARE_GROUP),
        {"error_code": 35},
        "Read on the group passes; no topology description plugin (UNSUPPORTED_VERSION)"),
    Row("ShareGroupDescribe-describe", 77, 1, share_describe(OTHER_SHARE_GROUP),
        {"groups[0].error_code": 0},
        "Describe on the group (implied by Delete or Alter) is enough"),
    Row("ShareFetch-topic", 78, 2, fetch(SHARE_GROUP),
        {"error_code": 0, "responses[0].partitions[0].error_code": TOPIC_AUTH,
         "responses[0].partitions[0].acknowledge_error_code": 0},
        "Read on the group passes; Read on the topic is missing"),
    Row("ShareFetch-not-read", 78, 2, fetch(OTHER_SHARE_GROUP),
        {"error_code": GROUP_AUTH},
        "Delete, Alter and Describe on the group are not Read"),
    Row("ShareAcknowledge-topic", 79, 2, acknowledge(SHARE_GROUP),
        {"error_code": 0, "responses[0].partitions[0].error_code": TOPIC_AUTH},
        "Read on the group passes; Read on the topic is missing"),
    Row("ShareAcknowledge-not-read", 79, 2, acknowledge(OTHER_SHARE_GROUP),
        {"error_code": GROUP_AUTH},
        "Delete, Alter and Describe on the group are not Read"),
    Row("DescribeShareGroupOffsets-topic", 90, 1, describe_offsets(OTHER_SHARE_GROUP),
        {"groups[0].error_code": 0, "groups[0].topics[0].partitions[0].error_code": TOPIC_AUTH},
        "Describe on the group (implied by Delete or Alter) passes; Describe on the topic is missing"),
    Row("AlterShareGroupOffsets-topic", 91, 0, alter_offsets(SHARE_GROUP),
        {"error_code": 0, "responses[0].partitions[0].error_code": TOPIC_AUTH},
        "Read on the group passes; Read on the topic is missing (so nothing is altered)"),
    Row("AlterShareGroupOffsets-not-read", 91, 0, alter_offsets(OTHER_SHARE_GROUP),
        {"error_code": GROUP_AUTH},
        "Alter (and Delete) on the group are not Read"),
    Row("DeleteShareGroupOffsets-topic", 92, 0, delete_offsets(OTHER_SHARE_GROUP),
        {"error_code": 0, "responses[0].error_code": TOPIC_AUTH},
        "Delete on the group passes; Read on the topic is missing (so nothing is deleted)"),
    Row("DeleteShareGroupOffsets-not-delete", 92, 0, delete_offsets(SHARE_GROUP),
        {"error_code": GROUP_AUTH},
        "Read on the group is not Delete"),
]

MATRIX_APIS = {r.api for r in ROWS}


# ------------------------------------------------------------------------------------------
# tests


def test_served_apis_are_all_in_the_matrix(authz):
    """ApiVersions on the broker under test (asked as mallory on the SASL listener): every API it
    serves is a matrix row, a pre-authentication API or, on Kafka, one of KAFKA_ONLY; each row's
    version is within the advertised range."""
    with authz.connect("mallory") as c:
        served = c.api_versions()
    expected = MATRIX_APIS | set(PRE_AUTH) | (set(KAFKA_ONLY) if TARGET == "kafka" else set(SKEIN_ONLY))
    missing = {k: served[k] for k in sorted(set(served) - expected)}
    assert not missing, f"{TARGET} serves APIs the matrix does not name (add a row or a reason): {missing}"
    absent = sorted(expected - set(served))
    assert not absent, f"{TARGET} does not serve APIs the matrix names: {absent}"
    for r in ROWS + MEMBER_ROWS:
        lo, hi = served[r.api]
        assert lo <= r.version <= hi, f"{r.id}: v{r.version} outside {TARGET}'s {lo}..{hi}"
    for k in sorted(set(NOT_SERVED) & set(served)):
        pytest.fail(f"{TARGET} serves {NOT_SERVED[k][0]} ({k}) on its client listener")


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_mallory_without_acls(authz, row):
    """One request as mallory (authenticated, no ACL): the answer Kafka 4.4.0 gives."""
    with authz.connect("mallory") as c:
        try:
            got = row.call(c, authz)
        except ConnectionError:
            got = CLOSED
    print(f"{row.id} (api {row.api} v{row.version}; {row.doc}): {TARGET} answered {got!r}")
    assert row.kafka is not None, f"{row.id}: no Kafka answer recorded; {TARGET} answered {got!r}"
    assert got == row.kafka, (f"{row.id} (api {row.api} v{row.version}, {row.doc}): Kafka 4.4.0 answers "
                              f"{row.kafka!r}, {TARGET} answered {got!r}")


@pytest.mark.parametrize("row", MEMBER_ROWS, ids=[r.id for r in MEMBER_ROWS])
def test_share_group_acls_of_member(authz, row):
    """One share-group request as member (Read on SHARE_GROUP, Delete and Alter on
    OTHER_SHARE_GROUP, no topic ACL): the answer Kafka 4.4.0 gives."""
    with authz.connect("member") as c:
        try:
            got = row.call(c, authz)
        except ConnectionError:
            got = CLOSED
    print(f"{row.id} (api {row.api} v{row.version}; {row.doc}): {TARGET} answered {got!r}")
    assert got == row.kafka, (f"{row.id} (api {row.api} v{row.version}, {row.doc}): Kafka 4.4.0 answers "
                              f"{row.kafka!r}, {TARGET} answered {got!r}")


@pytest.mark.parametrize("key", sorted(NOT_SERVED), ids=[f"{v[0]}-{k}" for k, v in sorted(NOT_SERVED.items())])
def test_api_neither_serves_to_clients(authz, key):
    """A controller-only or removed inter-broker API sent by mallory to the client listener (v
    as named, empty body): Kafka 4.4.0 closes the connection without answering."""
    name, version = NOT_SERVED[key]
    with authz.connect("mallory") as c:
        try:
            r = c.request(key, version, b"", flexible=True)
            got = f"an answer of {len(r.data)} bytes: {r.data[:32].hex()}"
        except ConnectionError:
            got = CLOSED
    print(f"{name} ({key}) v{version}: {TARGET}: {got}")
    assert got == CLOSED, f"{name} ({key}) v{version}: Kafka 4.4.0 closes the connection, {TARGET}: {got}"


def test_nothing_changed_after_the_matrix(authz):
    """As admin after every row: nothing mallory asked for happened (`snapshot`)."""
    after = snapshot(authz)
    print(f"before and after the matrix: {after}")
    assert after == authz.before
