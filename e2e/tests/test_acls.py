"""ACLs: Kafka's authorizer model on skein-broker, driven by Kafka's own `kafka-acls` (AclCommand) and
confluent-kafka's admin API. Each check is denied first, then allowed once the ACL exists:
produce (Write), consume with a group (Read on the topic and the group), Metadata (only describable
topics), topic admin (Create, Delete, Alter, DescribeConfigs, AlterConfigs), offsets, cluster
operations; prefixed and deny ACLs; `super.users`; `allow.everyone.if.no.acl.found`; ACLs kept across
a broker restart and a restart of a whole local cluster; SECURITY_DISABLED without an authorizer."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, ConfigResource, NewPartitions, NewTopic, ResourcePatternType,
                                   ResourceType)

from brokers import LocalCluster, SkeinBroker, free_port
from util import kafka_tool, produce_numbered, wait_until

pytestmark = pytest.mark.acls

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class AclBroker(SkeinBroker):
    """skein-broker with the authorizer on: PLAINTEXT (clients there are User:ANONYMOUS) and
    SASL_PLAINTEXT with PLAIN users admin (a super user), alice and bob."""

    def __init__(self, workdir: Path, extra: dict[str, str] | None = None):
        self.sasl_port = free_port()
        super().__init__(workdir, {})
        listeners = f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
        users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
        self.overrides.update({
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};",
            "authorizer.class.name": AUTHORIZER,
            "super.users": "User:admin",
            **(extra or {}),
        })

    def conf(self, user: str) -> dict:
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}

    def command_config(self, user: str, d: Path) -> Path:
        p = d / f"{user}.properties"
        p.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                     f'username="{user}" password="{USERS[user]}";\n')
        return p


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    if __import__("os").environ.get("E2E_TARGET", "skein") != "skein":
        pytest.skip("the ACL tests configure skein-broker's listeners and authorizer")
    b = AclBroker(tmp_path_factory.mktemp("acl-broker"))
    b.start()
    yield b
    forget_admins(b)
    b.stop()


_ADMINS: dict[tuple[int, str], AdminClient] = {}


def admin(b: AclBroker, user: str = "admin") -> AdminClient:
    """One admin client per broker and user, kept: futures fail with _DESTROY when their client is
    garbage-collected before they complete. (librdkafka calls the cluster resource BROKER.)"""
    key = (b.sasl_port, user)
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient(b.conf(user))
    return _ADMINS[key]


def forget_admins(b: AclBroker) -> None:
    """Drops the broker's admin clients (before it stops: they would retry it forever)."""
    for key in [k for k in _ADMINS if k[0] == b.sasl_port]:
        del _ADMINS[key]


def allow(b: AclBroker, *bindings: AclBinding) -> None:
    for f in admin(b).create_acls(list(bindings), request_timeout=30).values():
        f.result(30)


def acl(rtype, name, principal, op, perm=AclPermissionType.ALLOW, pattern=ResourcePatternType.LITERAL,
        host="*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def create_topic(b: AclBroker, topic: str, partitions: int = 1) -> None:
    for f in admin(b).create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30).values():
        f.result(30)


def produce_errors(conf: dict, topic: str, n: int = 5) -> list[str]:
    return produce_numbered(conf, topic, n, timeout=10)


def acls_cmd(b: AclBroker, tmp: Path, *args: str, user: str = "admin"):
    return kafka_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", f"127.0.0.1:{b.sasl_port}",
                      "--command-config", str(b.command_config(user, tmp)), *args)


def poll_values(conf: dict, topic: str, group: str, n: int, timeout: float = 30) -> tuple[list[bytes], set[str]]:
    """Consumes as a member of `group`: the values read and the error names seen."""
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got, errors = [], set()
    deadline = time.time() + timeout
    try:
        while len(got) < n and time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                errors.add(m.error().name())
                if "AUTHORIZATION" in m.error().name():
                    break
                continue
            got.append(m.value())
        if len(got) == n:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got, errors


# ----------------------------------------------------------------------------------------------


def test_kafka_acls_adds_lists_and_removes(broker, tmp_path):
    acls_cmd(broker, tmp_path, "--add", "--allow-principal", "User:carol", "--operation", "Read",
             "--operation", "Describe", "--topic", "cli-orders")
    acls_cmd(broker, tmp_path, "--add", "--allow-principal", "User:carol", "--operation", "Read",
             "--group", "cli-", "--resource-pattern-type", "prefixed")
    out = acls_cmd(broker, tmp_path, "--list", "--topic", "cli-orders").stdout.decode()
    assert "User:carol" in out and "operation=READ" in out and "operation=DESCRIBE" in out, out
    out = acls_cmd(broker, tmp_path, "--list", "--principal", "User:carol").stdout.decode()
    assert "name=cli-, patternType=PREFIXED" in out and "name=cli-orders, patternType=LITERAL" in out, out
    acls_cmd(broker, tmp_path, "--remove", "--force", "--allow-principal", "User:carol", "--operation", "Read",
             "--topic", "cli-orders")
    out = acls_cmd(broker, tmp_path, "--list", "--topic", "cli-orders").stdout.decode()
    assert "operation=READ" not in out and "operation=DESCRIBE" in out, out
    acls_cmd(broker, tmp_path, "--remove", "--force", "--allow-principal", "User:carol", "--operation", "Read",
             "--group", "cli-", "--resource-pattern-type", "prefixed")
    acls_cmd(broker, tmp_path, "--remove", "--force", "--topic", "cli-orders")
    out = acls_cmd(broker, tmp_path, "--list", "--principal", "User:carol").stdout.decode()
    assert "principal=User:carol" not in out, out


def test_only_cluster_alter_may_create_acls(broker, tmp_path):
    r = kafka_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", f"127.0.0.1:{broker.sasl_port}",
                   "--command-config", str(broker.command_config("bob", tmp_path)), "--add",
                   "--allow-principal", "User:bob", "--operation", "All", "--topic", "*", check=False)
    text = (r.stdout + r.stderr).decode()
    assert "ClusterAuthorizationException" in text or "Cluster authorization failed" in text, text
    binding = acl(ResourceType.TOPIC, "*", "User:bob", AclOperation.ALL)
    with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):
        for f in admin(broker, "bob").create_acls([binding], request_timeout=30).values():
            f.result(30)
    # Listing needs Describe on the cluster: kafka-acls is refused; librdkafka turns the refusal
    # into an empty result, so nothing is revealed either way.
    allow(broker, acl(ResourceType.TOPIC, "listed", "User:dave", AclOperation.READ))
    r = kafka_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", f"127.0.0.1:{broker.sasl_port}",
                   "--command-config", str(broker.command_config("bob", tmp_path)), "--list", check=False)
    assert r.returncode != 0 and "ClusterAuthorizationException" in r.stderr.decode() + r.stdout.decode()
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    assert admin(broker, "bob").describe_acls(everything, request_timeout=30).result(30) == []
    assert "User:dave" in {x.principal for x in admin(broker).describe_acls(everything,
                                                                                request_timeout=30).result(30)}


def test_produce_needs_write_on_the_topic(broker):
    create_topic(broker, "acl-produce")
    create_topic(broker, "acl-produce-other")
    # No Write anywhere: InitProducerId is refused (KIP-679), nothing is written.
    errors = produce_errors(broker.conf("alice"), "acl-produce")
    assert errors and all("AUTHORIZATION_FAILED" in e for e in errors), errors
    # Write on another topic: a producer id, but this topic still refuses.
    allow(broker, acl(ResourceType.TOPIC, "acl-produce-other", "User:alice", AclOperation.WRITE))
    errors = produce_errors(broker.conf("alice"), "acl-produce")
    assert errors and all("TOPIC_AUTHORIZATION_FAILED" in e for e in errors), errors
    assert produce_errors(broker.conf("alice"), "acl-produce-other") == []
    allow(broker, acl(ResourceType.TOPIC, "acl-produce", "User:alice", AclOperation.WRITE))
    assert produce_errors(broker.conf("alice"), "acl-produce") == []
    # The anonymous PLAINTEXT client has no ACL and no default allowance.
    errors = produce_errors({"bootstrap.servers": broker.bootstrap}, "acl-produce")
    assert errors and all("AUTHORIZATION_FAILED" in e for e in errors), errors


def test_transactions_need_write_on_the_transactional_id(broker):
    from confluent_kafka import Producer
    create_topic(broker, "acl-txn")
    allow(broker, acl(ResourceType.TOPIC, "acl-txn", "User:bob", AclOperation.WRITE))

    def txn_producer(tid: str) -> Producer:
        p = Producer({**broker.conf("bob"), "transactional.id": tid})
        p.init_transactions(20)
        return p

    # Write on the topic is not enough: InitProducerId is refused for the transactional id.
    with pytest.raises(KafkaException) as e:
        txn_producer("bob-app")
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in str(e.value) or "authorization" in str(e.value).lower(), e.value
    allow(broker, acl(ResourceType.TRANSACTIONAL_ID, "bob-", "User:bob", AclOperation.WRITE,
                      pattern=ResourcePatternType.PREFIXED))
    p = txn_producer("bob-app")
    p.begin_transaction()
    p.produce("acl-txn", value=b"in a transaction")
    p.commit_transaction(20)
    # Another id outside the prefix is still refused.
    with pytest.raises(KafkaException):
        txn_producer("other-app")


def test_consume_needs_read_on_the_topic_and_the_group(broker):
    create_topic(broker, "acl-consume")
    assert produce_errors(broker.conf("admin"), "acl-consume", 10) == []
    got, errors = poll_values(broker.conf("bob"), "acl-consume", "bob-group", 10, timeout=15)
    assert not got and errors & {"GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED"}, errors
    allow(broker, acl(ResourceType.GROUP, "bob-group", "User:bob", AclOperation.READ))
    got, errors = poll_values(broker.conf("bob"), "acl-consume", "bob-group", 10, timeout=15)
    assert not got and "TOPIC_AUTHORIZATION_FAILED" in errors, errors
    allow(broker, acl(ResourceType.TOPIC, "acl-consume", "User:bob", AclOperation.READ))
    got, errors = poll_values(broker.conf("bob"), "acl-consume", "bob-group", 10)
    assert sorted(got) == sorted(f"value-{i}".encode() for i in range(10)), errors
    # The committed offsets: Describe on the group (Read implies it) and the topic.
    c = Consumer({**broker.conf("bob"), "group.id": "bob-group"})
    try:
        committed = c.committed([TopicPartition("acl-consume", 0)], timeout=30)
    finally:
        c.close()
    assert committed[0].offset == 10 and committed[0].error is None


def test_metadata_lists_only_describable_topics(broker):
    create_topic(broker, "acl-visible")
    create_topic(broker, "acl-hidden")
    allow(broker, acl(ResourceType.TOPIC, "acl-visible", "User:bob", AclOperation.DESCRIBE))
    topics = set(admin(broker, "bob").list_topics(timeout=30).topics)
    assert "acl-visible" in topics and "acl-hidden" not in topics, topics
    assert "acl-hidden" in set(admin(broker).list_topics(timeout=30).topics), "a super user sees everything"
    # Asked for by name, the hidden topic is refused rather than reported missing.
    md = admin(broker, "bob").list_topics(topic="acl-hidden", timeout=30)
    err = md.topics["acl-hidden"].error
    assert err is not None and err.name() == "TOPIC_AUTHORIZATION_FAILED", err


def test_prefixed_allow_and_deny(broker):
    for t in ("pay-in", "pay-roll"):
        create_topic(broker, t)
    allow(broker,
          acl(ResourceType.TOPIC, "pay-", "User:alice", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
          acl(ResourceType.TOPIC, "pay-roll", "User:alice", AclOperation.WRITE, perm=AclPermissionType.DENY))
    assert produce_errors(broker.conf("alice"), "pay-in") == []
    errors = produce_errors(broker.conf("alice"), "pay-roll")
    assert errors and all("TOPIC_AUTHORIZATION_FAILED" in e for e in errors), "a deny wins over a prefixed allow"


def test_topic_admin_operations(broker, tmp_path):
    a = admin(broker, "alice")

    def refused(futures):
        for f in futures.values():
            with pytest.raises(KafkaException) as e:
                f.result(30)
            return e.value.args[0].name()

    assert refused(a.create_topics([NewTopic("alice-made", 1, 1)], operation_timeout=30)) == \
        "TOPIC_AUTHORIZATION_FAILED"
    allow(broker, acl(ResourceType.TOPIC, "alice-", "User:alice", AclOperation.ALL,
                      pattern=ResourcePatternType.PREFIXED))
    for f in a.create_topics([NewTopic("alice-made", 1, 1)], operation_timeout=30).values():
        f.result(30)
    # Configs, partitions, deletion: her own prefix yes, another topic no.
    create_topic(broker, "admin-owned")
    own, other = ConfigResource("topic", "alice-made"), ConfigResource("topic", "admin-owned")
    for f in a.describe_configs([own]).values():
        assert f.result(30)["cleanup.policy"].value == "delete"
    assert refused(a.describe_configs([other])) == "TOPIC_AUTHORIZATION_FAILED"
    own.set_config("retention.ms", "60000")
    for f in a.alter_configs([own]).values():
        f.result(30)
    assert refused(a.create_partitions([NewPartitions("admin-owned", 2)])) == "TOPIC_AUTHORIZATION_FAILED"
    for f in a.create_partitions([NewPartitions("alice-made", 3)]).values():
        f.result(30)
    assert refused(a.delete_topics(["admin-owned"], operation_timeout=30)) == "TOPIC_AUTHORIZATION_FAILED"
    for f in a.delete_topics(["alice-made"], operation_timeout=30).values():
        f.result(30)
    # Cluster operations need cluster ACLs: Describe for SCRAM users, and the cluster's
    # authorized operations are empty without Describe.
    # (kafka-configs: confluent-kafka 2.16 aborts the process on this refusal.)
    r = kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", f"127.0.0.1:{broker.sasl_port}",
                   "--command-config", str(broker.command_config("alice", tmp_path)), "--describe",
                   "--entity-type", "users", "--entity-name", "alice", check=False)
    assert "ClusterAuthorizationException" in (r.stdout + r.stderr).decode(), (r.stdout + r.stderr).decode()
    desc = a.describe_cluster(include_authorized_operations=True).result(30)
    assert not desc.authorized_operations, desc.authorized_operations
    allow(broker, acl(ResourceType.BROKER, "kafka-cluster", "User:alice", AclOperation.DESCRIBE))
    desc = wait_until(lambda: a.describe_cluster(include_authorized_operations=True).result(30)
                      .authorized_operations, 10, "cluster operations with Describe")
    assert [o.name for o in desc] == ["DESCRIBE"], desc


def test_describe_groups_and_authorized_operations(broker, tmp_path):
    allow(broker, acl(ResourceType.GROUP, "ops-group", "User:bob", AclOperation.DESCRIBE))
    out = kafka_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server",
                     f"127.0.0.1:{broker.sasl_port}", "--command-config",
                     str(broker.command_config("bob", tmp_path)), "--list").stdout.decode()
    # bob may describe ops-group and bob-group (Read); admin's groups are not listed to him.
    assert "admin-only-group" not in out
    r = kafka_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server",
                   f"127.0.0.1:{broker.sasl_port}", "--command-config",
                   str(broker.command_config("alice", tmp_path)), "--describe", "--group", "ops-group",
                   check=False)
    assert "GroupAuthorizationException" in (r.stdout + r.stderr).decode(), (r.stdout + r.stderr).decode()


def test_acls_survive_a_broker_restart(tmp_path):
    if __import__("os").environ.get("E2E_TARGET", "skein") != "skein":
        pytest.skip("configures skein-broker")
    b = AclBroker(tmp_path / "b")
    b.start()
    try:
        create_topic(b, "kept")
        allow(b, acl(ResourceType.TOPIC, "kept", "User:alice", AclOperation.WRITE))
        assert produce_errors(b.conf("alice"), "kept") == []
        b.stop()
        b.start()
        listed = admin(b).describe_acls(AclBindingFilter(
            ResourceType.TOPIC, "kept", ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
            AclPermissionType.ANY), request_timeout=30).result(30)
        assert [(x.principal, x.operation) for x in listed] == [("User:alice", AclOperation.WRITE)]
        assert produce_errors(b.conf("alice"), "kept") == []
        errors = produce_errors(b.conf("bob"), "kept")
        assert errors and all("AUTHORIZATION_FAILED" in e for e in errors), errors
    finally:
        forget_admins(b)
        b.stop()


def test_allow_everyone_if_no_acl_found(tmp_path):
    if __import__("os").environ.get("E2E_TARGET", "skein") != "skein":
        pytest.skip("configures skein-broker")
    b = AclBroker(tmp_path / "b", {"allow.everyone.if.no.acl.found": "true"})
    b.start()
    try:
        create_topic(b, "open")
        create_topic(b, "guarded")
        anonymous = {"bootstrap.servers": b.bootstrap}
        assert produce_errors(anonymous, "open") == [], "no ACL names the topic: allowed"
        allow(b, acl(ResourceType.TOPIC, "guarded", "User:alice", AclOperation.WRITE))
        errors = produce_errors(anonymous, "guarded")
        assert errors and all("TOPIC_AUTHORIZATION_FAILED" in e for e in errors), \
            "an ACL for someone else on the topic: no default allowance"
        assert produce_errors(b.conf("alice"), "guarded") == []
    finally:
        forget_admins(b)
        b.stop()


def test_acl_apis_without_an_authorizer_say_security_disabled(tmp_path):
    if __import__("os").environ.get("E2E_TARGET", "skein") != "skein":
        pytest.skip("configures skein-broker")
    b = SkeinBroker(tmp_path / "b")
    b.start()
    try:
        r = kafka_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", b.bootstrap, "--list", check=False)
        text = (r.stdout + r.stderr).decode()
        assert "SecurityDisabledException" in text or "No Authorizer is configured" in text, text
    finally:
        b.stop()


@pytest.mark.replication
@pytest.mark.timeout(300)
def test_acls_live_in_the_controller_and_survive_a_cluster_restart(tmp_path):
    if __import__("os").environ.get("E2E_TARGET", "skein") != "skein":
        pytest.skip("runs skein-operator local")
    # Clients and replicas are all User:ANONYMOUS here: replicas need ClusterAction, everything
    # without an ACL is allowed, and one deny guards a topic.
    cluster = LocalCluster(tmp_path, brokers=3, overrides={
        "authorizer.class.name": AUTHORIZER, "allow.everyone.if.no.acl.found": "true"})
    cluster.start()
    try:
        a = AdminClient({"bootstrap.servers": cluster.bootstrap})
        bindings = [acl(ResourceType.BROKER, "kafka-cluster", "User:ANONYMOUS", AclOperation.ALL),
                    acl(ResourceType.TOPIC, "guarded", "User:*", AclOperation.WRITE, perm=AclPermissionType.DENY)]
        for f in a.create_acls(bindings, request_timeout=30).values():
            f.result(30)
        for f in a.create_topics([NewTopic("guarded", 1, 3), NewTopic("open", 1, 3)],
                                 operation_timeout=30).values():
            f.result(30)
        conf = {"bootstrap.servers": cluster.bootstrap}
        assert produce_errors(conf, "open", 20) == []
        assert produce_errors(conf, "guarded")
        cluster.stop()
        cluster.start()
        # Every broker has them from the controller's image.
        for i in range(1, 4):
            b = AdminClient({"bootstrap.servers": cluster.addr(i)})
            listed = wait_until(lambda: b.describe_acls(AclBindingFilter(
                ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                AclPermissionType.ANY), request_timeout=30).result(30), 30, "ACLs listed")
            assert sorted((x.name, x.permission_type.name) for x in listed) == \
                [("guarded", "DENY"), ("kafka-cluster", "ALLOW")]
        assert produce_errors(conf, "open", 20) == [], "replication still works (ClusterAction)"
        errors = produce_errors(conf, "guarded")
        assert errors and all("TOPIC_AUTHORIZATION_FAILED" in e for e in errors), errors
    finally:
        cluster.stop()
