"""The dashboard and alert rules against a real Prometheus (run by observability/test.sh).

A Prometheus server (Debian's package) scrapes skein-broker and skein-operator
every second while a producer and a consumer group run; the operator runs
against the local Kubernetes control plane of e2e/k8s, with one healthy
KafkaCluster and one whose reconcile fails (a ResourceQuota forbids its
PodDisruptionBudget). Then:

- every PromQL expression of every dashboard panel, and both sides of every
  comparison in every alert rule, must return data (a series with a number);
- consumer lag rises while the consumer is stopped and returns to 0 once it
  has caught up; the lag, reconcile-failure and broker-down alerts go
  pending in Prometheus itself when their condition holds.

The brokers are a 3-broker cluster run by `skein-operator local`, whose
controller is scraped with the operator (job skein-operator). Hanging a
broker (SIGSTOP) raises the under-replicated partition count, which falls
back to 0 once it returns.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import sys
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e" / "tests"))
from brokers import LocalCluster  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DASHBOARD = HERE / "skein-dashboard.json"
RULES = HERE / "skein-alerts.yaml"

# Metrics allowed to have no data (none: every metric the dashboard and the
# alerts read exists on the 3-broker local cluster). A metric added to the
# dashboard before the code that exports it goes here, and the test fails if
# a listed metric does have data.
NOT_MERGED_YET: frozenset[str] = frozenset()

# Grafana's $__rate_interval for the checks (the workload runs ~1 minute).
RATE_INTERVAL = "1m"
TOPIC = "obs-orders"
LIMITED_TOPIC = "obs-limited"  # max.message.bytes=1024: produce errors
TIERED_TOPIC = "obs-tiered"  # tiered storage: copies, remote bytes, a remote read
GROUP = "obs-group"
SHARE_GROUP = "obs-share"
# Labels the plain-Prometheus setup in docs/observability.md puts on broker
# targets; the chart's PodMonitor sets the same ones.
BROKER_LABELS = {"namespace": "obs-test", "skein_cluster": "obs"}


# --------------------------------------------------------------------- PromQL helpers

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool",
            "and", "or", "unless", "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """Metric names an expression reads (strings, label matchers and grouping lists removed)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    s = re.sub(r"\{[^}]*\}", "", s)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    s = re.sub(r"\[[^\]]*\]", "", s)
    names = set()
    for m in re.finditer(r"(?<![\w:])[A-Za-z_:][\w:]*(?![\w:])(?!\s*\()", s):
        word = m.group(0)
        if word.lower() not in KEYWORDS and not re.fullmatch(r"\d.*", word):
            names.add(word)
    return names


def _split_top(expr: str, ops: list[str]) -> list[str]:
    """Splits at binary operators `ops` outside brackets and strings."""
    parts, depth, i, start, quote = [], 0, 0, 0, None
    word_ops = [o for o in ops if o[0].isalpha()]
    sym_ops = sorted((o for o in ops if not o[0].isalpha()), key=len, reverse=True)
    while i < len(expr):
        c = expr[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'`":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0:
            hit = next((o for o in sym_ops if expr.startswith(o, i)), None)
            if hit is None:
                for o in word_ops:
                    if (expr.startswith(o, i) and (i == 0 or not (expr[i - 1].isalnum() or expr[i - 1] == "_"))
                            and not (expr[i + len(o):i + len(o) + 1].isalnum()
                                     or expr[i + len(o):i + len(o) + 1] == "_")):
                        hit = o
                        break
            if hit is not None:  # (`=~` and `!~` only occur inside braces)
                parts.append(expr[start:i])
                i += len(hit)
                start = i
                continue
        i += 1
    parts.append(expr[start:])
    return parts


def _strip_modifiers(operand: str) -> str:
    s = operand.strip()
    while True:
        m = re.match(r"(bool\b|on\s*\([^)]*\)|ignoring\s*\([^)]*\)|group_left(\s*\([^)]*\))?|group_right(\s*\([^)]*\))?)\s*", s)
        if not m or not m.group(0):
            return s
        s = s[m.end():].strip()


def _strip_parens(s: str) -> str:
    s = s.strip()
    while s.startswith("(") and s.endswith(")"):
        depth = 0
        for i, c in enumerate(s):
            depth += c == "("
            depth -= c == ")"
            if depth == 0 and i < len(s) - 1:
                return s  # the first paren closes before the end: not one group
        s = s[1:-1].strip()
    return s


def alert_operands(expr: str) -> list[str]:
    """The sides of every set operation (and/or/unless) and comparison of an alert
    expression: what must have data for the alert to be able to fire."""
    expr = _strip_parens(expr)
    for ops in (["and", "or", "unless"], ["==", "!=", ">=", "<=", ">", "<"]):
        parts = _split_top(expr, ops)
        if len(parts) > 1:
            out = []
            for p in parts:
                out.extend(alert_operands(_strip_modifiers(p)))
            return out
    return [expr]


def regex_value(values: list[str]) -> str:
    """Grafana's multi-value regex formatting, escaped for a PromQL string."""
    def esc(v):
        return "".join("\\\\" + c if c in r"\^$.|?*+()[]{}" else c for c in v)
    return "(" + "|".join(esc(v) for v in values) + ")" if len(values) > 1 else esc(values[0])


# --------------------------------------------------------------------- processes

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = pred()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def http_get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


class Proc:
    """A child process in its own session, output to a log file."""

    def __init__(self, name: str, cmd: list[str], workdir: Path, env: dict | None = None):
        self.name = name
        self.log = workdir / f"{name}.log"
        self.cmd = cmd
        self.env = env
        self.p: subprocess.Popen | None = None

    def start(self):
        out = open(self.log, "ab")
        self.p = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env={**os.environ, **(self.env or {})}, start_new_session=True)
        out.close()
        return self

    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()

    def tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return ""


def require_binary(env_var: str) -> str:
    path = os.environ.get(env_var, "")
    if not path or not os.access(path, os.X_OK):
        pytest.fail(f"{env_var}={path!r} is not an executable (observability/test.sh sets it)")
    return path


# --------------------------------------------------------------------- the stack

class Stack:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.procs: list[Proc] = []
        self.k8s_state = workdir / "k8s"
        self.kubeconfig: str | None = None
        self.kubectl: str | None = None
        self.broker: Proc | None = None
        self.bootstrap = ""
        self.prom_url = ""
        self.stop_producer = threading.Event()
        self.stop_consumer = threading.Event()
        self.threads: list[threading.Thread] = []
        self.errors: list[str] = []
        self.produced = 0

    # -- Kubernetes control plane and operator
    def start_k8s(self):
        env = {**os.environ, "SKEIN_K8S_STATE": str(self.k8s_state), "SKEIN_K8S_NODES": "1"}
        r = subprocess.run([str(ROOT / "e2e/k8s/up.sh")], env=env, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"e2e/k8s/up.sh failed:\n{r.stderr[-3000:]}")
        self.kubeconfig = r.stdout.strip().splitlines()[-1]
        envfile = (self.k8s_state / "env").read_text()
        bindir = re.search(r"SKEIN_K8S_BIN=(\S+)", envfile).group(1).strip("'\"")
        self.kubectl = f"{bindir}/kubectl"

    def kubectl_run(self, *args: str, stdin: str | None = None):
        r = subprocess.run([self.kubectl, "--kubeconfig", self.kubeconfig, *args], input=stdin,
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {r.stderr}")
        return r.stdout

    def start_operator(self) -> int:
        self.kubectl_run("apply", "-f", str(ROOT / "crds/yaml"))
        self.kubectl_run("wait", "--for=condition=Established", "--timeout=60s",
                         "crd/kafkaclusters.skein.dev", "crd/topics.skein.dev")
        port = free_port()
        op = Proc("operator", [require_binary("SKEIN_OPERATOR_BIN"), "kubernetes",
                               "--metrics-listen", f"127.0.0.1:{port}", "--leader-election",
                               "--lease-namespace", "default", "--identity", "obs-test"],
                  self.workdir, env={"KUBECONFIG": self.kubeconfig, "RUST_LOG": "info"}).start()
        self.procs.append(op)
        wait_until(lambda: b"skein_operator_leader 1" in http_get(f"http://127.0.0.1:{port}/metrics"),
                   60, "the operator to take the leader Lease")
        # One healthy cluster, and one whose PodDisruptionBudget a quota forbids:
        # its reconciles fail at the "apply" step and are retried every 15 s.
        for ns in ("obs-ok", "obs-fail"):
            self.kubectl_run("create", "namespace", ns)
        self.kubectl_run("-n", "obs-fail", "create", "quota", "no-pdb",
                         "--hard=count/poddisruptionbudgets.policy=0")
        # the quota controller must have computed usage before admission enforces it
        wait_until(lambda: "poddisruptionbudgets" in self.kubectl_run(
            "-n", "obs-fail", "get", "quota", "no-pdb", "-o", "jsonpath={.status.used}"), 30, "quota status")
        cluster = """
apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata: {name: demo}
spec: {replicas: 1, storage: {size: 1Gi}}
---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata: {name: orders}
spec: {clusterRef: {name: demo}, partitions: 1, replicationFactor: 1}
"""
        for ns in ("obs-ok", "obs-fail"):
            self.kubectl_run("-n", ns, "apply", "-f", "-", stdin=cluster)
        return port

    # -- brokers
    def start_brokers(self) -> tuple[list[int], int]:
        """A 3-broker cluster (`skein-operator local`): the brokers' metrics ports and the
        controller's."""
        require_binary("SKEIN_BROKER_BIN")
        require_binary("SKEIN_OPERATOR_BIN")
        self.cluster = LocalCluster(self.workdir / "cluster", 3, {
            "group.initial.rebalance.delay.ms": "0", "replica.lag.time.max.ms": "2000",
            "broker.heartbeat.interval.ms": "500",
            "remote.log.manager.task.interval.ms": "500", "log.retention.check.interval.ms": "500"})
        self.cluster.extra_args = ["--tiered-storage", str(self.workdir / "store")]
        self.cluster.start()
        self.bootstrap = self.cluster.bootstrap
        ports = [self.cluster.metrics_port + i for i in range(3)]
        for mport in ports:
            wait_until(lambda m=mport: http_get(f"http://127.0.0.1:{m}/healthz") == b"ok\n", 30, "broker /healthz")
        return ports, self.cluster.controller_metrics

    # -- Prometheus
    def start_prometheus(self, broker_ports: list[int], operator_ports: list[int]):
        port = free_port()
        cfg = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [
                {"job_name": "skein-broker",
                 "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in broker_ports], "labels": BROKER_LABELS}]},
                {"job_name": "skein-operator",
                 "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in operator_ports]}]},
            ],
        }
        cfg_path = self.workdir / "prometheus.yml"
        cfg_path.write_text(json.dumps(cfg, indent=2))  # JSON is YAML
        prom = Proc("prometheus", [
            os.environ.get("PROMETHEUS_BIN", "prometheus"), f"--config.file={cfg_path}",
            f"--storage.tsdb.path={self.workdir / 'prometheus-data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"], self.workdir).start()
        self.procs.append(prom)
        self.prom_url = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_get(self.prom_url + "/-/ready"), 60, "Prometheus /-/ready")

    def api(self, path: str, **params) -> dict:
        url = f"{self.prom_url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        body = json.loads(http_get(url, timeout=15))
        if body.get("status") != "success":
            raise AssertionError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, expr: str) -> dict:
        return self.api("query", query=expr)

    def has_data(self, expr: str) -> bool:
        data = self.query(expr)
        if data["resultType"] == "vector":
            return any(math.isfinite(float(s["value"][1])) for s in data["result"])
        if data["resultType"] == "matrix":
            return any(math.isfinite(float(v[1])) for s in data["result"] for v in s["values"])
        return False

    def value(self, expr: str) -> float | None:
        res = self.query(expr)["result"]
        return float(res[0]["value"][1]) if res else None

    def active_alerts(self, name: str) -> list[dict]:
        return [a for a in self.api("alerts")["alerts"] if a["labels"].get("alertname") == name]

    # -- workload
    def setup_topics(self):
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([
            NewTopic(TOPIC, num_partitions=3, replication_factor=3),
            NewTopic(LIMITED_TOPIC, num_partitions=1, replication_factor=3,
                     config={"max.message.bytes": "1024"}),
        ])
        for f in futures.values():
            f.result(30)

    def tier_and_read_back(self):
        """A tiered topic whose first segments go to the store and leave the brokers' disks, then
        read back from offset 0: the Tiered storage row's copies, remote bytes and remote reads."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(TIERED_TOPIC, num_partitions=1, replication_factor=3, config={
            "remote.storage.enable": "true", "segment.bytes": "16384",
            "local.retention.ms": "1000"})])[TIERED_TOPIC].result(30)
        p = Producer({"bootstrap.servers": self.bootstrap, "batch.size": 4096, "linger.ms": 1})
        for i in range(1000):
            p.produce(TIERED_TOPIC, value=b"t" * 200)
            p.poll(0)
        assert p.flush(30) == 0
        from confluent_kafka import TopicPartition
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "obs-tiered-reader", "log_level": 3})
        # offset 0 leaves the leader's disk once copied: then a read from 0 is a remote read
        seg0 = lambda: all(not (self.cluster.data_dir / f"broker-{b}" / f"{TIERED_TOPIC}-0" /
                                "00000000000000000000.log").exists() for b in (1, 2, 3))
        wait_until(seg0, 60, "the tiered topic's first segment to leave the brokers' disks")
        # A sample before the reads, so that the rates over them (read latency) have an increase.
        wait_until(lambda: self.has_data("skein_remote_read_seconds_count"), 30,
                   "Prometheus to scrape the brokers' remote-read histogram")
        time.sleep(2)
        c.assign([TopicPartition(TIERED_TOPIC, 0, 0)])
        got = 0
        deadline = time.monotonic() + 60
        while got < 1000 and time.monotonic() < deadline:
            m = c.poll(1)
            if m is not None and not m.error():
                got += 1
        c.close()
        assert got == 1000, f"read {got} of 1000 tiered records back"

    def start_producer(self, rate: int = 400):
        self.stop_producer.clear()

        def run():
            p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "acks": "all"})
            i = 0
            t0 = time.monotonic()
            while not self.stop_producer.is_set():
                p.produce(TOPIC, key=str(i % 17).encode(), value=b"x" * 200)
                i += 1
                p.poll(0)
                ahead = i / rate - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
            left = p.flush(30)
            if left:
                self.errors.append(f"producer: {left} records not delivered")
            self.produced += i

        t = threading.Thread(target=run, name="producer", daemon=True)
        t.start()
        self.threads.append(t)
        self.producer_thread = t

    def produce_too_large(self):
        """A record over the topic's max.message.bytes: the broker answers
        MESSAGE_TOO_LARGE, which skein_request_errors_total counts."""
        results = []
        p = Producer({"bootstrap.servers": self.bootstrap, "message.send.max.retries": 0})
        p.produce(LIMITED_TOPIC, value=b"y" * 4096, on_delivery=lambda err, msg: results.append(err))
        p.flush(30)
        assert results and results[0] is not None, f"oversized record was accepted: {results}"

    def start_consumer(self):
        self.stop_consumer.clear()

        def run():
            c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP,
                          "auto.offset.reset": "earliest", "enable.auto.commit": True,
                          "auto.commit.interval.ms": 500})
            c.subscribe([TOPIC])
            try:
                while not self.stop_consumer.is_set():
                    m = c.poll(0.2)
                    if m is not None and m.error():
                        self.errors.append(f"consumer: {m.error()}")
            finally:
                c.close()  # commits the final offsets and leaves the group

        t = threading.Thread(target=run, name="consumer", daemon=True)
        t.start()
        self.threads.append(t)
        self.consumer_thread = t

    def start_share_consumer(self):
        """A KIP-932 share group (kafka-clients 4.4's KafkaShareConsumer, e2e/java) on the same
        topic, acknowledging what it gets: the Share groups row."""
        from util import java_cmd
        log = self.workdir / "share-consumer.log"
        with open(log, "wb") as out:
            self.share_proc = subprocess.Popen(
                java_cmd("share-consume", "--bootstrap", self.bootstrap, "--group", SHARE_GROUP,
                         "--topic", TOPIC, "--max-records", "1000000000", "--timeout-ms", "3600000",
                         "--ack-mode", "implicit"),
                stdout=subprocess.DEVNULL, stderr=out, stdin=subprocess.DEVNULL)

    def close(self):
        if getattr(self, "share_proc", None) is not None and self.share_proc.poll() is None:
            self.share_proc.kill()
            self.share_proc.wait(10)
        self.stop_producer.set()
        self.stop_consumer.set()
        for t in self.threads:
            t.join(30)
        for p in reversed(self.procs):
            p.stop()
        if getattr(self, "cluster", None) is not None:
            for i in (1, 2, 3):  # a test may leave a broker stopped
                pid = self.cluster.broker_pid(i)
                if pid:
                    try:
                        os.kill(pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
            self.cluster.stop()
        if self.kubeconfig or self.k8s_state.exists():
            subprocess.run([str(ROOT / "e2e/k8s/down.sh")], env={**os.environ, "SKEIN_K8S_STATE": str(self.k8s_state)},
                           capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def stack(request):
    workdir = Path(tempfile.mkdtemp(prefix="skein-obs-"))
    s = Stack(workdir)
    t0 = time.monotonic()
    failed_before = request.session.testsfailed
    ok = False
    try:
        s.start_k8s()
        op_port = s.start_operator()
        broker_ports, controller_port = s.start_brokers()
        s.start_prometheus(broker_ports, [op_port, controller_port])
        s.setup_topics()
        s.tier_and_read_back()
        s.start_producer()
        s.start_consumer()
        s.start_share_consumer()
        s.produce_too_large()
        print(f"\nstack up in {time.monotonic() - t0:.1f}s: Prometheus {s.prom_url}, broker {s.bootstrap}, "
              f"workdir {workdir}")
        yield s
        ok = request.session.testsfailed == failed_before
    finally:
        s.close()
        if not ok:
            for p in s.procs:
                print(f"--- last lines of {p.log}\n{p.tail()}")
        if ok and not os.environ.get("OBS_KEEP"):
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"kept {workdir} (logs, prometheus.yml, prometheus-data)")


# --------------------------------------------------------------------- static checks

def load_dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def dashboard_targets(d: dict):
    for p in d["panels"]:
        for t in p.get("targets", []):
            yield p, t


def test_dashboard_is_well_formed():
    d = load_dashboard()
    assert d["schemaVersion"] >= 36 and d["uid"] and d["title"]
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    rows = [p["title"] for p in d["panels"] if p["type"] == "row"]
    for wanted in ("overview", "throughput", "latency", "replication", "lag", "storage", "operator"):
        assert any(wanted in r.lower() for r in rows), f"no row about {wanted}: {rows}"
    for p in d["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        if p["type"] == "row":
            continue
        assert p.get("description"), f"panel {p['title']!r} has no description"
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"], f"panel {p['title']!r} has no query"
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}" and t["expr"].strip(), p["title"]
            used = set(re.findall(r"\$\{?(\w+)", t["expr"]))
            assert used <= set(variables) | {"__rate_interval"}, f"{p['title']}: unknown variables {used}"
    # panels do not overlap
    cells = set()
    for p in d["panels"]:
        g = p["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"panel {p['title']!r} overlaps another at {(x, y)}"
                cells.add((x, y))


def test_alert_operand_splitting():
    assert alert_operands('up{job="skein-broker"} == 0') == ['up{job="skein-broker"}', "0"]
    assert alert_operands("a / b < 0.2 and predict_linear(a[6h], 24 * 3600) < 0") == [
        "a / b", "0.2", "predict_linear(a[6h], 24 * 3600)", "0"]
    assert alert_operands('(x{l=~"a|b",m!="x>y"} > bool on (l) group_left () y) unless boolean') == [
        'x{l=~"a|b",m!="x>y"}', "y", "boolean"]
    assert alert_operands("sum by (a) (rate(x[5m])) >= 1") == ["sum by (a) (rate(x[5m]))", "1"]
    assert metric_names('sum by (api, le) (rate(skein_x_bucket{skein_cluster=~"$c"}[1m])) / on(a) up') == {
        "skein_x_bucket", "up"}


# --------------------------------------------------------------------- live checks

def resolve_variables(stack: Stack) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Resolves the dashboard's query variables in order, as Grafana would: the
    regex to substitute for each, and the label values found."""
    values: dict[str, str] = {}
    found_all: dict[str, list[str]] = {}
    for v in load_dashboard()["templating"]["list"]:
        if v["type"] != "query":
            continue
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        for name, val in values.items():
            q = q.replace(f"${name}", val)
        m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q.strip())
        assert m, f"variable {v['name']}: unsupported query {q}"
        found = sorted(set(stack.api(f"label/{m.group(2)}/values", **{"match[]": m.group(1)})))
        found_all[v["name"]] = found
        values[v["name"]] = regex_value(found) if found else v.get("allValue") or ".*"
    return values, found_all


def substitute(expr: str, values: dict[str, str]) -> str:
    out = expr.replace("$__rate_interval", RATE_INTERVAL)
    for name in sorted(values, key=len, reverse=True):
        out = out.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
    assert "$" not in out, f"unresolved variable in {out}"
    return out


def check_expressions(stack: Stack, exprs: list[tuple[str, str]], what: str, timeout: float = 90):
    """Every (label, expr) must have data, except those reading NOT_MERGED_YET metrics,
    which must have none. Retries until the deadline: rates need two scrapes, group
    lag is refreshed every 5 s, reconcile failures every 15 s."""
    expected_empty = [(lbl, e) for lbl, e in exprs if metric_names(e) & NOT_MERGED_YET]
    must_have = [(lbl, e) for lbl, e in exprs if not metric_names(e) & NOT_MERGED_YET]
    deadline = time.monotonic() + timeout
    while True:
        missing = [(lbl, e) for lbl, e in must_have if not stack.has_data(e)]
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(2)
    unexpected = [(lbl, e) for lbl, e in expected_empty if stack.has_data(e)]
    print(f"\n{what}: {len(exprs)} expressions, {len(must_have) - len(missing)} of {len(must_have)} "
          f"have data; {len(expected_empty)} expected empty because they read metrics not merged yet:")
    for lbl, e in expected_empty:
        print(f"  EXPECTED NO DATA  {lbl}: {e}   [{', '.join(sorted(metric_names(e) & NOT_MERGED_YET))}]")
    for lbl, e in missing:
        print(f"  NO DATA (FAIL)    {lbl}: {e}")
    for lbl, e in unexpected:
        print(f"  HAS DATA NOW      {lbl}: {e}  -> remove its metrics from NOT_MERGED_YET")
    assert not missing, f"{len(missing)} {what} return no data: {[lbl for lbl, _ in missing]}"
    assert not unexpected, f"{len(unexpected)} {what} have data although listed as not merged"


def test_rules_load_and_evaluate_in_prometheus(stack):
    def loaded():
        rules = [r for g in stack.api("rules")["groups"] for r in g["rules"]]
        return rules if rules and all(not r["lastEvaluation"].startswith("0001") for r in rules) else None
    rules = wait_until(loaded, 30, "every rule to be evaluated once")
    names = [r["name"] for r in rules]
    print(f"\n{len(rules)} alerting rules loaded: {', '.join(names)}")
    assert len(rules) == len(re.findall(r"^\s*- alert:", RULES.read_text(), re.M))
    for r in rules:
        assert r["type"] == "alerting" and r["health"] == "ok", (r["name"], r.get("lastError"))
        assert r["labels"].get("severity") in ("critical", "warning"), r["name"]
        assert {"summary", "description", "runbook"} <= set(r["annotations"]), r["name"]


def live_variables(stack: Stack) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The variables once every one of them has values (the group appears after
    its first offset commit and the coordinator's next metrics refresh)."""
    def resolved():
        values, found = resolve_variables(stack)
        # The consumer group itself, not only the share group (which shows up first): a
        # variable resolved without it leaves the lag panels with nothing to show.
        complete = all(found.values()) and GROUP in found.get("group", []) and TOPIC in found.get("topic", [])
        return (values, found) if complete else None
    return wait_until(resolved, 60, "every dashboard variable to have values")


def test_dashboard_variables_have_values(stack):
    _, found = live_variables(stack)
    for name, vals in found.items():
        print(f"  ${name}: {vals}")
    assert TOPIC in found["topic"] and GROUP in found["group"], found


def test_every_dashboard_expression_has_data(stack):
    values, _ = live_variables(stack)
    exprs = [(f"{p['title']} [{t['refId']}]", substitute(t["expr"], values))
             for p, t in dashboard_targets(load_dashboard())]
    check_expressions(stack, exprs, "dashboard queries")


def test_every_alert_expression_has_data(stack):
    exprs = []
    for g in stack.api("rules")["groups"]:
        for r in g["rules"]:
            for i, operand in enumerate(alert_operands(r["query"])):
                operand = operand.strip()
                if stack.query(operand)["resultType"] == "scalar":
                    continue  # a threshold
                exprs.append((f"{r['name']} operand {i}", operand))
    check_expressions(stack, exprs, "alert rule operands")


def test_operator_failure_alert_goes_pending(stack):
    alert = wait_until(lambda: [a for a in stack.active_alerts("SkeinOperatorReconcileFailures")
                                if a["labels"].get("kind") == "KafkaCluster" and a["labels"].get("error") == "apply"],
                       60, "SkeinOperatorReconcileFailures for the quota-blocked cluster")
    print(f"\nSkeinOperatorReconcileFailures: {alert[0]['state']} {alert[0]['labels']}")


def lag() -> str:
    return f'skein_group_lag_sum{{job="skein-broker", group="{GROUP}"}}'


def test_lag_rises_while_consumer_stopped_and_returns_to_zero(stack):
    # Steady state: the consumer keeps up, nothing alerts.
    wait_until(lambda: (v := stack.value(lag())) is not None and v < 1000, 60, "small lag while consuming")
    for name in ("SkeinConsumerLagGrowing", "SkeinBrokerDown", "SkeinOperatorDown"):
        assert not stack.active_alerts(name), f"{name} active in normal operation: {stack.active_alerts(name)}"

    # Stop the consumer; the producer goes on.
    stack.stop_consumer.set()
    stack.consumer_thread.join(30)
    t_stop = time.monotonic()
    start = stack.value(lag())
    seen = [start]

    def risen():
        v = stack.value(lag())
        if v is not None and v > seen[-1]:
            seen.append(v)
        return len(seen) >= 3 and seen[-1] > 2000  # rose over at least two refreshes
    wait_until(risen, 60, "lag to rise while the consumer is stopped")
    print(f"\nlag after stopping the consumer: {[int(x) for x in seen]} "
          f"({time.monotonic() - t_stop:.1f}s)")
    pending = wait_until(lambda: stack.active_alerts("SkeinConsumerLagGrowing"), 30,
                         "SkeinConsumerLagGrowing to go pending")
    assert pending[0]["labels"]["group"] == GROUP and pending[0]["state"] in ("pending", "firing")
    assert stack.has_data(f'deriv({lag()}[1m]) > 0'), "lag trend is not positive"

    # Stop producing, restart the consumer: it catches up and lag returns to 0.
    stack.stop_producer.set()
    stack.producer_thread.join(60)
    assert not stack.errors, stack.errors
    t_start = time.monotonic()
    stack.start_consumer()
    wait_until(lambda: stack.value(lag()) == 0, 60, "lag back to 0 after the consumer caught up")
    per_partition = stack.query(f'skein_group_lag{{group="{GROUP}", topic="{TOPIC}"}}')["result"]
    assert len(per_partition) == 3 and all(float(s["value"][1]) == 0 for s in per_partition), per_partition
    print(f"lag back to 0 in {time.monotonic() - t_start:.1f}s after restarting the consumer "
          f"({stack.produced} records produced)")
    wait_until(lambda: not stack.active_alerts("SkeinConsumerLagGrowing"), 30, "SkeinConsumerLagGrowing to clear")


def test_broker_down_alert_goes_pending(stack):
    # the local platform restarts a broker that exits, so a hung one (SIGSTOP) stands for a dead
    # one here: its scrapes time out
    assert not stack.active_alerts("SkeinBrokerDown")
    victim = 3
    stack.cluster.signal_broker(victim, signal.SIGSTOP)
    try:
        wait_until(lambda: stack.value('min(up{job="skein-broker"})') == 0, 30, "up == 0 for the hung broker")
        alert = wait_until(lambda: stack.active_alerts("SkeinBrokerDown"), 30, "SkeinBrokerDown to go pending")
        print(f"\nSkeinBrokerDown: {alert[0]['state']} {alert[0]['labels']}")
    finally:
        stack.cluster.signal_broker(victim, signal.SIGCONT)
    wait_until(lambda: stack.value('min(up{job="skein-broker"})') == 1, 30, "the broker scraped again")


def test_under_replicated_rises_while_a_broker_is_gone_and_falls_after(stack):
    under = "sum(skein_partitions_under_replicated)"
    wait_until(lambda: stack.value(under) == 0, 90, "no under-replicated partitions at the start")
    victim = 2
    stack.cluster.signal_broker(victim, signal.SIGSTOP)  # hung: heartbeats stop, it is fenced
    try:
        wait_until(lambda: (stack.value(under) or 0) > 0, 60, "under-replicated partitions > 0")
        print(f"\nunder-replicated while broker {victim} is gone: {stack.value(under):.0f}")
    finally:
        stack.cluster.signal_broker(victim, signal.SIGCONT)
    wait_until(lambda: stack.value(under) == 0, 120, "under-replicated back to 0")
