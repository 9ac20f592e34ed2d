"""Delegation tokens (KIP-48): Kafka's own `kafka-delegation-tokens` (DelegationTokenCommand)
creates, describes, renews and expires tokens over a SASL_PLAINTEXT listener, authenticated as a
SCRAM user made with `kafka-configs`; Java clients (TopicCommand's admin client, ConsoleProducer,
ConsoleConsumer) then authenticate with a token: SCRAM with the extension `tokenauth=true`, the
token id as the user name and its HMAC (base64) as the password, the token's owner as the
principal.

The broker has a PLAINTEXT listener (admin, bootstrap) and a SASL_PLAINTEXT one (SCRAM-SHA-256
and SCRAM-SHA-512) and Kafka's token settings: `delegation.token.secret.key` (tokens on),
`delegation.token.max.lifetime.ms` (1 day), `delegation.token.expiry.time.ms` (1 hour),
`delegation.token.expiry.check.interval.ms` (1 s). Checked, as Apache Kafka 4.1 answers:

- a token's owner, requester, renewers, issue / expiry / max dates as the tool prints them (the
  max date `--max-life-time-period` after issue, at most `delegation.token.max.lifetime.ms`,
  which -1 asks for; the expiry `delegation.token.expiry.time.ms` after issue, at most the max
  date), its HMAC (HMAC-SHA512 of the token id keyed with the secret), the same row from
  `--describe --owner-principal` for the owner and for a renewer (a bare `--describe` sends an
  empty owner list: no token); `--renew` by the owner or a renewer sets the expiry to now + the
  period asked, at most `delegation.token.expiry.time.ms` (Kafka's controller, KRaft) and never
  past the max date, by anyone else DELEGATION_TOKEN_OWNER_MISMATCH; records produced and
  consumed with the token;
- refusals: every token request over PLAINTEXT or from a token-authenticated connection
  (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED); a wrong HMAC, an unknown token id, a SCRAM user's own
  password with `tokenauth=true` and a token used as a plain SCRAM user all fail authentication;
- expiry: a token whose max lifetime passed stops authenticating and leaves `--describe`;
  `--expire --expiry-time-period -1` does that at once; renewing either is
  DELEGATION_TOKEN_NOT_FOUND;
- tokens (and a renewal, and an expiry) survive a broker restart;
- without `delegation.token.secret.key` the token APIs answer DELEGATION_TOKEN_AUTH_DISABLED.

The tool prints dates to the minute in the JVM's time zone: it runs with `-Duser.timezone=UTC`.
Runs against Apache Kafka too (E2E_TARGET=kafka): the expected outputs are Kafka's, observed."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from brokers import KafkaBroker, free_port, make_broker
from util import kafka_tool, wait_until

pytestmark = [pytest.mark.sasl, pytest.mark.cli]

TARGET = os.environ.get("E2E_TARGET", "skein")
TOKENS = "org.apache.kafka.tools.DelegationTokenCommand"
TOPIC_CMD = "org.apache.kafka.tools.TopicCommand"
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
FEATURES = "org.apache.kafka.tools.FeatureCommand"

SECRET = "e2e-delegation-token-secret"
MAX_LIFETIME_MS = 86_400_000  # delegation.token.max.lifetime.ms: 1 day
EXPIRY_TIME_MS = 3_600_000  # delegation.token.expiry.time.ms: 1 hour
TOKEN_SETTINGS = {
    "delegation.token.secret.key": SECRET,
    "delegation.token.max.lifetime.ms": str(MAX_LIFETIME_MS),
    "delegation.token.expiry.time.ms": str(EXPIRY_TIME_MS),
    "delegation.token.expiry.check.interval.ms": "1000",
}
# SCRAM users (name: mechanism, password): alice owns the tokens, bob is named their renewer,
# carol is neither.
USERS = {"alice": ("SCRAM-SHA-256", "alice-secret"), "bob": ("SCRAM-SHA-512", "bob-secret"),
         "carol": ("SCRAM-SHA-256", "carol-secret")}

# What the admin client makes of each error code (Errors.java's default messages).
NOT_ALLOWED = ("UnsupportedByAuthenticationException: Delegation Token requests are not allowed on "
               "PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.")
AUTH_DISABLED = "DelegationTokenDisabledException: Delegation Token feature is not enabled."
NOT_FOUND = "DelegationTokenNotFoundException: Delegation Token is not found on server."
OWNER_MISMATCH = "DelegationTokenOwnerMismatchException: Specified Principal is not valid Owner/Renewer."
AUTH_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism"


# ------------------------------------------------------------------------------------------
# the broker


def configure(b, token_settings: dict[str, str]) -> None:
    """Listeners of the broker under test (not started yet): PLAINTEXT (bootstrap, admin) and
    SASL_PLAINTEXT (SCRAM-SHA-256, SCRAM-SHA-512) on `b.sasl_port`; plus `token_settings`."""
    b.sasl_port = free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}"
    protocols = "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
    controller = ""
    if isinstance(b, KafkaBroker):
        controller, protocols = f",CONTROLLER://127.0.0.1:{b.controller_port}", protocols + ",CONTROLLER:PLAINTEXT"
    b.overrides.update({
        "listeners": listeners + controller,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": protocols,
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        # Kafka wants a server login module for each SCRAM mechanism of the listener.
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        **token_settings,
    })


def make_users(b) -> None:
    """The SCRAM users of USERS made with kafka-configs over PLAINTEXT; each can log in over
    SASL_PLAINTEXT when this returns."""
    for user, (mechanism, password) in USERS.items():
        kafka_tool(CONFIGS, "--bootstrap-server", b.bootstrap, "--alter", "--entity-type", "users",
                   "--entity-name", user, "--add-config", f"{mechanism}=[iterations=4096,password={password}]")
    for user, (mechanism, password) in USERS.items():
        conf = {"bootstrap.servers": sasl(b), "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                "log_level": 3}
        wait_until(lambda: AdminClient(conf).list_topics(timeout=5).brokers, 30, f"SCRAM user {user} to log in")


@pytest.fixture(scope="module")
def token_broker(tmp_path_factory):
    """The broker under test with TOKEN_SETTINGS, its listeners and SCRAM users."""
    b = make_broker(TARGET, tmp_path_factory.mktemp(f"{TARGET}-tokens"))
    if TARGET == "skein":
        b.feature_level = 1  # the gate is part of the test (at_token_level)
    configure(b, TOKEN_SETTINGS)
    b.start()
    try:
        make_users(b)
        if TARGET == "skein":
            at_token_level(b, tmp_path_factory.mktemp("token-level"))
        yield b
    finally:
        b.stop()


def at_token_level(b, dir: Path) -> None:
    """Skein keeps tokens in its metadata log from `skein.version` 4 on (as Kafka from
    metadata.version 3.6-IV2); this broker's cluster starts at level 1 (`--feature-level 1`; the
    default is the newest). Below it a token is refused with
    UNSUPPORTED_VERSION; `kafka-features upgrade` raises the level, and then tokens are served."""
    r = tokens(sasl(b), user_props(dir, "alice"), "--create", "--max-life-time-period", "-1", check=False)
    refused(r, "UnsupportedVersionException")  # the response has no message: the broker logs why
    kafka_tool(FEATURES, "--bootstrap-server", b.bootstrap, "upgrade", "--feature", "skein.version=4")


# ------------------------------------------------------------------------------------------
# client settings and the tools


JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"


def user_props(dir: Path, user: str) -> Path:
    """A client config file authenticating as SCRAM user `user` over SASL_PLAINTEXT."""
    mechanism, password = USERS[user]
    p = dir / f"{user}-{os.urandom(3).hex()}.properties"
    p.write_text("security.protocol=SASL_PLAINTEXT\n"
                 f"sasl.mechanism={mechanism}\n"
                 f'sasl.jaas.config={JAAS} username="{user}" password="{password}";\n')
    return p


def token_props(dir: Path, token_id: str, token_hmac: str, mechanism: str = "SCRAM-SHA-512",
                tokenauth: bool = True) -> Path:
    """A client config file authenticating with a delegation token (SCRAM, tokenauth=true)."""
    p = dir / f"token-{mechanism}-{os.urandom(3).hex()}.properties"
    extension = ' tokenauth="true"' if tokenauth else ""
    p.write_text("security.protocol=SASL_PLAINTEXT\n"
                 f"sasl.mechanism={mechanism}\n"
                 f'sasl.jaas.config={JAAS} username="{token_id}" password="{token_hmac}"{extension};\n')
    return p


def plaintext_props(dir: Path) -> Path:
    p = dir / "plaintext.properties"
    p.write_text("security.protocol=PLAINTEXT\n")
    return p


@dataclass
class Token:
    id: str
    hmac: str
    owner: str
    requester: str
    renewers: str
    issued: datetime
    expires: datetime
    max: datetime


DATE = r"\d{4}-\d\d-\d\dT\d\d:\d\d"
ROW = re.compile(rf"^(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\[.*?\])\s+({DATE})\s+({DATE})\s+({DATE})\s*$")


def date(s: str) -> datetime:
    return datetime.strptime(s, "%Y-%m-%dT%H:%M").replace(tzinfo=timezone.utc)


def token_rows(out: str) -> list[Token]:
    """The rows the tool prints under its TOKENID HMAC OWNER ... header."""
    assert re.search(r"^TOKENID\s+HMAC\s+OWNER\s+REQUESTER\s+RENEWERS\s+ISSUEDATE\s+EXPIRYDATE\s+MAXDATE\s*$",
                     out, re.M), out
    rows = []
    for line in out.split("MAXDATE", 1)[1].splitlines():
        if line.strip():
            m = ROW.match(line)
            assert m, f"unexpected token row {line!r} in:\n{out}"
            g = m.groups()
            rows.append(Token(*g[:5], date(g[5]), date(g[6]), date(g[7])))
    return rows


def tokens(bootstrap: str, props: Path, *args: str, check: bool = True):
    """kafka-delegation-tokens with `props` as its --command-config; dates printed in UTC."""
    return kafka_tool(TOKENS, "--bootstrap-server", bootstrap, "--command-config", str(props), *args,
                      check=check, jvm_args=["-Duser.timezone=UTC"])


def refused(r, message: str) -> str:
    """The tool failed with `message` (the admin client's exception, printed on stderr)."""
    out = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
    assert r.returncode != 0 and message in out, \
        f"expected exit != 0 with {message!r}, got {r.returncode}:\n{out[-3000:]}"
    return out


def sasl(b) -> str:
    return f"127.0.0.1:{b.sasl_port}"


def create_token(b, props: Path, *args: str) -> Token:
    r = tokens(sasl(b), props, "--create", *args)
    out = r.stdout.decode()
    m = re.search(r"^Created delegation token with tokenId : (\S+)$", out, re.M)
    assert m, out
    rows = token_rows(out)
    assert [t.id for t in rows] == [m.group(1)], out
    return rows[0]


def describe(b, props: Path, owner: str = "User:alice") -> dict[str, Token]:
    """--describe --owner-principal `owner`: the tokens `owner` owns or renews that the caller
    may see, by id. (Without --owner-principal the tool sends an empty owner list, which matches
    no token: see test_create_describe_renew_and_use_a_token.)"""
    out = tokens(sasl(b), props, "--describe", "--owner-principal", owner).stdout.decode()
    m = re.search(r"Total number of tokens : (\d+)", out)
    assert m, out
    rows = token_rows(out)
    assert len(rows) == int(m.group(1)), out
    return {t.id: t for t in rows}


def renew(b, props: Path, token: Token, period_ms: int, check: bool = True):
    r = tokens(sasl(b), props, "--renew", "--hmac", token.hmac, "--renew-time-period", str(period_ms), check=check)
    if not check:
        return r
    out = r.stdout.decode()
    m = re.search(rf"Completed renew operation\. New expiry date : ({DATE})", out)
    assert m, out
    return date(m.group(1))


def round_trip(b, props: Path, topic: str, prefix: str, n: int) -> None:
    """With `props`' login: TopicCommand creates `topic`, ConsoleProducer writes n records
    (acks=all), ConsoleConsumer reads them back, in order."""
    kafka_tool(TOPIC_CMD, "--bootstrap-server", sasl(b), "--command-config", str(props), "--create",
               "--topic", topic, "--partitions", "1", "--replication-factor", "1")
    lines = "".join(f"{prefix}-{i}\n" for i in range(n)).encode()
    kafka_tool(PRODUCER, "--bootstrap-server", sasl(b), "--topic", topic, "--command-config", str(props),
               "--request-required-acks", "all", input=lines)
    r = kafka_tool(CONSUMER, "--bootstrap-server", sasl(b), "--topic", topic, "--command-config", str(props),
                   "--partition", "0", "--offset", "earliest", "--max-messages", str(n), "--timeout-ms", "30000")
    assert r.stdout.decode().split() == [f"{prefix}-{i}" for i in range(n)], r.stdout.decode()


def login(b, props: Path) -> str | None:
    """TopicCommand --list (Kafka's admin client) over SASL_PLAINTEXT with `props`: None when it
    lists the topics, the broker's message when authentication failed (SaslAuthenticationException);
    any other failure raises."""
    r = kafka_tool(TOPIC_CMD, "--bootstrap-server", sasl(b), "--command-config", str(props), "--list",
                   check=False, timeout=60)
    if r.returncode == 0:
        return None
    out = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
    m = re.search(r"SaslAuthenticationException: (.*)", out)
    assert m, f"TopicCommand --list failed, but not on authentication ({r.returncode}):\n{out[-3000:]}"
    return m.group(1).strip()


def authenticates(b, props: Path) -> bool:
    return login(b, props) is None


def minutes(d: timedelta) -> float:
    return d.total_seconds() / 60


# ------------------------------------------------------------------------------------------
# tests


def test_create_describe_renew_and_use_a_token(token_broker, tmp_path, topic):
    b = token_broker
    alice = user_props(tmp_path, "alice")
    before = datetime.now(timezone.utc)
    t = create_token(b, alice, "--max-life-time-period", str(12 * 3_600_000), "--renewer-principal", "User:bob")
    after = datetime.now(timezone.utc)
    assert (t.owner, t.requester, t.renewers) == ("User:alice", "User:alice", "[User:bob]"), t
    # Dates to the minute: issued now, expiring delegation.token.expiry.time.ms later, at most
    # --max-life-time-period after issue.
    assert before - timedelta(minutes=1) <= t.issued <= after, (t, before, after)
    assert abs(minutes(t.expires - t.issued) - EXPIRY_TIME_MS / 60_000) <= 1, t
    assert abs(minutes(t.max - t.issued) - 12 * 60) <= 1, t
    # The HMAC is Kafka's: HMAC-SHA512 of the token id keyed with delegation.token.secret.key.
    want = base64.b64encode(hmac.new(SECRET.encode(), t.id.encode(), hashlib.sha512).digest()).decode()
    assert t.hmac == want, (t.hmac, want)

    # --max-life-time-period -1, or more than delegation.token.max.lifetime.ms: that config.
    # Less than delegation.token.expiry.time.ms: the expiry is the max date.
    d = create_token(b, alice, "--max-life-time-period", "-1")
    assert d.renewers == "[]" and abs(minutes(d.max - d.issued) - MAX_LIFETIME_MS / 60_000) <= 1, d
    e = create_token(b, alice, "--max-life-time-period", str(2 * MAX_LIFETIME_MS))
    assert abs(minutes(e.max - e.issued) - MAX_LIFETIME_MS / 60_000) <= 1, e
    short = create_token(b, alice, "--max-life-time-period", str(30 * 60_000))
    assert short.expires == short.max and abs(minutes(short.max - short.issued) - 30) <= 1, short

    # --describe: the owner and the renewer see the same row. --owner-principal names owners or
    # renewers: User:bob matches the token bob renews, not the others.
    mine = describe(b, alice)
    assert [mine.get(x.id) for x in (t, d, e, short)] == [t, d, e, short], mine
    assert describe(b, user_props(tmp_path, "bob"))[t.id] == t
    assert set(describe(b, alice, "User:bob")) == {t.id}
    assert describe(b, alice, "User:nobody") == {}
    # Without --owner-principal the tool sends an empty owner list (not a null one), and Kafka
    # answers with the tokens of those owners: none. (Its help text promises the caller's.)
    out = tokens(sasl(b), alice, "--describe").stdout.decode()
    assert "Total number of tokens : 0" in out and token_rows(out) == [], out

    # --renew sets the expiry to now + the period asked, at most delegation.token.expiry.time.ms
    # (-1: that config), never past the max date. By the owner, 10 minutes: 50 minutes earlier.
    new_expiry = renew(b, alice, t, 10 * 60_000)
    assert abs(minutes(new_expiry - t.expires) + 50) <= 2, (t, new_expiry)
    renewed = describe(b, alice)[t.id]
    assert renewed.expires == new_expiry and (renewed.issued, renewed.max) == (t.issued, t.max), renewed
    # By the renewer, asking for 10 days: an hour from now.
    new_expiry = renew(b, user_props(tmp_path, "bob"), t, 10 * 86_400_000)
    assert abs(minutes(new_expiry - datetime.now(timezone.utc)) - EXPIRY_TIME_MS / 60_000) <= 2, new_expiry
    assert describe(b, alice)[t.id].expires == new_expiry
    # A token whose max date is nearer: the max date.
    assert renew(b, alice, short, -1) == short.max
    # By anyone else: refused, nothing changed.
    refused(renew(b, user_props(tmp_path, "carol"), t, 60_000, check=False), OWNER_MISMATCH)
    assert describe(b, alice)[t.id].expires == new_expiry

    # The token authenticates Kafka's Java clients (both SCRAM mechanisms).
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        assert authenticates(b, token_props(tmp_path, t.id, t.hmac, mechanism)), mechanism
    round_trip(b, token_props(tmp_path, t.id, t.hmac), topic, "token-record", 50)


def test_token_requests_refused_over_plaintext_and_with_a_token(token_broker, tmp_path):
    b = token_broker
    alice = user_props(tmp_path, "alice")
    t = create_token(b, alice, "--max-life-time-period", "-1", "--renewer-principal", "User:alice")

    # Over the PLAINTEXT listener (unauthenticated): every token request.
    plain = plaintext_props(tmp_path)
    for args in (["--create", "--max-life-time-period", "-1"], ["--describe"],
                 ["--renew", "--hmac", t.hmac, "--renew-time-period", "-1"],
                 ["--expire", "--hmac", t.hmac, "--expiry-time-period", "-1"]):
        refused(tokens(b.bootstrap, plain, *args, check=False), NOT_ALLOWED)

    # Authenticated with a token (even one whose owner is its renewer): every token request.
    with_token = token_props(tmp_path, t.id, t.hmac)
    assert authenticates(b, with_token)
    for args in (["--create", "--max-life-time-period", "-1"], ["--describe"],
                 ["--renew", "--hmac", t.hmac, "--renew-time-period", "-1"],
                 ["--expire", "--hmac", t.hmac, "--expiry-time-period", "-1"]):
        refused(tokens(sasl(b), with_token, *args, check=False), NOT_ALLOWED)
    # Nothing of that changed the token.
    assert describe(b, alice)[t.id] == t

    # Authentication failures: a wrong HMAC, an unknown token id, alice's own password as a
    # token, the token as a plain SCRAM user. The first two with the same message: a client
    # does not learn whether a token id exists.
    wrong = base64.b64encode(hmac.new(b"another secret", t.id.encode(), hashlib.sha512).digest()).decode()
    assert login(b, token_props(tmp_path, t.id, wrong)) == f"{AUTH_FAILED} SCRAM-SHA-512"
    assert login(b, token_props(tmp_path, t.id, wrong, "SCRAM-SHA-256")) == f"{AUTH_FAILED} SCRAM-SHA-256"
    assert login(b, token_props(tmp_path, "no-such-token-id", t.hmac)) == f"{AUTH_FAILED} SCRAM-SHA-512"
    assert not authenticates(b, token_props(tmp_path, "alice", USERS["alice"][1]))
    assert not authenticates(b, token_props(tmp_path, t.id, t.hmac, tokenauth=False))
    # ... and the token itself still works.
    assert authenticates(b, with_token)


def test_a_token_stops_working_when_it_expires(token_broker, tmp_path):
    """A token with a 20 s max lifetime authenticates, then is refused and (expired tokens are
    removed every delegation.token.expiry.check.interval.ms = 1 s) gone from --describe; renewing
    it is DELEGATION_TOKEN_NOT_FOUND."""
    b = token_broker
    alice = user_props(tmp_path, "alice")
    start = time.monotonic()
    t = create_token(b, alice, "--max-life-time-period", "20000")
    assert t.expires == t.max and minutes(t.max - t.issued) <= 1, t
    props = token_props(tmp_path, t.id, t.hmac)
    assert authenticates(b, props), "the token was refused at once"
    print(f"token authenticated {time.monotonic() - start:.1f} s after its creation started")
    wait_until(lambda: not authenticates(b, props), 60, "the expired token to be refused", interval=1)
    print(f"token refused {time.monotonic() - start:.1f} s after its creation started")
    assert time.monotonic() - start >= 20, "refused before its max lifetime (20 s) passed"
    # Kafka refuses a token once its controller swept it; Skein from the moment it expires, and
    # sweeps it within the check interval (1 s here) after that.
    wait_until(lambda: t.id not in describe(b, alice), 30, "the expired token swept from --describe",
               interval=1)
    refused(renew(b, alice, t, -1, check=False), NOT_FOUND)


def test_expire_now_invalidates_a_token_at_once(token_broker, tmp_path):
    b = token_broker
    alice = user_props(tmp_path, "alice")
    keep = create_token(b, alice, "--max-life-time-period", "-1")
    t = create_token(b, alice, "--max-life-time-period", "-1", "--renewer-principal", "User:bob")
    props = token_props(tmp_path, t.id, t.hmac)
    assert authenticates(b, props)
    # --expiry-time-period -1 by the renewer.
    r = tokens(sasl(b), user_props(tmp_path, "bob"), "--expire", "--hmac", t.hmac, "--expiry-time-period", "-1")
    assert re.search(rf"Completed expire operation\. New expiry date : {DATE}", r.stdout.decode()), r.stdout.decode()
    listed = describe(b, alice)
    assert t.id not in listed and listed[keep.id] == keep, listed
    assert not authenticates(b, props)
    refused(renew(b, alice, t, -1, check=False), NOT_FOUND)
    refused(tokens(sasl(b), alice, "--expire", "--hmac", t.hmac, "--expiry-time-period", "-1", check=False),
            NOT_FOUND)
    # The other token is untouched.
    assert authenticates(b, token_props(tmp_path, keep.id, keep.hmac))


@pytest.mark.durability
def test_tokens_survive_a_broker_restart(token_broker, tmp_path, topic):
    """A token, its renewal and another token's expiry, across a SIGTERM + restart: --describe
    shows the same row, the token authenticates, produces and consumes, the expired one stays gone."""
    b = token_broker
    alice = user_props(tmp_path, "alice")
    t = create_token(b, alice, "--max-life-time-period", str(12 * 3_600_000), "--renewer-principal", "User:bob")
    renewed = renew(b, alice, t, 10 * 60_000)
    gone = create_token(b, alice, "--max-life-time-period", "-1")
    tokens(sasl(b), alice, "--expire", "--hmac", gone.hmac, "--expiry-time-period", "-1")
    before = describe(b, alice)
    assert before[t.id].expires == renewed and gone.id not in before, before

    b.stop()
    b.start()

    after = wait_until(lambda: describe(b, alice), 60, "--describe to answer after the restart")
    assert after == before, f"tokens before the restart:\n{before}\nafter:\n{after}"
    props = token_props(tmp_path, t.id, t.hmac)
    assert authenticates(b, props)
    assert not authenticates(b, token_props(tmp_path, gone.id, gone.hmac))
    round_trip(b, props, topic, "after-restart", 10)
    # Still renewable by its renewer after the restart (-1: delegation.token.expiry.time.ms).
    new_expiry = renew(b, user_props(tmp_path, "bob"), t, -1)
    assert abs(minutes(new_expiry - datetime.now(timezone.utc)) - EXPIRY_TIME_MS / 60_000) <= 2, new_expiry
    assert describe(b, alice)[t.id].expires == new_expiry


def test_without_a_secret_key_tokens_are_disabled(new_broker, tmp_path):
    """No delegation.token.secret.key: over SASL every token request is
    DELEGATION_TOKEN_AUTH_DISABLED (over PLAINTEXT the channel is refused first)."""
    b = new_broker(before_start=lambda b: configure(b, {}))
    make_users(b)
    alice = user_props(tmp_path, "alice")
    fake_hmac = base64.b64encode(bytes(64)).decode()
    for args in (["--create", "--max-life-time-period", "-1"], ["--describe"],
                 ["--renew", "--hmac", fake_hmac, "--renew-time-period", "-1"],
                 ["--expire", "--hmac", fake_hmac, "--expiry-time-period", "-1"]):
        refused(tokens(sasl(b), alice, *args, check=False), AUTH_DISABLED)
    refused(tokens(b.bootstrap, plaintext_props(tmp_path), "--create", "--max-life-time-period", "-1",
                   check=False), NOT_ALLOWED)
