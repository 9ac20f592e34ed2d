"""The ecosystem on top of the broker, on a 3-broker cluster: Kafka Connect in distributed mode
(Apache Kafka's own connect-runtime, JSON converters and file connectors, 4.3.1: e2e/connect-dist) and the storage and
leader-election pattern of Confluent's Schema Registry.

Connect: two workers share a group; their config / offset / status topics are created by the
workers themselves, compacted with 3 replicas. A FileStreamSource connector (file → topic) and a
FileStreamSink connector (topic → file) copy lines; the worker running the source task is
SIGKILLed, then (a third worker having joined) the one running the sink task, and each time the
survivor takes the tasks over and goes on copying from the committed offsets.

Schema Registry (not on Maven Central, so its pattern with the Java client, `SchemaStore` in
e2e/java): one compacted single-partition topic with 3 replicas holds the state; every instance
rebuilds it by reading the topic from the beginning; the one member of a consumer group holding
the partition is the only writer, and another member takes over when it is killed or closed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

import util
from brokers import connect_classpath, free_port
from conftest import _active

pytestmark = [pytest.mark.replication, pytest.mark.group_coordinator]

# Group timings for both tests: a dead member is noticed after 6 s (the brokers' minimum).
SESSION_TIMEOUT_MS = 6000


# ------------------------------------------------------------------------------------------
# cluster helpers


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict[str, str] | None = None):
    a = admin(bootstrap)  # kept until the future is done: a destroyed client fails its futures
    fs = a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3,
                                   config=config or {})], operation_timeout=30)
    fs[topic].result(60)


def topic_layout(bootstrap: str, topics: list[str]) -> dict[str, dict]:
    """For each topic: its partition count, the replica count of every partition, and its
    cleanup.policy with where that value comes from (a topic's own config or a default)."""
    a = admin(bootstrap)
    md = a.list_topics(timeout=10).topics
    res = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    configs = {r.name: f.result(30) for r, f in a.describe_configs(res).items()}
    out = {}
    for t in topics:
        entry = configs[t]["cleanup.policy"]
        out[t] = {"partitions": len(md[t].partitions),
                  "replicas": sorted({len(p.replicas) for p in md[t].partitions.values()}),
                  "cleanup.policy": entry.value, "source": ConfigSource(entry.source).name}
    return out


def read_topic(bootstrap: str, topic: str) -> list[tuple[int, str | None, str | None, dict]]:
    """(offset, key, value, headers) of every record of partition 0, from the start to the end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{time.time_ns()}",
                  "enable.auto.commit": False, "log_level": 3})
    try:
        end = util.high_watermark(c, topic, 0)
        c.assign([TopicPartition(topic, 0, 0)])
        out: list = []
        deadline = time.monotonic() + 60
        while end > 0 and c.position([TopicPartition(topic, 0)])[0].offset < end:
            assert time.monotonic() < deadline, f"timed out reading {topic} to offset {end}"
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out.append((m.offset(), None if m.key() is None else m.key().decode(),
                        None if m.value() is None else m.value().decode(),
                        {k: v.decode() for k, v in (m.headers() or [])}))
        return out
    finally:
        c.close()


# ------------------------------------------------------------------------------------------
# Kafka Connect workers


class ConnectWorker:
    """One Kafka Connect worker (`ConnectDistributed`) in its own JVM, REST on a free port. Its
    output goes to `log_path`, whose tail is attached to a failed test's report."""

    def __init__(self, name: str, tmp: Path, bootstrap: str, storage: dict[str, str]):
        self.name = f"connect-{name}"
        self.port = free_port()
        self.props_path = tmp / f"{self.name}.properties"
        self.log_path = tmp / f"{self.name}.log"
        props = {
            "bootstrap.servers": bootstrap,
            "group.id": storage["group"],
            "config.storage.topic": storage["config"],
            "offset.storage.topic": storage["offset"],
            "status.storage.topic": storage["status"],
            "config.storage.replication.factor": "3",
            "offset.storage.replication.factor": "3",
            "status.storage.replication.factor": "3",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
            # Source offsets and sink consumer offsets committed every second.
            "offset.flush.interval.ms": "1000",
            # The workers' group notices a dead worker after 6 s, and its tasks are given to
            # the others 2 s later (Connect waits 5 minutes by default, for it to come back).
            "session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "heartbeat.interval.ms": "1000",
            "scheduled.rebalance.max.delay.ms": "2000",
            # The sink task's consumer group likewise (its consumer's default is 45 s).
            "consumer.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "consumer.heartbeat.interval.ms": "1000",
            # connect-file is on the classpath (e2e/.cache/connect-*/libs): no plugin.path. Its
            # connectors have ServiceLoader manifests, so no reflective scan of every jar.
            "plugin.discovery": "service_load",
        }
        self.props_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.proc: subprocess.Popen | None = None

    @property
    def worker_id(self) -> str:
        """How the status API names this worker."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        cmd = ["java", "-Xms128m", "-Xmx768m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=info", "-Dorg.slf4j.simpleLogger.showDateTime=true",
               "-Dorg.slf4j.simpleLogger.log.org.reflections=warn",
               "-cp", connect_classpath(), "org.apache.kafka.connect.cli.ConnectDistributed", str(self.props_path)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if not self.running():
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def log_tail(self, n: int = 100) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return "(no log)"

    def rest(self, method: str, path: str, body: dict | None = None, timeout: float = 30) -> tuple[int, object]:
        """One REST call: (HTTP status, parsed JSON body or None)."""
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                raw = r.read()
                return r.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw.decode(errors="replace")

    def wait_ready(self, timeout: float = 90) -> None:
        """Until the REST API lists connectors: the worker has joined the group and read the
        config topic."""
        def ready():
            assert self.running(), f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail(60)}"
            return self.rest("GET", "/connectors", timeout=5)[0] == 200
        util.wait_until(ready, timeout, f"{self.name}'s REST API")

    def put_connector(self, name: str, config: dict[str, str]) -> None:
        """Creates the connector (PUT /connectors/NAME/config; a worker that is not the leader
        forwards it), retried while the group is rebalancing (409)."""
        def put():
            code, body = self.rest("PUT", f"/connectors/{name}/config", config)
            assert code in (200, 201, 409), f"PUT {name}: {code} {body}"
            return code in (200, 201)
        util.wait_until(put, 60, f"connector {name} created")

    def placement(self, name: str) -> dict | None:
        """{"connector": worker id, "tasks": [worker id, ..]} when the connector and every one of
        its tasks are RUNNING, else None."""
        code, st = self.rest("GET", f"/connectors/{name}/status", timeout=10)
        if code != 200 or st["connector"]["state"] != "RUNNING" or not st["tasks"]:
            return None
        if any(t["state"] != "RUNNING" for t in st["tasks"]):
            failed = [t for t in st["tasks"] if t["state"] == "FAILED"]
            assert not failed, f"{name}: task failed: {failed}"
            return None
        return {"connector": st["connector"]["worker_id"], "tasks": [t["worker_id"] for t in st["tasks"]]}

    def committed(self, name: str) -> list[dict]:
        """The connector's committed offsets (KIP-875 GET /connectors/NAME/offsets)."""
        code, body = self.rest("GET", f"/connectors/{name}/offsets")
        assert code == 200, f"offsets of {name}: {code} {body}"
        return body["offsets"]


@pytest.fixture
def connect_workers(tmp):
    """Factory of Connect workers; every one still running is stopped at the end (SIGTERM, then
    SIGKILL), so no JVM outlives the test."""
    made: list[ConnectWorker] = []

    def make(name: str, bootstrap: str, storage: dict[str, str]) -> ConnectWorker:
        w = ConnectWorker(name, tmp, bootstrap, storage)
        made.append(w)
        _active.append(w)  # its log tail goes into a failed test's report
        w.start()
        return w

    yield make
    for w in made:
        w.stop()
        _active.remove(w)


def lines(start: int, end: int) -> list[str]:
    """Distinct source lines. ASCII only: FileStreamSourceTask counts its file position in
    characters but skips bytes when it resumes, so a multi-byte character would shift it. The
    quotes, backslash and tab go through the JSON converter's escaping."""
    return [f'line {i:05d} "quoted" back\\slash\ttab {"x" * (i % 17)}' for i in range(start, end)]


def append(path: Path, new: list[str]) -> None:
    with open(path, "a") as f:
        f.write("".join(ln + "\n" for ln in new))


def sink_lines(path: Path) -> list[str]:
    """Complete lines of the sink file (a line being written has no newline yet)."""
    if not path.exists():
        return []
    text = path.read_text()
    return text.split("\n")[:-1]


def test_connect_distributed_file_pipeline_survives_killed_workers(replicated_cluster, connect_workers, tmp):
    """Kafka Connect workers on a 3-broker cluster.

    - Two workers create their internal topics: config (1 partition), offsets and status, each
      with 3 replicas and cleanup.policy=compact set on the topic itself.
    - A FileStreamSource connector (file → topic) and a FileStreamSink connector (topic → file),
      created through the REST API, copy the first 300 lines: the sink file is exactly those
      lines, once each, in order.
    - Two crashes. First the worker running the source task is SIGKILLed, then (after a third
      worker has joined and taken a share of the work) the one running the sink task, so each
      task resumes once from what a dead worker committed: the source task from its file position
      in the offsets topic, the sink task from its consumer group's committed offset. Before
      each kill both connectors' committed offsets must cover every line written (GET
      /connectors/NAME/offsets: the file position is the file's size, the topic offset the
      number of lines); 100 lines are appended while the worker is dead; the connectors and both
      tasks must then be RUNNING on the surviving worker, and 100 more lines are appended.
    - Connect is at-least-once: after a crash, what was processed after the last offset commit
      is processed again. So the sink file must hold every line, no line that was not written,
      with first appearances in the written order. And since each kill came after a clean commit
      of both connectors, nothing is left to repeat: the sink file must have no duplicate either
      (one would mean a committed offset, in the offsets topic or in the sink's consumer group,
      was not honoured), and the topic holds every line once, in order, as the JSON converter
      writes it (a JSON string: schemas are off).
    """
    c = replicated_cluster
    data_topic = "connect-lines"
    create_topic(c.bootstrap, data_topic, config={"min.insync.replicas": "2"})
    storage = {"group": "connect-e2e", "config": "connect-e2e-configs", "offset": "connect-e2e-offsets",
               "status": "connect-e2e-status"}
    t0 = time.monotonic()
    live = [connect_workers("w1", c.bootstrap, storage), connect_workers("w2", c.bootstrap, storage)]
    for w in live:
        w.wait_ready()
    print(f"\ntwo Connect workers ready in {time.monotonic() - t0:.1f}s")

    internal = [storage["config"], storage["offset"], storage["status"]]
    layout = topic_layout(c.bootstrap, internal)
    for t, lay in layout.items():
        assert lay["cleanup.policy"] == "compact", f"{t}: {lay}"
        assert lay["source"] == "DYNAMIC_TOPIC_CONFIG", f"{t}: cleanup.policy is not the topic's own setting: {lay}"
        assert lay["replicas"] == [3], f"{t}: {lay}"
    assert layout[storage["config"]]["partitions"] == 1, layout

    src, sink = tmp / "source.txt", tmp / "sink.txt"
    src.touch()
    live[1].put_connector("file-source", {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max": "1", "file": str(src), "topic": data_topic})
    live[0].put_connector("file-sink", {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": "1", "file": str(sink), "topics": data_topic})
    names = ("file-source", "file-sink")

    def placements() -> dict | None:
        """Where each connector and its task run, once all of them are RUNNING."""
        p = {n: live[0].placement(n) for n in names}
        return p if all(p.values()) else None

    util.wait_until(placements, 60, "both connectors and their tasks RUNNING")
    written = lines(0, 300)
    append(src, written)
    util.wait_until(lambda: len(sink_lines(sink)) >= len(written), 60, "the first 300 lines in the sink file")
    assert sink_lines(sink) == written, "the sink file is not exactly the source lines"

    def clean_commit() -> bool:
        pos, off = live[0].committed("file-source"), live[0].committed("file-sink")
        return (len(pos) == 1 and pos[0]["offset"]["position"] == src.stat().st_size
                and len(off) == 1 and off[0]["offset"]["kafka_offset"] == len(written))

    def crash_the_worker_running(task_of: str) -> None:
        nonlocal written
        util.wait_until(clean_commit, 30, f"both connectors' offsets committed past all {len(written)} lines")
        before = placements()
        assert before, "a connector or task is not RUNNING"
        victim = next(w for w in live if w.worker_id == before[task_of]["tasks"][0])
        live.remove(victim)
        (survivor,) = live
        t_kill = time.monotonic()
        victim.kill9()
        more = lines(len(written), len(written) + 100)
        append(src, more)
        written += more
        on_survivor = {"connector": survivor.worker_id, "tasks": [survivor.worker_id]}
        util.wait_until(lambda: all(survivor.placement(n) == on_survivor for n in names), 60,
                        f"the connectors and tasks RUNNING on the surviving worker {survivor.name}")
        names_of = {w.worker_id: w.name for w in (*live, victim)}
        where = {n: f"connector on {names_of[v['connector']]}, task on {names_of[v['tasks'][0]]}"
                 for n, v in before.items()}
        print(f"{where}: {victim.name} SIGKILLed; everything RUNNING on {survivor.name} "
              f"{time.monotonic() - t_kill:.1f}s later")
        more = lines(len(written), len(written) + 100)
        append(src, more)
        written += more
        util.wait_until(lambda: set(written) <= set(sink_lines(sink)), 60, f"all {len(written)} lines in the sink")

    crash_the_worker_running("file-source")
    # A third worker joins: the group's leader hands it a share of the connectors and tasks.
    w3 = connect_workers("w3", c.bootstrap, storage)
    w3.wait_ready()
    live.append(w3)
    util.wait_until(lambda: (p := placements()) and any(w3.worker_id in (v["connector"], *v["tasks"])
                                                       for v in p.values()), 60, "w3 running a share of the work")
    crash_the_worker_running("file-sink")

    got = sink_lines(sink)
    missing = sorted(set(written) - set(got))
    assert not missing, f"{len(missing)} lines never reached the sink, e.g. {missing[:3]}"
    foreign = set(got) - set(written)
    assert not foreign, f"lines in the sink that were never written: {sorted(foreign)[:3]}"
    first = list(dict.fromkeys(got))
    assert first == written, "first appearances in the sink are not in the written order"
    repeated = sorted(ln for ln, n in Counter(got).items() if n > 1)
    assert not repeated, (f"{len(got) - len(first)} lines repeated although both connectors had committed "
                          f"before each kill, e.g. {repeated[:3]}")
    # On the wire the lines are what the JSON converter made of them (schemas off: JSON strings).
    values = [v for _, _, v, _ in read_topic(c.bootstrap, data_topic)]
    assert [json.loads(v) for v in values] == written, "the topic does not hold the lines as JSON strings"
    print(f"{len(written)} lines copied exactly once across two worker crashes")


# ------------------------------------------------------------------------------------------
# Schema Registry's pattern


class StoreInstance:
    """One `SchemaStore` instance (e2e/java, subcommand schema-store) in its own JVM: commands on
    its stdin, its JSON events in `out_path`, its stderr in `err_path`."""

    def __init__(self, name: str, tmp: Path, bootstrap: str, topic: str, group: str, topic_config: str):
        self.name = name
        self.out_path = tmp / f"store-{name}.out"
        self.err_path = tmp / f"store-{name}.err"
        cmd = util.java_cmd("schema-store", "--bootstrap", bootstrap, "--topic", topic, "--group", group,
                            "--id", name, "--rf", "3", "--topic-config", topic_config,
                            "--session-timeout-ms", str(SESSION_TIMEOUT_MS), "--timeout-ms", "200000")
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, stderr=err,
                                         start_new_session=True)

    def events(self) -> list[dict]:
        text = self.out_path.read_text()
        return [json.loads(ln) for ln in text.split("\n")[:-1] if ln.startswith("{")]

    def wait_event(self, what: str, pred, since: int = 0, timeout: float = 60) -> dict:
        """The first event after the `since` first ones for which pred holds."""
        def find():
            assert self.proc.poll() is None or self.proc.returncode == 0, \
                f"store {self.name} exited with {self.proc.returncode}:\n{self.err_path.read_text()[-3000:]}"
            return next((e for e in self.events()[since:] if pred(e)), None)
        return util.wait_until(find, timeout, f"store {self.name}: {what}", interval=0.1)

    def request(self, line: str, answers: tuple[str, ...], timeout: float = 60) -> dict:
        since = len(self.events())
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()
        return self.wait_event(f"answer to {line!r}", lambda e: e["ev"] in answers, since, timeout)

    def put(self, key: str, value: str) -> dict:
        return self.request(f"put {key} {value}", ("put", "not_leader"))

    def delete(self, key: str) -> dict:
        return self.request(f"del {key}", ("del", "not_leader"))

    def state(self) -> dict[str, str]:
        return self.request("dump", ("state",))["state"]

    def roles(self) -> list[bool]:
        return [e["leader"] for e in self.events() if e["ev"] == "role"]

    def wait_role(self, leader: bool, timeout: float = 60) -> None:
        self.wait_event(f"role leader={leader}", lambda e: e["ev"] == "role" and e["leader"] == leader,
                        timeout=timeout)

    def quit(self) -> None:
        """Closes the instance: its group member leaves the group."""
        self.request("quit", ("closed",))
        assert self.proc.wait(30) == 0, self.err_path.read_text()[-3000:]

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def stores(tmp):
    """Factory of SchemaStore instances; all are killed at the end of the test."""
    made: list[StoreInstance] = []

    def make(name: str, *args) -> StoreInstance:
        s = StoreInstance(name, tmp, *args)
        made.append(s)
        return s

    yield make
    for s in made:
        if s.proc.poll() is None:
            s.kill9()


def test_schema_registry_pattern_single_writer_rebuilds_compacted_state(replicated_cluster, stores):
    """Schema Registry's store on a 3-broker cluster, with the Java client.

    - The first instance creates the store topic: one partition, 3 replicas, compacted.
    - Leadership: the member of the group holding the partition is the one writer. A second
      member joining does not take it away (cooperative-sticky); writes sent to a follower are
      refused. The leader SIGKILLed: the follower becomes the leader after the session timeout.
      The leader closed (it leaves the group): the follower takes over at once, well within the
      session timeout. At every point exactly one live instance is the leader, and the log
      holds the leaders' records in turn (a's, then b's, then c's: the "writer" header).
    - State: every instance, at start-up, reads the topic from the beginning; its state is then
      the last value written for each key, without the deleted ones, and followers keep up with
      the leader's writes. After the broker has compacted the topic (records superseded by a
      later value of their key are gone), a new instance rebuilds the same state from what is
      left.
    """
    c = replicated_cluster
    topic, group = "_schemas-e2e", "schema-registry-e2e"
    # Small segments and an eager cleaner, so compaction happens within the test.
    args = (c.bootstrap, topic, group, "segment.ms=1000,min.cleanable.dirty.ratio=0.01")
    expected: dict[str, str] = {}
    writes = 0

    def write(inst: StoreInstance, key: str, value: str | None) -> None:
        nonlocal writes
        e = inst.put(key, value) if value is not None else inst.delete(key)
        assert e["ev"] in ("put", "del"), f"the leader {inst.name} refused a write: {e}"
        writes += 1
        if value is None:
            expected.pop(key, None)
        else:
            expected[key] = value

    def schema(subject: int, version: int) -> str:
        return json.dumps({"type": "record", "name": f"S{subject}", "version": version}, separators=(",", ":"))

    a = stores("a", *args)
    made = a.wait_event("topic checked", lambda e: e["ev"] == "topic")
    assert made == {"ev": "topic", "created": True, "partitions": 1, "replicas": 3, "cleanup.policy": "compact"}
    assert a.wait_event("bootstrapped", lambda e: e["ev"] == "bootstrapped")["state"] == {}
    a.wait_role(True)

    b = stores("b", *args)
    assert b.wait_event("topic checked", lambda e: e["ev"] == "topic")["created"] is False
    b.wait_role(False)
    for version in (1, 2, 3):
        for subject in range(10):
            write(a, f"subject-{subject}", schema(subject, version))
    write(a, "subject-3", None)
    assert b.put("subject-0", "x")["ev"] == "not_leader", "a follower accepted a write"
    util.wait_until(lambda: b.state() == expected, 30, "the follower's state to follow the leader's writes")
    # (a role event follows every rebalance: the leader's say it still leads)
    assert set(a.roles()) == {True} and set(b.roles()) == {False}, (a.roles(), b.roles())

    t = time.monotonic()
    a.kill9()
    b.wait_role(True, timeout=60)
    print(f"\nleader SIGKILLed: the follower took over in {time.monotonic() - t:.1f}s")

    c_ = stores("c", *args)
    boot = c_.wait_event("bootstrapped", lambda e: e["ev"] == "bootstrapped")
    assert boot["state"] == expected, "a new instance did not rebuild the state from the topic"
    c_.wait_role(False)
    for subject in range(5):
        write(b, f"subject-{subject}", schema(subject, 4))
    write(b, "subject-5", None)
    write(b, "subject-3", schema(3, 5))  # deleted, then registered again
    assert c_.put("subject-0", "x")["ev"] == "not_leader", "a follower accepted a write"
    assert b.roles()[-1] is True and set(c_.roles()) == {False}, (b.roles(), c_.roles())

    t = time.monotonic()
    b.quit()
    c_.wait_role(True, timeout=60)
    handover = time.monotonic() - t
    print(f"leader closed: the follower took over in {handover:.1f}s")
    assert handover < SESSION_TIMEOUT_MS / 1000, \
        f"took {handover:.1f}s: the closed leader's LeaveGroup did not start a rebalance"
    write(c_, "subject-9", schema(9, 6))
    assert c_.state() == expected

    # The broker's cleaner drops superseded records (on Skein within ~15 s; segment.ms rolls the
    # segments first).
    util.wait_until(lambda: len(read_topic(c.bootstrap, topic)) < writes, 60,
                    f"compaction to remove some of the {writes} records")
    log = read_topic(c.bootstrap, topic)
    writers = [h["writer"] for _, _, _, h in log]
    assert writers == sorted(writers), f"records of an earlier leader after a later one's: {writers}"
    d = stores("d", *args)
    boot = d.wait_event("bootstrapped", lambda e: e["ev"] == "bootstrapped")
    assert boot["state"] == expected, "a new instance did not rebuild the state from the compacted topic"
    assert boot["records"] < writes, boot
    d.wait_role(False)
    assert c_.roles()[-1] is True and set(d.roles()) == {False}, (c_.roles(), d.roles())
    print(f"{writes} writes; a new instance rebuilt {len(expected)} keys from {boot['records']} records "
          f"left after compaction in {boot['ms']} ms")
    for s in (c_, d):
        s.quit()
