"""SASL OAUTHBEARER with signed JWTs (KIP-255 framing, KIP-768 validation) on skein-broker: tokens are
checked against a JWKS file (`sasl.oauthbearer.jwks.endpoint.url=file://…`), the expected audience and
issuer; `sub` is the principal. Clients: confluent-kafka (oauth_cb), kafkajs (oauthBearerProvider) and
Kafka's Java console tools (the KIP-768 login handler reading the token from a file). Bad tokens —
expired, signed by a key the JWKS does not hold, for another audience, unsigned — get
SASL_AUTHENTICATION_FAILED with the broker's reason while everyone else is served; the JWKS file is
re-read when keys rotate; the principal meets the ACLs. Tokens are signed with the openssl CLI."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import SkeinBroker, free_port
from pki import make_jwt_key, sign_jwt
from util import consume_group, js, kafka_tool, produce_numbered as produce, wait_until

pytestmark = pytest.mark.sasl

AUDIENCE = "skein-cluster"
ISSUER = "https://idp.example"


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> Path:
    if shutil.which("openssl") is None:
        pytest.fail("openssl not installed: run e2e/setup.sh", pytrace=False)
    d = tmp_path_factory.mktemp("jwt")
    jwks = {"keys": [make_jwt_key(d, "k1")]}
    (d / "k2.jwk").write_text(json.dumps(make_jwt_key(d, "k2")))
    (d / "jwks.json").write_text(json.dumps(jwks))
    return d


class OAuthBroker(SkeinBroker):
    """skein-broker with PLAINTEXT and SASL_PLAINTEXT (OAUTHBEARER and PLAIN for an admin)."""

    def __init__(self, workdir: Path, keys: Path):
        self.sasl_port = free_port()
        super().__init__(workdir, {})
        listeners = f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
        self.overrides.update({
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";',
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            "sasl.oauthbearer.jwks.endpoint.url": f"file://{keys / 'jwks.json'}",
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": ISSUER,
        })


@pytest.fixture(scope="module")
def broker(keys, tmp_path_factory):
    if __import__("os").environ.get("E2E_TARGET", "skein") != "skein":
        pytest.skip("configures skein-broker's listeners")
    b = OAuthBroker(tmp_path_factory.mktemp("oauth-broker"), keys)
    b.start()
    yield b
    b.stop()


def claims(sub: str = "alice", lifetime: int = 600, **over) -> dict:
    now = int(time.time())
    c = {"sub": sub, "iat": now, "exp": now + lifetime, "aud": AUDIENCE, "iss": ISSUER}
    c.update(over)
    return c


def conf(b: OAuthBroker, token: str) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{b.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: (token, time.time() + 600)}


def auth_errors(c: dict, topic: str, wait: float = 10) -> list[str]:
    errors: list[str] = []
    p = Producer({**c, "error_cb": lambda e: errors.append(e.str())})
    deadline = time.time() + wait
    try:
        p.produce(topic, b"never", on_delivery=lambda e, m: errors.append(e.str()) if e else None)
        while not errors and time.time() < deadline:
            p.poll(0.2)
        p.purge()
    except KafkaException as e:
        # A fatal error (an idempotent producer refused its producer id) is raised, not reported.
        errors.append(e.args[0].str())
    return errors


def test_confluent_kafka_with_a_signed_token(broker, keys, topic):
    c = conf(broker, sign_jwt(keys, "k1", claims()))
    admin = AdminClient(c)
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)
    assert produce(c, topic, 200) == []
    assert len(consume_group(c, topic, 200, f"g-{topic}")) == 200


@pytest.mark.parametrize("why,token", [
    ("expired", lambda k: sign_jwt(k, "k1", claims(lifetime=-300))),
    ("another audience", lambda k: sign_jwt(k, "k1", claims(aud="someone-else"))),
    ("another issuer", lambda k: sign_jwt(k, "k1", claims(iss="https://evil.example"))),
    ("a key the JWKS does not hold", lambda k: sign_jwt(k, "k2", claims())),
    ("a forged signature", lambda k: sign_jwt(k, "k2", claims(), header_kid="k1")),
    ("no signature (alg none)", lambda k: ".".join(
        __import__("base64").urlsafe_b64encode(json.dumps(x).encode()).rstrip(b"=").decode()
        for x in ({"alg": "none", "typ": "JWT"}, claims())) + "."),
])
def test_bad_tokens_are_refused_and_others_served(broker, keys, topic, why, token):
    admin = AdminClient(conf(broker, sign_jwt(keys, "k1", claims())))
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)
    errors = auth_errors(conf(broker, token(keys)), topic)
    assert any("Authentication failed" in e or "invalid_token" in e for e in errors), (why, errors)
    assert produce(conf(broker, sign_jwt(keys, "k1", claims())), topic, 10) == []


def test_kafkajs_with_a_signed_token(broker, keys, topic, tmp_path):
    token_file = tmp_path / "token.jwt"
    token_file.write_text(sign_jwt(keys, "k1", claims("js-user")))
    auth = {"sasl_mechanism": "oauthbearer", "sasl_token_file": token_file}
    bootstrap = f"127.0.0.1:{broker.sasl_port}"
    js("create-topic", bootstrap, topic=topic, partitions=1, **auth)
    data = tmp_path / "in.tsv"
    data.write_text("".join(f"{f'k{i}'.encode().hex()}\t{f'js-{i}'.encode().hex()}\t-\t-\n" for i in range(30)))
    js("produce", bootstrap, topic=topic, input=data, out=tmp_path / "acked.jsonl", **auth)
    js("consume-group", bootstrap, topic=topic, group=f"g-{topic}", out=tmp_path / "got.jsonl", expected=30, **auth)
    assert len((tmp_path / "got.jsonl").read_text().splitlines()) == 30


def test_java_tools_with_kip768_file_token(broker, keys, topic, tmp_path):
    token_file = tmp_path / "token.jwt"
    token_file.write_text(sign_jwt(keys, "k1", claims("java-user")))
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
        "sasl.login.callback.handler.class="
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n"
        f"sasl.oauthbearer.token.endpoint.url=file://{token_file}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n")
    bootstrap = f"127.0.0.1:{broker.sasl_port}"
    allowed = f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file://{token_file}"
    kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--command-config",
               str(props), "--create", "--topic", topic, "--partitions", "1", jvm_args=[allowed])
    r = kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--command-config",
                   str(props), "--describe", "--topic", topic, jvm_args=[allowed])
    assert "PartitionCount: 1" in r.stdout.decode(), r.stdout.decode()


def test_rotated_keys_are_picked_up_and_acls_see_the_subject(keys, tmp_path, topic):
    """A broker of its own (its JWKS file is rewritten): k2 replaces k1 without a restart; with the
    authorizer on, the token's sub is the principal ACLs name."""
    if __import__("os").environ.get("E2E_TARGET", "skein") != "skein":
        pytest.skip("configures skein-broker's listeners")
    own = tmp_path / "keys"
    shutil.copytree(keys, own)
    b = OAuthBroker(tmp_path / "broker", own)
    b.overrides.update({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                        "super.users": "User:admin"})
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{b.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"})
        for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            f.result(30)
        # Without an ACL: Produce is refused (TOPIC_AUTHORIZATION_FAILED).
        errors = auth_errors({**conf(b, sign_jwt(own, "k1", claims("carol"))), "enable.idempotence": False,
                              "message.timeout.ms": 8000}, topic)
        assert any("authorization failed" in e.lower() for e in errors), errors
        from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ResourcePatternType,
                                           ResourceType)
        acl = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:carol", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
        for f in admin.create_acls([acl]).values():
            f.result(30)
        assert produce(conf(b, sign_jwt(own, "k1", claims("carol"))), topic, 10) == []
        # Rotation: the JWKS now holds k2 only.
        (own / "jwks.json").write_text(json.dumps({"keys": [json.loads((own / "k2.jwk").read_text())]}))
        wait_until(lambda: produce(conf(b, sign_jwt(own, "k2", claims("carol"))), topic, 1, timeout=5) == [], 30,
                   "a k2 token to be accepted after the JWKS changed")
        assert auth_errors(conf(b, sign_jwt(own, "k1", claims("carol"))), topic), "k1 still accepted"
    finally:
        b.stop()
