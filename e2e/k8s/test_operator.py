"""The operator's e2e suite against a real Kubernetes API server.

Two ways to run it, same tests:

- `SKEIN_E2E_CLUSTER=local` (default; e2e/k8s/operator-e2e.sh, in CI): this
  machine's control plane (e2e/k8s: etcd, kube-apiserver,
  kube-controller-manager, kube-scheduler built from source; kwok for nodes and
  pod status), with a real skein-broker or skein-operator process behind every
  pod (pod_runner.py). Runs inside netns.sh: pod IPs are local addresses and
  /etc/hosts stands in for cluster DNS.
- `SKEIN_E2E_CLUSTER=existing` (e2e/k8s/cluster-e2e.sh): any cluster the
  current kubeconfig (or the in-cluster ServiceAccount) reaches, with the images
  given in SKEIN_E2E_OPERATOR_IMAGE and SKEIN_E2E_BROKER_IMAGE. The suite must
  run where pod DNS names resolve (cluster-e2e.sh runs it in a pod).

The tests themselves use only the Kubernetes API (kubectl, helm, the API
server's pod proxy for the operator's metrics) and the Kafka protocol
(confluent-kafka through the pods' stable DNS names), never the pod runner."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "e2e" / "tests"))
import util  # noqa: E402
from util import kafka_tool  # noqa: E402

NS = os.environ.get("SKEIN_E2E_NAMESPACE", "skein-e2e")
OP_NS = os.environ.get("SKEIN_E2E_OPERATOR_NAMESPACE", "skein-system")
CLUSTER = "demo"
MODE = os.environ.get("SKEIN_E2E_CLUSTER", "local")
# An image tag the local tier's pod runner runs as /bin/false: a broker that exits at once, every time.
BROKEN_IMAGE_TAG = "does-not-start"


# The platform of the running module, for the state a failed wait reports.
CURRENT: Env | None = None


def wait_until(pred, timeout: float, what: str, interval: float = 0.5):
    """util.wait_until; when it times out, the message also holds what the
    operator saw: the KafkaCluster's conditions and balance plan, the
    brokers it has in session, the Topics' replicas, and its log's tail (CI
    shows a failure's message, not the fixture's teardown output)."""
    try:
        return util.wait_until(pred, timeout, what, interval)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{cluster_state(CURRENT)}") from None


def cluster_state(env: Env | None) -> str:
    if env is None:
        return "(no platform)"
    out = []
    try:
        kc = env.get("-n", NS, "get", "kafkacluster", CLUSTER).get("status", {})
        for c in kc.get("conditions", []):
            out.append(f"KafkaCluster {c['type']}={c['status']} {c.get('reason', '')}: {c.get('message', '')}")
        brokers = [(b["id"], b["ready"]) for b in kc.get("brokers", [])]
        out.append(f"KafkaCluster brokers (id, ready): {brokers}")
        if kc.get("balance"):
            b = kc["balance"]
            out.append(f"KafkaCluster balance: plan {b.get('planId')} {b.get('state')} "
                       f"proposed at {b.get('proposedAt')}, {b.get('moveCount')} move(s)")
        for t in env.get("-n", NS, "get", "topics")["items"]:
            parts = [(p["partition"], p["replicas"], p["isr"], p["leader"])
                     for p in t.get("status", {}).get("partitions", [])]
            out.append(f"Topic {t['metadata']['name']} (partition, replicas, isr, leader): {parts}")
    except Exception as err:  # noqa: BLE001
        out.append(f"(cluster state unavailable: {err})")
    try:
        out.append(env.operator_logs())
    except Exception as err:  # noqa: BLE001
        out.append(f"(no operator logs: {err})")
    return "\n".join(out)


class Env:
    """kubectl and helm against the cluster under test."""

    kubectl: str
    helm: str
    kubeconfig: str | None = None
    # What every `helm install`/`upgrade` of the suite passes besides its own settings (the
    # images under test on an existing cluster).
    chart_args: tuple[str, ...] = ()

    def __init__(self, workdir: Path):
        self.workdir = workdir

    def _kube_args(self) -> list[str]:
        return ["--kubeconfig", self.kubeconfig] if self.kubeconfig else []

    def k(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        r = subprocess.run([self.kubectl, *self._kube_args(), *args], input=stdin,
                           capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {r.stderr}")
        return r.stdout

    def k_run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        """kubectl whose failure is the expected outcome."""
        return subprocess.run([self.kubectl, *self._kube_args(), *args], input=stdin,
                              capture_output=True, text=True, timeout=60)

    def get(self, *args: str) -> dict:
        return json.loads(self.k(*args, "-o", "json"))

    def helm_install(self, *extra: str, chart: Path = ROOT / "charts/skein", verb: str = "install"):
        """`helm install` the chart: CRDs, RBAC, the operator Deployment with two
        replicas and Lease election (`verb="upgrade"`: the same settings on an
        installed release)."""
        r = subprocess.run([self.helm, *self._kube_args(), verb, "skein", str(chart),
                            "--namespace", OP_NS, "--create-namespace", "--wait=false",
                            "--set", "leaderElection.leaseDurationSeconds=6",
                            # CA replacement phases long enough for the pod runner's (and a
                            # kubelet's fast path's) Secret refresh and the brokers' reload.
                            "--set", "certificates.caPhaseSeconds=15", *self.chart_args, *extra],
                           capture_output=True, text=True, timeout=180)
        if r.returncode != 0:
            raise RuntimeError(f"helm {verb}: {r.stderr}")
        self.k("wait", "--for=condition=Established", "--timeout=60s",
               "crd/kafkaclusters.skein.dev", "crd/topics.skein.dev", "crd/kafkausers.skein.dev")

    def leader_pod(self) -> dict | None:
        lease = self.get("-n", OP_NS, "get", "lease", "skein-operator")
        holder = lease["spec"].get("holderIdentity")
        pods = self.get("-n", OP_NS, "get", "pods", "-l", "app.kubernetes.io/name=skein-operator")["items"]
        for p in pods:
            if p["metadata"]["name"] == holder and not p["metadata"].get("deletionTimestamp"):
                return p
        return None

    def operator_metrics(self) -> str:
        """The active operator's /metrics, through the API server's pod proxy."""
        name = self.leader_pod()["metadata"]["name"]
        return self.k("get", "--raw", f"/api/v1/namespaces/{OP_NS}/pods/{name}:9645/proxy/metrics")

    def operator_logs(self) -> str:
        out = []
        for p in self.get("-n", OP_NS, "get", "pods", "-l", "app.kubernetes.io/name=skein-operator")["items"]:
            name = p["metadata"]["name"]
            r = self.k_run("-n", OP_NS, "logs", name, "--tail=60")
            out.append(f"--- operator log tail {name}\n{r.stdout or r.stderr}")
        return "\n".join(out)

    def setup(self):
        raise NotImplementedError

    def teardown(self):
        raise NotImplementedError


class LocalCluster(Env):
    """This machine's control plane (e2e/k8s/up.sh) with pod_runner.py as the kubelet."""

    def __init__(self, workdir: Path):
        super().__init__(workdir)
        self.state = workdir / "k8s"
        self.runners = []
        self.sa_marker: Path | None = None

    def setup(self):
        self.start_platform()
        self.helm_install()
        self.k("create", "namespace", NS)

    def start_platform(self):
        """The control plane, and pod runners for the operator's and the brokers'
        namespaces (which need not exist yet)."""
        if not os.environ.get("SKEIN_K8S_IN_NETNS"):
            raise RuntimeError("run under e2e/k8s/netns.sh (e2e/k8s/operator-e2e.sh does)")
        from pod_runner import PodRunner
        env = {**os.environ, "SKEIN_K8S_STATE": str(self.state), "SKEIN_K8S_NODES": "3"}
        r = subprocess.run([str(HERE / "up.sh")], env=env, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"up.sh failed:\n{r.stderr[-3000:]}")
        vals = dict(line.split("=", 1) for line in (self.state / "env").read_text().split("\n")
                    if "=" in line and not line.startswith("#"))
        vals = {k.removeprefix("export "): v.strip("'\"") for k, v in vals.items()}
        self.kubeconfig = vals["KUBECONFIG"]
        self.kubectl = f"{vals['SKEIN_K8S_BIN']}/kubectl"
        self.helm = f"{vals['SKEIN_K8S_BIN']}/helm"
        # The operator pods run the real operator binary with the chart's args
        # and env and an in-cluster identity: a token of the chart's
        # ServiceAccount at the standard path (mounted in this test's private
        # mount namespace), so the chart's RBAC is what is tested.
        sa_dir = self.workdir / "serviceaccount"
        sa_dir.mkdir()
        admin = json.loads(self.k("config", "view", "--raw", "--minify", "-o", "json"))
        cluster = admin["clusters"][0]["cluster"]
        (sa_dir / "ca.crt").write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
        target = Path("/var/run/secrets/kubernetes.io/serviceaccount")
        target.mkdir(parents=True, exist_ok=True)
        # Other runs on this machine remove the mount point when they end (operator-e2e.sh does
        # if it made it), which would detach this run's mount: a file of this run in it, on the
        # real filesystem under the mount, keeps it from being removed (the directory is not empty).
        self.sa_marker = target / f".in-use-{os.getpid()}"
        self.sa_marker.touch()
        subprocess.run(["mount", "--bind", str(sa_dir), str(target)], check=True)
        host, port = cluster["server"].removeprefix("https://").rsplit(":", 1)
        kubectl = [self.kubectl, "--kubeconfig", self.kubeconfig]
        binaries = self.binaries()
        self.runners.append(PodRunner(kubectl, OP_NS, binaries, self.workdir / "op-runner",
                                      selector="app.kubernetes.io/name=skein-operator",
                                      api=(host, int(port)), sa_dir=sa_dir).start())
        self.runners.append(PodRunner(kubectl, NS, binaries, self.workdir / "runner").start())

    def binaries(self) -> dict[str, str]:
        """What the pod runners run for an image: the binary of the longest key it names (an
        image tagged BROKEN_IMAGE_TAG runs /bin/false: a broker that never starts)."""
        return {"skein-operator": os.environ["SKEIN_OPERATOR_BIN"], "skein-broker": os.environ["SKEIN_BROKER_BIN"],
                f"skein-broker:{BROKEN_IMAGE_TAG}": "/bin/false"}

    def operator_logs(self) -> str:
        out = []
        for log in sorted((self.workdir / "op-runner" / "logs").glob("*.log")):
            out.append(f"--- operator log tail {log.name}")
            out.extend(log.read_text(errors="replace").splitlines()[-60:])
        return "\n".join(out)

    def teardown(self):
        for r in self.runners:
            r.stop()
        subprocess.run(["umount", "/var/run/secrets/kubernetes.io/serviceaccount"], capture_output=True)
        if self.sa_marker is not None:
            self.sa_marker.unlink(missing_ok=True)
        subprocess.run([str(HERE / "down.sh")], env={**os.environ, "SKEIN_K8S_STATE": str(self.state)},
                       capture_output=True, timeout=120)


class ExistingCluster(Env):
    """Any cluster: the current kubeconfig (KUBECONFIG) or, in a pod, its
    ServiceAccount. Installs the chart with the images under test into a fresh
    release and namespace and removes both afterwards (the CRDs stay: helm
    never deletes a chart's CRDs)."""

    def setup(self):
        self.kubeconfig = os.environ.get("KUBECONFIG") or None
        self.kubectl = os.environ.get("SKEIN_E2E_KUBECTL") or shutil.which("kubectl") or "kubectl"
        self.helm = os.environ.get("SKEIN_E2E_HELM") or shutil.which("helm") or "helm"
        images = []
        for key, env in (("image", "SKEIN_E2E_OPERATOR_IMAGE"), ("brokerImage", "SKEIN_E2E_BROKER_IMAGE")):
            ref = os.environ.get(env)
            if not ref:
                pytest.fail(f"{env} must name the image under test (repository:tag)")
            repo, _, tag = ref.rpartition(":")
            if not repo or "/" in tag:
                pytest.fail(f"{env}={ref}: expected repository:tag")
            images += ["--set", f"{key}.repository={repo}", "--set", f"{key}.tag={tag}"]
        if self.k_run("get", "namespace", NS).returncode == 0:
            pytest.fail(f"namespace {NS} exists already: delete it, or set SKEIN_E2E_NAMESPACE")
        self.chart_args = tuple(images)
        self.helm_install()
        self.k("create", "namespace", NS)

    def teardown(self):
        if os.environ.get("SKEIN_E2E_KEEP"):
            return
        self.k_run("delete", "namespace", NS, "--wait=true", "--timeout=180s")
        subprocess.run([self.helm, *self._kube_args(), "uninstall", "skein", "--namespace", OP_NS],
                       capture_output=True, timeout=180)
        self.k_run("delete", "namespace", OP_NS, "--wait=false")


def running(e: Env, request):
    """The platform `e` set up with an operator holding the Lease, for a module's
    tests; torn down after them (the operator's logs printed if a test failed)."""
    global CURRENT
    try:
        e.setup()
        CURRENT = e
        wait_until(e.leader_pod, 120, "an operator replica holding the Lease")
        yield e
    finally:
        CURRENT = None
        if request.session.testsfailed:
            try:
                print(e.operator_logs())
            except Exception as err:  # noqa: BLE001
                print(f"(no operator logs: {err})")
        e.teardown()


# The `env` fixture (the platform, one per session) is in conftest.py.


def cluster_yaml(replicas: int, size: str = "1Gi", storage_class: str | None = None,
                 replication_tls: bool = False) -> str:
    storage_class = f"\n    storageClassName: {storage_class}" if storage_class else ""
    listeners = "\n  listeners:\n    replicationTls: true" if replication_tls else ""
    return f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {CLUSTER}
  namespace: {NS}
spec:
  replicas: {replicas}
  storage:
    size: {size}{storage_class}{listeners}
  config:
    min.insync.replicas: "2"
"""


def topic_yaml(name: str, partitions: int, rf: int) -> str:
    return f"""apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: {name}
  namespace: {NS}
spec:
  clusterRef:
    name: {CLUSTER}
  partitions: {partitions}
  replicationFactor: {rf}
  config:
    min.insync.replicas: "2"
"""


def bootstrap(env) -> str:
    return f"{CLUSTER}-0.{CLUSTER}-brokers.{NS}.svc:9092,{CLUSTER}-1.{CLUSTER}-brokers.{NS}.svc:9092"


def cond(obj: dict, type_: str) -> str | None:
    for c in obj.get("status", {}).get("conditions", []):
        if c["type"] == type_:
            return c["status"]
    return None


def ready(env, kind: str, name: str, timeout: float, what: str) -> dict:
    """The object once its Ready condition is True (waits up to `timeout` seconds)."""
    return wait_until(lambda: (lambda o: o if cond(o, "Ready") == "True" else None)(
        env.get("-n", NS, "get", kind, name)), timeout, what)


def topic_partitions(env, name: str) -> list[dict]:
    return env.get("-n", NS, "get", "topic", name).get("status", {}).get("partitions", [])


def poll_values(cons, want: int, timeout: float) -> list[bytes]:
    """The values a confluent-kafka consumer reads until it has `want` of them
    or `timeout` seconds pass; the consumer is closed."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        m = cons.poll(1)
        if m is not None and not m.error():
            got.append(m.value())
    cons.close()
    return got


def test_helm_chart_installs_and_its_rbac_is_enough(env):
    """The operator of every other test is the chart's Deployment, with the chart's ServiceAccount."""
    dep = env.get("-n", OP_NS, "get", "deployment")["items"]
    assert dep and dep[0]["spec"]["replicas"] == 2, "the chart's operator Deployment"
    wait_until(lambda: env.get("-n", OP_NS, "get", "deployment")["items"][0]["status"].get("readyReplicas") == 2,
               120, "both operator replicas ready")
    sa = env.k("-n", OP_NS, "get", "deployment", "-o",
               "jsonpath={.items[0].spec.template.spec.serviceAccountName}").strip()
    who = f"system:serviceaccount:{OP_NS}:{sa}"
    for verb, res in [("create", "topics.skein.dev"), ("patch", "topics.skein.dev/status"),
                      ("delete", "pods"), ("update", "configmaps"), ("create", "statefulsets.apps"),
                      ("create", "secrets"), ("patch", "kafkausers.skein.dev"),
                      ("patch", "networkpolicies.networking.k8s.io"),
                      ("delete", "ingresses.networking.k8s.io"), ("patch", "kafkaclusters.skein.dev"),
                      ("patch", "kafkausers.skein.dev/status")]:
        assert env.k("auth", "can-i", verb, res, "-n", NS, "--as", who, check=False).strip() == "yes", (verb, res)
    # Least privilege (issue #41): only the verbs the operator uses. Secrets are read one by one
    # and never deleted; StatefulSets, ServiceAccounts and PDBs go by garbage collection.
    for verb, res in [("delete", "secrets"), ("list", "secrets"), ("watch", "secrets"),
                      ("delete", "statefulsets.apps"), ("update", "statefulsets.apps"),
                      ("delete", "serviceaccounts"), ("delete", "poddisruptionbudgets.policy"),
                      ("update", "kafkaclusters.skein.dev"), ("list", "nodes")]:
        assert env.k("auth", "can-i", verb, res, "-n", NS, "--as", who, check=False).strip() == "no", (verb, res)


def test_chart_examples_pass_the_api_servers_validation(env):
    """Every example under charts/skein/examples is a valid object for the installed CRDs (schema
    and CEL rules, checked by the API server with a server-side dry run)."""
    examples = sorted((ROOT / "charts/skein/examples").glob("*.yaml"))
    assert len(examples) >= 4, examples
    for f in examples:
        r = env.k_run("apply", "--dry-run=server", "-n", NS, "-f", str(f))
        assert r.returncode == 0, f"{f.name}: {r.stderr}"


@pytest.mark.parametrize("clients,message", [
    ('[{name: a, port: 9093, type: internal}, {name: a, port: 9094, type: internal}]', "names must be unique"),
    ('[{name: a, port: 9093, type: internal}, {name: b, port: 9093, type: nodeport}]', "ports must be unique"),
    ('[{name: metrics, port: 9093, type: internal}]', "reserved listener names"),
    ('[{name: a, port: 9093, type: internal, authentication: {type: tls}}]', "needs tls: true"),
    ('[{name: Bad_Name, port: 9093, type: internal}]', "should match"),
    ('[{name: a, port: 9093, type: loadbalance}]', "Unsupported value"),
    ('[{name: a, port: 9093, type: internal, authentication: {type: oauth}}]', "needs the oauth settings"),
    ('[{name: a, port: 9093, type: ingress, tls: true}]', "needs tls: true and ingress hosts"),
    ('[{name: a, port: 9093, type: ingress, ingress: {bootstrapHost: k.example.com, '
     'brokerHostTemplate: "b-{id}.example.com"}}]', "needs tls: true and ingress hosts"),
    ('[{name: a, port: 9093, type: nodeport, ingress: {bootstrapHost: k.example.com, '
     'brokerHostTemplate: "b-{id}.example.com"}}]', "for type ingress only"),
    ('[{name: a, port: 9093, type: ingress, tls: true, ingress: {bootstrapHost: k.example.com, '
     'brokerHostTemplate: "b.example.com"}}]', "must contain {id}"),
])
def test_api_server_rejects_invalid_listeners(env, clients, message):
    r = env.k_run("apply", "--dry-run=server", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: bad-listeners
  namespace: {NS}
spec:
  listeners:
    clients: {clients}
""")
    assert r.returncode != 0 and message in r.stderr, r.stderr


def test_api_server_rejects_renewal_after_expiry(env):
    r = env.k_run("apply", "--dry-run=server", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: bad-certificates
  namespace: {NS}
spec:
  certificates: {{validityDays: 20, renewalDays: 30}}
""")
    assert r.returncode != 0 and "renewalDays must be less than validityDays" in r.stderr, r.stderr


def test_kafkacluster_builds_objects_and_becomes_ready(env):
    env.k("apply", "-f", "-", stdin=cluster_yaml(3))
    sts = wait_until(lambda: env.get("-n", NS, "get", "statefulset", CLUSTER), 60, "the StatefulSet")
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["updateStrategy"]["type"] == "OnDelete"
    assert sts["metadata"]["ownerReferences"][0]["kind"] == "KafkaCluster"
    for kind, name in [("service", f"{CLUSTER}-brokers"), ("service", f"{CLUSTER}-bootstrap"),
                       ("pdb", CLUSTER), ("configmap", f"{CLUSTER}-config"), ("serviceaccount", f"{CLUSTER}-broker")]:
        env.get("-n", NS, "get", kind, name)
    # The pods run real brokers; the operator's controller holds a session with each.
    kc = wait_until(lambda: (lambda o: o if len([b for b in o.get("status", {}).get("brokers", [])
                                                 if b["ready"]]) == 3 else None)(
        env.get("-n", NS, "get", "kafkacluster", CLUSTER)), 180, "3 brokers registered with the controller")
    assert sorted(b["id"] for b in kc["status"]["brokers"]) == [0, 1, 2]
    wait_until(lambda: cond(env.get("-n", NS, "get", "kafkacluster", CLUSTER), "Ready") == "True", 120,
               "KafkaCluster Ready=True")
    cm = env.get("-n", NS, "get", "configmap", f"{CLUSTER}-controller")
    head = json.loads(cm["data"]["head.json"])
    assert head["cluster_id"], "controller metadata log's head persisted in its ConfigMap"
    assert head["snapshot"], "the head names the snapshot's blob ConfigMaps"
    records = list(head["tail"])
    for blob in head["snapshot"] + head["log"]:
        text = env.get("-n", NS, "get", "configmap", f"{CLUSTER}-controller-{blob}")["data"]["records.jsonl"]
        records += [json.loads(line) for line in text.splitlines()]
    registered = {r["broker"]["id"] for r in records if r["type"] == "broker"}
    assert registered == {0, 1, 2}, f"broker registrations in the metadata log: {registered}"


def test_topic_gets_partitions_in_status_and_serves_clients(env):
    env.k("apply", "-f", "-", stdin=topic_yaml("orders", 3, 3))
    parts = wait_until(lambda: (lambda ps: ps if len(ps) == 3 and all(p["leader"] >= 0 and len(p["isr"]) == 3
                                                                   for p in ps) else None)(
        topic_partitions(env, "orders")), 90, "3 placed partitions with a full ISR in Topic status")
    for p in parts:
        assert sorted(p["replicas"]) == [0, 1, 2]
        assert p["leader"] in p["replicas"]
    wait_until(lambda: cond(env.get("-n", NS, "get", "topic", "orders"), "Ready") == "True", 60,
               "Topic Ready=True")

    from confluent_kafka import Consumer, Producer
    prod = Producer({"bootstrap.servers": bootstrap(env), "acks": "all", "enable.idempotence": True})
    sent = [f"order-{i}".encode() for i in range(300)]
    for v in sent:
        prod.produce("orders", v)
    assert prod.flush(60) == 0
    cons = Consumer({"bootstrap.servers": bootstrap(env), "group.id": f"g-{uuid.uuid4().hex[:6]}",
                     "auto.offset.reset": "earliest"})
    cons.subscribe(["orders"])
    got = poll_values(cons, len(sent), 60)
    assert sorted(got) == sorted(sent)


def test_api_server_rejects_invalid_topics(env):
    """The CRD's schema and CEL rules, enforced by the real API server."""
    bad = topic_yaml("bad", 0, 1)
    r = env.k_run("apply", "-f", "-", stdin=bad)
    assert r.returncode != 0 and "partitions" in r.stderr, r.stderr
    r = env.k_run("-n", NS, "patch", "topic", "orders", "--type=merge", "-p", '{"spec": {"partitions": 2}}')
    assert r.returncode != 0 and "partitions may not decrease" in r.stderr, r.stderr
    r = env.k_run("-n", NS, "patch", "topic", "orders", "--type=merge", "-p",
                  '{"spec": {"clusterRef": {"name": "other"}}}')
    assert r.returncode != 0 and "clusterRef is immutable" in r.stderr, r.stderr
    assert len(topic_partitions(env, "orders")) == 3


def test_kafka_api_topic_gets_a_topic_resource_and_deletion_removes_it(env):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap(env)})
    admin.create_topics([NewTopic("from.kafka_api", 2, 2)])["from.kafka_api"].result(30)
    t = wait_until(lambda: env.get("-n", NS, "get", "topic", "from-kafka-api"), 30,
                   "a Topic resource for the topic created through the Kafka API")
    assert t["spec"]["topicName"] == "from.kafka_api"
    assert t["spec"]["partitions"] == 2 and t["spec"]["replicationFactor"] == 2
    wait_until(lambda: len(topic_partitions(env, "from-kafka-api")) == 2, 30, "its partitions in status")

    env.k("-n", NS, "delete", "topic", "from-kafka-api", "--timeout=60s")
    wait_until(lambda: "from.kafka_api" not in admin.list_topics(timeout=10).topics, 30,
               "the topic gone from the cluster's metadata")
    time.sleep(12)  # the mirror's periodic pass must not bring the resource back
    assert env.k("-n", NS, "get", "topic", "from-kafka-api", "--ignore-not-found").strip() == ""


def test_pod_deletion_moves_leadership_visible_in_topic_status(env):
    before = {p["partition"]: p for p in topic_partitions(env, "orders")}
    victim = before[0]["leader"]
    pod = f"{CLUSTER}-{victim}"
    old_uid = env.get("-n", NS, "get", "pod", pod)["metadata"]["uid"]
    t0 = time.monotonic()
    env.k("-n", NS, "delete", "pod", pod, "--wait=false")
    after = wait_until(lambda: (lambda ps: ps if ps and ps[0]["leader"] not in (-1, victim) else None)(
        topic_partitions(env, "orders")), 60, f"partition 0 led by another broker than {victim}")
    moved_s = time.monotonic() - t0
    assert after[0]["leaderEpoch"] > before[0]["leaderEpoch"]
    for p in after:
        assert p["leader"] != victim
    print(f"leadership of orders-0 moved {victim} -> {after[0]['leader']} in {moved_s:.1f}s")
    def clean_elections():
        text = env.operator_metrics()
        for line in text.splitlines():
            if line.startswith("skein_operator_leader_elections_total{") and f'cluster="{CLUSTER}"' in line \
                    and 'kind="clean"' in line:
                return float(line.rsplit(" ", 1)[1])
        return 0.0
    try:
        wait_until(lambda: clean_elections() >= 1, 30, "the election counted in the operator's metrics")
    except AssertionError:
        text = env.operator_metrics()
        raise AssertionError("no clean election in the operator's metrics:\n" + "\n".join(
            line for line in text.splitlines() if line.startswith("skein_operator_")))
    # The StatefulSet recreates the pod (same PVC directory); the broker rejoins the ISR.
    wait_until(lambda: env.get("-n", NS, "get", "pod", pod)["metadata"]["uid"] != old_uid, 60,
               "the pod recreated")
    wait_until(lambda: all(len(p["isr"]) == 3 for p in topic_partitions(env, "orders")), 120,
               "every partition back to a full ISR")


def lose_volume(env, pod: str):
    """Deletes a broker pod together with its PersistentVolumeClaim, and waits
    until the StatefulSet has made a new, empty claim and the broker is back
    on it: what a lost disk looks like on Kubernetes. "Back" is the
    KafkaCluster status counting one more storage loss for the broker (the
    controller saw it register with a new, empty log directory); waiting for
    the claim alone returned while the old broker was still shutting down on
    the old volume, and its exit then came in the middle of the caller's
    next step."""
    cluster, broker = pod.rsplit("-", 1)

    def losses() -> int:
        kc = env.get("-n", NS, "get", "kafkacluster", cluster)
        return next((b.get("storageLosses", 0) for b in kc.get("status", {}).get("brokers", [])
                     if b["id"] == int(broker)), 0)
    losses_before = losses()
    spec = env.get("-n", NS, "get", "pod", pod)["spec"]
    claim = next(v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v)
    old_claim_uid = env.get("-n", NS, "get", "pvc", claim)["metadata"]["uid"]
    env.k("-n", NS, "delete", "pvc", claim, "--wait=false")  # held by pvc-protection until the pod is gone
    env.k("-n", NS, "delete", "pod", pod, "--wait=false")

    def new_claim():
        c = env.get("-n", NS, "get", "pvc", "--field-selector", f"metadata.name={claim}")["items"]
        if c and c[0]["metadata"]["uid"] != old_claim_uid and c[0]["status"].get("phase") == "Bound":
            return c[0]
        # A pod recreated before the old claim was gone waits for a claim that
        # is being deleted; deleting it again lets the StatefulSet make both anew.
        p = env.get("-n", NS, "get", "pods", "--field-selector", f"metadata.name={pod}")["items"]
        if p and p[0]["status"].get("phase") == "Pending" and not c:
            env.k("-n", NS, "delete", "pod", pod, "--wait=false")
        return None
    wait_until(new_claim, 120, f"a new claim {claim} bound for the recreated pod")
    wait_until(lambda: losses() > losses_before, 120,
               f"broker {broker} back on the new volume (KafkaCluster status counting its lost storage)")


def test_a_broker_on_a_new_volume_loses_no_acknowledged_record(env):
    """A pod whose PersistentVolumeClaim is deleted comes back on a new, empty
    volume (what a lost disk looks like on Kubernetes). The broker formats it
    with a new directory id; the controller sees another directory than the one
    its replicas lived on, takes them out of every ISR and never elects them,
    so the replicas with data are not truncated to nothing: every acknowledged
    record is still there, the replacement copies them back, and the
    KafkaCluster status and an Event say what happened."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    env.k("apply", "-f", "-", stdin=topic_yaml("durable", 3, 3))
    wait_until(lambda: (lambda ps: len(ps) == 3 and all(p["leader"] >= 0 and len(p["isr"]) == 3 for p in ps))(
        topic_partitions(env, "durable")), 90, "durable placed with a full ISR")
    prod = Producer({"bootstrap.servers": bootstrap(env), "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5})
    acked: list[bytes] = []
    failed: list[str] = []

    def report(err, msg):
        (failed.append(str(err)) if err else acked.append(msg.value()))
    for i in range(3000):
        prod.produce("durable", f"d-{i}".encode() + b"x" * 200, partition=i % 3, on_delivery=report)
        if i % 500 == 0:
            prod.poll(0)
    assert prod.flush(60) == 0 and not failed, failed[:3]
    assert len(acked) == 3000

    # The victim leads partition 0: the case in which an empty broker used to
    # be elected again and the replicas with data truncated to its empty log.
    parts = topic_partitions(env, "durable")
    victim = parts[0]["leader"]
    pod = f"{CLUSTER}-{victim}"
    losses_before = next((b.get("storageLosses", 0) for b in env.get("-n", NS, "get", "kafkacluster", CLUSTER)
                          ["status"]["brokers"] if b["id"] == victim), 0)
    lose_volume(env, pod)

    def status_broker():
        kc = env.get("-n", NS, "get", "kafkacluster", CLUSTER)
        return next((b for b in kc.get("status", {}).get("brokers", []) if b["id"] == victim), None)
    wait_until(lambda: (lambda b: b if b and b.get("storageLosses", 0) > losses_before else None)(status_broker()),
               120, f"KafkaCluster status counting broker {victim}'s lost storage")
    events = wait_until(lambda: [e for e in env.get("-n", NS, "get", "events", "--field-selector",
                                                   "reason=BrokerStorageLost")["items"]
                                 if f"broker {victim} " in e.get("message", "")], 60, "a BrokerStorageLost Event")
    print("event:", events[-1]["message"])
    # Back to a full ISR: the replacement copied everything back.
    wait_until(lambda: all(len(p["isr"]) == 3 for p in topic_partitions(env, "durable")), 180,
               "every partition of durable back to a full ISR")
    wait_until(lambda: (lambda b: b and b.get("replicasToRecover") is None)(status_broker()), 60,
               "replicasToRecover cleared once the broker is in sync")

    # Every acknowledged record is there once, read from the new leaders.
    cons = Consumer({"bootstrap.servers": bootstrap(env), "group.id": f"d-{uuid.uuid4().hex[:6]}",
                     "enable.auto.commit": False})
    cons.assign([TopicPartition("durable", p, 0) for p in range(3)])
    got = poll_values(cons, len(acked), 90)
    assert len(got) == len(acked) and sorted(got) == sorted(acked), \
        f"{len(got)} read back of {len(acked)} acknowledged"
    after = topic_partitions(env, "durable")
    print(f"broker {victim} on a new volume: {len(acked)} acknowledged records all read back; "
          f"partition 0 led by {after[0]['leader']} (epoch {parts[0]['leaderEpoch']} -> {after[0]['leaderEpoch']})")


class AcksAllWriter:
    """An idempotent acks=all producer in a thread, writing `<prefix>-<i>` round robin over
    `partitions` partitions of `topic` until `finish()`; what was acknowledged and what failed.
    `config`: more producer settings (security)."""

    def __init__(self, boot: str, topic: str, partitions: int, prefix: str, config: dict | None = None):
        self.acked: list[bytes] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._args = (boot, topic, partitions, prefix)
        self._config = config or {}
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        from confluent_kafka import Producer
        boot, topic, partitions, prefix = self._args
        p = Producer({"bootstrap.servers": boot, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                      "message.timeout.ms": 180000, "log_level": 2, **self._config})
        i = 0
        while not self._stop.is_set():
            p.produce(topic, f"{prefix}-{i}".encode(), partition=i % partitions,
                      on_delivery=lambda err, m: self.failed.append(str(err)) if err else self.acked.append(m.value()))
            p.poll(0)
            i += 1
            time.sleep(0.005)
        p.flush(180)

    def start(self):
        self._thread.start()

    def stop(self):
        """Asks it to stop (it flushes what is in flight)."""
        self._stop.set()

    def finish(self):
        """Stops and waits until everything in flight is acknowledged or failed."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(200)


def brokers_of_all_partitions(env) -> set[int]:
    """Every broker that holds a replica of an operator-visible topic."""
    out = set()
    for t in env.get("-n", NS, "get", "topics")["items"]:
        for p in t.get("status", {}).get("partitions", []):
            out.update(p["replicas"])
    return out


def all_in_sync(env) -> bool:
    parts = [p for t in env.get("-n", NS, "get", "topics")["items"] for p in t.get("status", {}).get("partitions", [])]
    return bool(parts) and all(sorted(p["isr"]) == sorted(p["replicas"]) and p["leader"] >= 0 for p in parts)


def scale(env, n: int):
    """`kubectl scale kafkacluster`: the scale subresource, as an HPA or KEDA drives it."""
    env.k("-n", NS, "scale", "kafkacluster", CLUSTER, f"--replicas={n}")


def test_scale_up_moves_replicas_onto_the_new_brokers(env):
    scale(env, 5)
    wait_until(lambda: len([b for b in env.get("-n", NS, "get", "kafkacluster", CLUSTER)["status"].get("brokers", [])
                            if b["ready"]]) == 5, 120, "5 brokers registered")
    wait_until(lambda: {3, 4} <= brokers_of_all_partitions(env), 120, "replicas moved onto brokers 3 and 4")
    wait_until(lambda: all_in_sync(env), 120, "every partition in sync after the moves")
    wait_until(lambda: cond(env.get("-n", NS, "get", "kafkacluster", CLUSTER), "Ready") == "True", 120,
               "KafkaCluster Ready=True at 5 brokers")
    assert env.get("-n", NS, "get", "statefulset", CLUSTER)["spec"]["replicas"] == 5
    # The scale subresource reports what an autoscaler reads: ready brokers and their selector.
    sc = env.get("-n", NS, "get", "kafkacluster", CLUSTER, "--subresource=scale")
    assert sc["spec"]["replicas"] == 5 and sc["status"]["replicas"] == 5, sc
    assert "app.kubernetes.io/instance=demo" in sc["status"]["selector"], sc


def test_scale_down_is_refused_while_a_topic_needs_the_brokers_then_drains(env):
    env.k("apply", "-f", "-", stdin=topic_yaml("wide", 1, 4))
    wait_until(lambda: len(topic_partitions(env, "wide")) == 1, 60, "topic 'wide' (replication factor 4) placed")
    scale(env, 3)
    kc = wait_until(lambda: (lambda o: o if cond(o, "Degraded") == "True" else None)(
        env.get("-n", NS, "get", "kafkacluster", CLUSTER)), 60, "the scale-down refused")
    deg = [c for c in kc["status"]["conditions"] if c["type"] == "Degraded"][0]
    assert deg["reason"] == "ReplicationFactorDoesNotFit", deg
    time.sleep(5)
    assert env.get("-n", NS, "get", "statefulset", CLUSTER)["spec"]["replicas"] == 5, "StatefulSet kept its size"
    assert {3, 4} <= brokers_of_all_partitions(env), "replicas stay where they are"

    env.k("-n", NS, "delete", "topic", "wide", "--timeout=60s")
    # Now it fits: replicas leave brokers 3 and 4 first, then the StatefulSet shrinks.
    wait_until(lambda: env.get("-n", NS, "get", "statefulset", CLUSTER)["spec"]["replicas"] == 3, 180,
               "the StatefulSet shrunk to 3")
    assert brokers_of_all_partitions(env) <= {0, 1, 2}, "no replica left on brokers 3 and 4 when it shrank"
    wait_until(lambda: all_in_sync(env), 120, "every partition in sync at 3 brokers")
    wait_until(lambda: cond(env.get("-n", NS, "get", "kafkacluster", CLUSTER), "Ready") == "True", 120,
               "KafkaCluster Ready=True at 3 brokers")


def rolled_since(env, first_rev: str | None, pods: int = 3) -> bool:
    """Whether the StatefulSet has a new update revision (not `first_rev`) and all `pods` broker
    pods run on it."""
    rev = env.get("-n", NS, "get", "statefulset", CLUSTER)["status"].get("updateRevision")
    items = env.get("-n", NS, "get", "pods", "-l", "app.kubernetes.io/name=skein")["items"]
    return rev != first_rev and len(items) == pods and all(
        p["metadata"]["labels"].get("controller-revision-hash") == rev for p in items)


def test_config_change_rolls_brokers_one_at_a_time_without_failed_writes(env):
    from confluent_kafka import Producer
    errors, acked = [], [0]
    stop = threading.Event()

    def produce():
        p = Producer({"bootstrap.servers": bootstrap(env), "acks": "all", "enable.idempotence": True,
                      "message.timeout.ms": 120000})

        def cb(err, _msg):
            if err:
                errors.append(str(err))
            else:
                acked[0] += 1
        i = 0
        while not stop.is_set():
            p.produce("orders", f"roll-{i}".encode(), on_delivery=cb)
            p.poll(0.02)
            i += 1
        p.flush(120)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    # Which pods come back as new pods (new UID), and in which order: their
    # creationTimestamp, read once the roll is over (a polling watcher missed
    # restarts when one kubectl call stalled on a loaded machine).
    first_uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in
                  env.get("-n", NS, "get", "pods", "-l", "app.kubernetes.io/name=skein")["items"]}
    # The revision before the change: until the operator has applied it, every
    # pod is on the update revision too, which must not count as rolled.
    first_rev = env.get("-n", NS, "get", "statefulset", CLUSTER)["status"].get("updateRevision")
    env.k("-n", NS, "patch", "kafkacluster", CLUSTER, "--type=merge", "-p",
          json.dumps({"spec": {"config": {"min.insync.replicas": "2", "log.retention.ms": "3600000"}}}))

    wait_until(lambda: rolled_since(env, first_rev), 300, "every pod on the new revision")
    # Ready again only once the last restarted broker registered again.
    wait_until(lambda: cond(env.get("-n", NS, "get", "kafkacluster", CLUSTER), "Ready") == "True", 120,
               "KafkaCluster Ready=True after the roll")
    wait_until(lambda: all_in_sync(env), 120, "every partition in sync after the roll")
    stop.set()
    t.join(150)
    pods = env.get("-n", NS, "get", "pods", "-l", "app.kubernetes.io/name=skein")["items"]
    recreated = sorted((p["metadata"]["creationTimestamp"], p["metadata"]["name"]) for p in pods
                       if p["metadata"]["uid"] != first_uids.get(p["metadata"]["name"]))
    # One at a time, highest ordinal first: each pod is created (a second or
    # more) after the previous one, since the next waits for it to rejoin.
    assert [n for _, n in recreated] == [f"{CLUSTER}-2", f"{CLUSTER}-1", f"{CLUSTER}-0"], recreated
    assert len({ts for ts, _ in recreated}) == 3, f"two pods recreated in the same second: {recreated}"
    assert acked[0] > 0 and not errors, f"{acked[0]} acked, errors: {errors[:5]}"
    print(f"rolling restart: {acked[0]} records acked (acks=all) during the roll, 0 errors")


def test_operator_failover_keeps_the_cluster_state(env):
    """Two operator replicas, one active through the Lease. Delete the active
    one: the standby takes the Lease, loads each cluster's controller image from
    its ConfigMap, and the topics and their placement are what they were."""
    before = env.get("-n", NS, "get", "topic", "orders")["status"]
    old = env.leader_pod()["metadata"]["name"]
    env.k("-n", OP_NS, "delete", "pod", old, "--wait=false")
    new = wait_until(lambda: (lambda p: p if p and p["metadata"]["name"] != old else None)(env.leader_pod()), 60,
                     "another operator replica holding the Lease")
    print(f"operator Lease moved {old} -> {new['metadata']['name']}")
    env.k("apply", "-f", "-", stdin=topic_yaml("after-restart", 2, 3))
    wait_until(lambda: (lambda ps: len(ps) == 2 and all(len(p["isr"]) == 3 for p in ps))(
        topic_partitions(env, "after-restart")), 90, "a topic created after the restart placed and in sync")
    after = env.get("-n", NS, "get", "topic", "orders")["status"]
    assert after["topicId"] == before["topicId"]
    assert [p["replicas"] for p in after["partitions"]] == [p["replicas"] for p in before["partitions"]]
    wait_until(lambda: all_in_sync(env), 60, "every partition in sync with the new operator")
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap(env)})
    # The status is the controller's; the brokers hear of the new topic once the new operator's
    # sessions to them are up (it dials them after taking the Lease), as Kafka's brokers learn a
    # topic after its controller commits it.
    wait_until(lambda: (lambda md: {"orders", "after-restart"} <= set(md.topics) and len(md.brokers) == 3)(
        admin.list_topics(timeout=10)), 60, "the brokers' metadata to name both topics and three brokers")


def test_deleting_the_cluster_stops_its_controller(env):
    """The operator runs a controller per KafkaCluster; deleting the cluster
    ends it (sessions, tasks, and its per-cluster metrics)."""
    def reported() -> bool:
        return any(line.startswith("skein_operator_brokers_alive{") and f'cluster="{CLUSTER}"' in line
                   and f'namespace="{NS}"' in line for line in env.operator_metrics().splitlines())
    wait_until(reported, 60, "the cluster's controller reporting its brokers")
    env.k("-n", NS, "delete", "kafkacluster", CLUSTER, "--wait=false")
    wait_until(lambda: not reported(), 60, "the deleted cluster's controller stopped (its metrics gone)")
    wait_until(lambda: env.k("-n", NS, "get", "statefulset", CLUSTER, "--ignore-not-found").strip() == "", 60,
               "the StatefulSet garbage-collected with the cluster")


def control_port_answer(host: str, server_name: str, ca_pem: str, keystore_pem: str | None) -> str:
    """What a client gets from a broker's control port (9192) at `host`, checking the broker's
    certificate against `ca_pem` for `server_name` and presenting `keystore_pem` (key and
    certificate; none when None): "session" when the TLS handshake is accepted and HTTP/2 answers
    its preface with SETTINGS, else why not."""
    import socket
    import ssl
    import tempfile
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cadata=ca_pem)
    ctx.set_alpn_protocols(["h2"])
    if keystore_pem:
        with tempfile.NamedTemporaryFile("w", suffix=".pem") as f:
            f.write(keystore_pem)
            f.flush()
            ctx.load_cert_chain(f.name)
    try:
        with socket.create_connection((host, 9192), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname=server_name) as s:
                # With TLS 1.3 the server judges the client's certificate after the client's side of
                # the handshake is done: its verdict comes on the first read.
                s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes.fromhex("000000040000000000"))
                answer = s.recv(9)
    except ssl.SSLError as e:
        return f"refused: {e}"
    except OSError as e:
        return f"closed: {e!r}"
    return "session" if len(answer) >= 4 and answer[3] == 4 else f"closed: {answer!r}"


def secret_text(env, name: str, key: str) -> str:
    return base64.b64decode(env.get("-n", NS, "get", "secret", name)["data"][key]).decode()


def first_certificate(pem: str) -> str:
    """The first certificate of a PEM text (a keystore holds the key first)."""
    begin = pem.index("-----BEGIN CERTIFICATE-----")
    end = pem.index("-----END CERTIFICATE-----", begin) + len("-----END CERTIFICATE-----")
    return pem[begin:end] + "\n"


def expires_in(pem: str) -> float:
    """Seconds until the first certificate of `pem` expires (openssl)."""
    import ssl
    r = subprocess.run(["openssl", "x509", "-noout", "-enddate"], input=first_certificate(pem),
                       capture_output=True, text=True, check=True)
    return ssl.cert_time_to_seconds(r.stdout.strip().split("=", 1)[1]) - time.time()


def foreign_controller_keystore(workdir: Path, ca_name: str) -> str:
    """A key and certificate with the controller's subject (CN=skein-controller) from a CA of
    the same name as the cluster's but another key (openssl)."""
    d = Path(workdir)
    d.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = lambda *a: subprocess.run(["openssl", *a], cwd=d, capture_output=True, check=True)  # noqa: E731
    subject = "/CN=" + ca_name.replace("/", "\\/")  # a "/" in -subj starts the next name part
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-subj", subject, "-days", "1")
    run("req", *ec, "-keyout", "c.key", "-out", "c.csr", "-subj", "/CN=skein-controller")
    (d / "ext").write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth,serverAuth\n")
    run("x509", "-req", "-in", "c.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "c.crt", "-days", "1", "-extfile", "ext")
    return (d / "c.key").read_text() + (d / "c.crt").read_text()


def test_control_plane_tls_is_always_on_and_the_control_port_takes_only_the_controller(env):
    """Issue #41: the control plane is mutual TLS on every cluster, whatever the deprecated
    spec.listeners.controlPlaneTls says (here `false`: ignored, with a Warning event). The operator
    makes the cluster's CA and certificates in two Secrets (the brokers' has no private key but
    their own; the certificates expire: 90 days, the CA ten years), the brokers require the
    controller's certificate on the control port, and the controller's sessions over it register
    the broker and place a topic. On a broker's control port a client without a certificate, one
    with the controller's subject from another CA and one with the brokers' own certificate (the
    right CA, not the controller) get no session; the controller's certificate does."""
    name = "secure"
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {name}
  namespace: {NS}
spec:
  replicas: 1
  storage:
    size: 1Gi
  listeners:
    controlPlaneTls: false
""")
    try:
        ca = wait_until(lambda: env.get("-n", NS, "get", "secret", f"{name}-control-ca"), 60, "the CA Secret")
        tls = env.get("-n", NS, "get", "secret", f"{name}-control-tls")
        assert sorted(ca["data"]) == ["ca.crt", "ca.key", "controller-keystore.pem"], sorted(ca["data"])
        assert sorted(tls["data"]) == ["broker-keystore.pem", "ca.crt"], sorted(tls["data"])
        assert ca["metadata"]["ownerReferences"][0]["name"] == name
        assert tls["data"]["ca.crt"] == ca["data"]["ca.crt"]
        ca_pem = secret_text(env, f"{name}-control-ca", "ca.crt")
        controller_pem = secret_text(env, f"{name}-control-ca", "controller-keystore.pem")
        broker_pem = secret_text(env, f"{name}-control-tls", "broker-keystore.pem")
        day = 86400
        if shutil.which("openssl"):
            assert 89 * day < expires_in(broker_pem) <= 90 * day, expires_in(broker_pem) / day
            assert 89 * day < expires_in(controller_pem) <= 90 * day
            assert 3649 * day < expires_in(ca_pem) <= 3650 * day
        sts = wait_until(lambda: env.get("-n", NS, "get", "statefulset", name), 60, "the StatefulSet")
        vols = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
        assert vols["control-tls"]["secret"]["secretName"] == f"{name}-control-tls", vols
        props = env.get("-n", NS, "get", "configmap", f"{name}-config")["data"]["server.properties"]
        assert "control.ssl.controller.subject=CN=skein-controller" in props, props
        wait_until(lambda: [e for e in env.get("-n", NS, "get", "events", "--field-selector",
                                               f"involvedObject.name={name},reason=ControlPlaneTlsIgnored")["items"]],
                   60, "a Warning event saying controlPlaneTls: false is ignored")
        # The broker registers: the controller's session reached it over mutual TLS.
        wait_until(lambda: any(b["ready"] for b in env.get("-n", NS, "get", "kafkacluster", name)
                               .get("status", {}).get("brokers", [])), 180, "the broker in session over TLS")
        env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: secure-events
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 2
  replicationFactor: 1
""")
        wait_until(lambda: (lambda ps: len(ps) == 2 and all(p["leader"] == 0 for p in ps))(
            topic_partitions(env, "secure-events")), 90, "partitions led by broker 0 (the controller's order)")
        if MODE == "local":
            # From this test (a client on the pod network, as any pod is): the pod's own address,
            # the certificate checked for the pod's DNS name against the cluster's control CA.
            host = env.get("-n", NS, "get", "pod", f"{name}-0")["status"]["podIP"]
            dns = f"{name}-0.{name}-brokers.{NS}.svc"
            answers = {
                "no certificate": control_port_answer(host, dns, ca_pem, None),
                "the controller's subject from another CA": control_port_answer(
                    host, dns, ca_pem, foreign_controller_keystore(env.workdir / "rogue-ca",
                                                                   f"skein control plane {NS}/{name}")),
                "the brokers' own certificate": control_port_answer(host, dns, ca_pem, broker_pem),
            }
            print("control port answers:", answers)
            assert not [who for who, a in answers.items() if a == "session"], answers
            assert "CERTIFICATE_REQUIRED" in answers["no certificate"].upper(), answers
            assert control_port_answer(host, dns, ca_pem, controller_pem) == "session"
            # Plaintext (an HTTP/2 preface without TLS) gets a TLS alert or a closed socket.
            import socket
            with socket.create_connection((host, 9192), timeout=10) as s:
                s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(9))
                try:
                    answer = s.recv(64)
                except (ConnectionResetError, socket.timeout):
                    answer = b""
            assert answer[:1] in (b"", b"\x15"), f"the control port answered plaintext HTTP/2: {answer!r}"
            # The controller's session survived the probes: the broker is still in it.
            assert any(b["ready"] for b in env.get("-n", NS, "get", "kafkacluster", name)["status"]["brokers"])
    finally:
        env.k("-n", NS, "delete", "topic", "secure-events", "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)


def broker_log(env, pod: str) -> str:
    """The whole log of broker pod `pod` (local mode: the pod runner's file)."""
    if MODE == "local":
        return env.runners[1].log_tail(pod, 1_000_000)
    return env.k("-n", NS, "logs", pod, check=False)


@pytest.mark.timeout(900)
def test_control_plane_certificates_renew_without_restarting_brokers(env):
    """The operator with control-plane certificates that live 60 s (the chart's
    certificates.controlPlaneCertificateSeconds; 300 s on a real cluster, whose kubelet takes up
    to a minute to update a Secret volume): it renews the brokers' and the controller's with a
    third left, twice; each time the pod runner updates the mounted Secret as a kubelet does and
    the broker serves the new certificate to the next TLS session, while its process, its pod and
    its controller session stay (no new session in its log), and a topic created after the
    renewals is placed. The controller's first certificate, expired by then, is refused."""
    lifetime, renewals = (60, 2) if MODE == "local" else (300, 1)
    name = "renew"

    def operator_with(seconds: str):
        p = env.leader_pod()
        envs = {e["name"]: e.get("value") for e in (p or {}).get("spec", {}).get("containers", [{}])[0].get("env", [])}
        return p if p and envs.get("SKEIN_CONTROL_CERT_SECONDS") == seconds else None

    env.helm_install("--set", f"certificates.controlPlaneCertificateSeconds={lifetime}", verb="upgrade")
    try:
        wait_until(lambda: operator_with(str(lifetime)), 180, f"an operator with {lifetime} s certificates leading")
        env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {name}
  namespace: {NS}
spec:
  replicas: 1
  storage:
    size: 1Gi
""")
        pod = f"{name}-0"
        wait_until(lambda: any(b["ready"] for b in env.get("-n", NS, "get", "kafkacluster", name)
                               .get("status", {}).get("brokers", [])), 180, "the broker in session")
        uid = env.get("-n", NS, "get", "pod", pod)["metadata"]["uid"]
        pid = env.runners[1].pid_of(pod) if MODE == "local" else None
        ca_pem = secret_text(env, f"{name}-control-ca", "ca.crt")
        # Certificates that outlive the operator's lifetime (made by the previous leader) are issued
        # again at once: wait for one of this lifetime.
        first = wait_until(lambda: (lambda ks: ks if expires_in(ks) <= lifetime else None)(
            secret_text(env, f"{name}-control-tls", "broker-keystore.pem")), 60, f"a {lifetime} s certificate")
        first_controller = secret_text(env, f"{name}-control-ca", "controller-keystore.pem")
        host = env.get("-n", NS, "get", "pod", pod)["status"]["podIP"] if MODE == "local" else None
        dns = f"{pod}.{name}-brokers.{NS}.svc"

        def served() -> str | None:
            import socket
            import ssl
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.load_verify_locations(cadata=ca_pem)
            ctx.set_alpn_protocols(["h2"])
            with socket.create_connection((host, 9192), timeout=10) as raw:
                with ctx.wrap_socket(raw, server_hostname=dns) as s:
                    return ssl.DER_cert_to_PEM_cert(s.getpeercert(binary_form=True))

        def same(a: str, b: str) -> bool:
            return "".join(first_certificate(a).split()) == "".join(first_certificate(b).split())

        sessions = broker_log(env, pod).count("controller session opened")
        assert sessions >= 1
        current = first
        for n in range(renewals):
            renewed = wait_until(lambda: (lambda ks: ks if not same(ks, current) else None)(
                secret_text(env, f"{name}-control-tls", "broker-keystore.pem")), lifetime + 30,
                f"renewal {n + 1} of the brokers' certificate in its Secret")
            left = expires_in(current)
            assert 0 < left <= lifetime / 3 + 5, f"renewed with {left:.0f} s of {lifetime} left"
            if MODE == "local":
                wait_until(lambda: same(served() or "", renewed), 30, f"the broker serving renewal {n + 1}")
            current = renewed
        # Nothing restarted, no session ended.
        assert env.get("-n", NS, "get", "pod", pod)["metadata"]["uid"] == uid, "the broker pod was replaced"
        if MODE == "local":
            assert env.runners[1].pid_of(pod) == pid, "the broker process was restarted"
        assert broker_log(env, pod).count("controller session opened") == sessions, \
            "the controller's session was opened again"
        controller = secret_text(env, f"{name}-control-ca", "controller-keystore.pem")
        assert not same(controller, first_controller), "the controller's certificate was not renewed"
        if MODE == "local":
            assert control_port_answer(host, dns, ca_pem, controller) == "session"
            if renewals > 1:
                assert expires_in(first_controller) < 0
                expired = control_port_answer(host, dns, ca_pem, first_controller)
                assert expired != "session" and "EXPIRED" in expired.upper(), expired
        env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: renewed-events
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 1
  replicationFactor: 1
""")
        wait_until(lambda: (lambda ps: len(ps) == 1 and ps[0]["leader"] == 0)(
            topic_partitions(env, "renewed-events")), 90, "a topic placed after the renewals")
    finally:
        env.k("-n", NS, "delete", "topic", "renewed-events", "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)
        env.helm_install(verb="upgrade")
        wait_until(lambda: operator_with(str(90 * 86400)), 180, "the operator with 90-day certificates leading")


def test_kafka_user_gets_a_secret_credential_acls_and_is_locked_out_when_deleted(env):
    """A KafkaUser with SCRAM-SHA-512, ACLs on one topic and a group prefix, and a quota: the
    operator writes the password and a JAAS line into a Secret and the salted credential, ACLs and
    quota through the cluster's controller. confluent-kafka logs in with the Secret's password,
    produces and consumes where the ACLs allow and is denied elsewhere; its produce rate is held
    to the quota (measured, with throttle times in the answers); an ACL added to the spec
    takes effect; deleting the KafkaUser locks the user out. (The cluster's one listener is made
    SASL_PLAINTEXT with Kafka's own keys in spec.config; one broker, so no replication login.)"""
    from confluent_kafka import Consumer, KafkaError, Producer

    name = "users"
    quota = 131072  # producerByteRate, bytes/s
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {name}
  namespace: {NS}
spec:
  replicas: 1
  storage:
    size: 1Gi
  config:
    listener.security.protocol.map: "PLAINTEXT:SASL_PLAINTEXT"
    sasl.enabled.mechanisms: SCRAM-SHA-512
    # A broker's own login for replication is required on a SASL inter-broker listener (as in
    # Kafka); with one broker it is never used.
    sasl.mechanism.inter.broker.protocol: SCRAM-SHA-512
    listener.name.plaintext.scram-sha-512.sasl.jaas.config: >-
      org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="unused";
    authorizer.class.name: org.apache.kafka.metadata.authorizer.StandardAuthorizer
---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: granted
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 1
  replicationFactor: 1
---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: forbidden
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 1
  replicationFactor: 1
""")

    def user_yaml(extra_acl: str = "") -> str:
        return f"""apiVersion: skein.dev/v1alpha1
kind: KafkaUser
metadata:
  name: alice
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  authentication:
    type: scram-sha-512
  authorization:
    acls:
      - resource: {{type: topic, name: granted}}
        operations: [Write, Read, Describe]
      - resource: {{type: group, name: alice-, patternType: prefix}}
        operations: [Read]{extra_acl}
  quotas:
    producerByteRate: {quota}
"""

    boot = f"{name}-0.{name}-brokers.{NS}.svc:9092"

    def conf(password: str) -> dict:
        return {"bootstrap.servers": boot, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": password,
                "log_level": 2}  # the refused logins are expected: no log line per retry

    def produce(topic: str, password: str, n: int = 20) -> list[str]:
        """Errors of n deliveries (empty: all acknowledged)."""
        errors: list[str] = []
        auth_errors: list[str] = []
        p = Producer({**conf(password), "message.timeout.ms": 15000,
                      "error_cb": lambda e: auth_errors.append(e.name())
                      if e.code() == KafkaError._AUTHENTICATION else None})
        for i in range(n):
            p.produce(topic, f"{topic}-{i}".encode(),
                      on_delivery=lambda err, _m: errors.append(err.name()) if err else None)
        p.flush(30)
        return auth_errors + errors

    try:
        env.k("apply", "-f", "-", stdin=user_yaml())
        wait_until(lambda: any(b["ready"] for b in env.get("-n", NS, "get", "kafkacluster", name)
                               .get("status", {}).get("brokers", [])), 180, "the broker registered")
        user = ready(env, "kafkauser", "alice", 90, "KafkaUser Ready=True")
        st = user["status"]
        assert st["principal"] == "User:alice" and st["secret"] == "alice" and st["mechanism"] == "SCRAM-SHA-512", st
        assert len(st["acls"]) == 4 and st["quotas"] == ["producer_byte_rate"], st
        secret = env.get("-n", NS, "get", "secret", "alice")
        data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
        password = data["password"]
        assert len(password) == 32 and data["username"] == "alice", sorted(data)
        assert data["sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                            f'username="alice" password="{password}";')
        assert secret["metadata"]["ownerReferences"][0]["kind"] == "KafkaUser"
        wait_until(lambda: cond(env.get("-n", NS, "get", "topic", "granted"), "Ready") == "True", 90,
                   "Topic granted Ready")
        # The broker learns the credential and ACLs from the controller's view.
        wait_until(lambda: produce("granted", password) == [], 60, "alice producing to granted")
        # The quota holds: 3 MiB sent as fast as alice can takes what producerByteRate allows
        # beyond the quota's first window (Kafka's: 11 one-second samples), and the broker tells
        # the client to back off (its responses carry a throttle time).
        throttled: list[float] = []
        qp = Producer({**conf(password), "linger.ms": 5, "batch.size": 65536,
                       "throttle_cb": lambda ev: throttled.append(ev.throttle_time)})
        payload = b"q" * 16384
        t0 = time.monotonic()
        for _ in range(192):
            qp.produce("granted", payload)
            qp.poll(0)
        assert qp.flush(120) == 0
        took = time.monotonic() - t0
        sent = 192 * len(payload)
        assert took >= (sent - 11 * quota) / quota * 0.8, \
            f"{sent} bytes in {took:.1f} s: faster than the {quota} B/s quota allows"
        assert any(t > 0 for t in throttled), f"no throttle time reported: {throttled[:5]}"
        print(f"KafkaUser quota: {sent} bytes in {took:.1f} s under producerByteRate {quota} "
              f"({(sent - 11 * quota) / took:.0f} B/s beyond the first window), "
              f"{sum(t > 0 for t in throttled)} throttled responses")
        cons = Consumer({**conf(password), "group.id": "alice-readers", "auto.offset.reset": "earliest"})
        cons.subscribe(["granted"])
        got = poll_values(cons, 20, 60)
        assert len(got) >= 20, f"alice read {len(got)} records as group alice-readers"
        denied = produce("forbidden", password, 3)
        assert denied and all(e == "TOPIC_AUTHORIZATION_FAILED" for e in denied), denied
        wrong = produce("granted", password + "x", 1)
        assert "_AUTHENTICATION" in wrong, wrong
        # An ACL added to the spec reaches the brokers.
        env.k("apply", "-f", "-", stdin=user_yaml("""
      - resource: {type: topic, name: forbidden}
        operations: [Write]"""))
        wait_until(lambda: produce("forbidden", password, 3) == [], 60, "alice producing to forbidden once allowed")
        # The password survives a reconcile (it is read back from the Secret, not regenerated).
        again = base64.b64decode(env.get("-n", NS, "get", "secret", "alice")["data"]["password"]).decode()
        assert again == password
        env.k("-n", NS, "delete", "kafkauser", "alice", "--timeout=60s")
        wait_until(lambda: "_AUTHENTICATION" in produce("granted", password, 1), 60,
                   "alice locked out after the KafkaUser was deleted")
        wait_until(lambda: env.k("-n", NS, "get", "secret", "alice", "--ignore-not-found").strip() == "", 60,
                   "the user's Secret garbage-collected")
    finally:
        env.k("-n", NS, "delete", "kafkauser", "alice", "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "topic", "granted", "forbidden", "--ignore-not-found", "--timeout=60s",
              check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)


def test_delegation_tokens_with_the_key_the_operator_keeps(env, tmp_path):
    """spec.delegationTokens.enabled: the operator makes the Secret `<cluster>-delegation-token-key`
    (owned by the cluster) and the broker reads the key from it through its environment (never the
    ConfigMap). A KafkaUser's SCRAM login creates a token with Kafka's `kafka-delegation-tokens`
    (a new cluster starts at the highest skein.version, 5, past the 4 tokens need); its HMAC is HMAC-SHA512 of the id
    under the Secret's key, and Kafka's TopicCommand logs in with the token (tokenauth=true)."""
    import hashlib
    import hmac
    import re

    name = "tokens"
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {name}
  namespace: {NS}
spec:
  replicas: 1
  storage:
    size: 1Gi
  delegationTokens:
    enabled: true
  config:
    listener.security.protocol.map: "PLAINTEXT:SASL_PLAINTEXT"
    sasl.enabled.mechanisms: SCRAM-SHA-512
    sasl.mechanism.inter.broker.protocol: SCRAM-SHA-512
    listener.name.plaintext.scram-sha-512.sasl.jaas.config: >-
      org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="unused";
---
apiVersion: skein.dev/v1alpha1
kind: KafkaUser
metadata:
  name: tokenowner
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  authentication:
    type: scram-sha-512
""")
    boot = f"{name}-0.{name}-brokers.{NS}.svc:9092"
    jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required"

    def props(file: str, user: str, password: str, token: bool = False) -> Path:
        p = tmp_path / file
        extension = ' tokenauth="true"' if token else ""
        p.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                     f'sasl.jaas.config={jaas} username="{user}" password="{password}"{extension};\n')
        return p

    try:
        wait_until(lambda: env.k("-n", NS, "get", "secret", f"{name}-delegation-token-key",
                                 "--ignore-not-found").strip() != "", 120, "the delegation token key Secret")
        secret = env.get("-n", NS, "get", "secret", f"{name}-delegation-token-key")
        assert secret["metadata"]["ownerReferences"][0]["kind"] == "KafkaCluster", secret["metadata"]
        key = base64.b64decode(secret["data"]["secret-key"]).decode()
        assert re.fullmatch(r"[0-9a-f]{64}", key), "32 random bytes in hex"
        config_map = json.dumps(env.get("-n", NS, "get", "configmap", f"{name}-config"))
        assert key not in config_map and "delegation.token.secret.key" not in config_map
        wait_until(lambda: any(b["ready"] for b in env.get("-n", NS, "get", "kafkacluster", name)
                               .get("status", {}).get("brokers", [])), 180, "the broker registered")
        ready(env, "kafkauser", "tokenowner", 90, "KafkaUser Ready=True")
        password = base64.b64decode(env.get("-n", NS, "get", "secret", "tokenowner")["data"]["password"]).decode()
        owner = props("owner.properties", "tokenowner", password)

        def create():
            return kafka_tool("org.apache.kafka.tools.DelegationTokenCommand", "--bootstrap-server", boot,
                              "--command-config", str(owner), "--create", "--max-life-time-period", "-1",
                              check=False)
        wait_until(lambda: create().returncode == 0, 90, "a token created as the KafkaUser")
        out = create().stdout.decode()
        m = re.search(r"^Created delegation token with tokenId : (\S+)$", out, re.M)
        assert m, out
        token_id = m.group(1)
        row = next(line.split() for line in out.splitlines() if line.startswith(token_id + " "))
        token_hmac = row[1]
        assert row[2] == "User:tokenowner", row
        expected = base64.b64encode(hmac.new(key.encode(), token_id.encode(), hashlib.sha512).digest()).decode()
        assert token_hmac == expected, "the HMAC is made with the Secret's key"
        listed = kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", boot, "--command-config",
                            str(props("token.properties", token_id, token_hmac, token=True)), "--list",
                            check=False)
        assert listed.returncode == 0, listed.stderr.decode()[-2000:]
        wrong = kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", boot, "--command-config",
                           str(props("wrong.properties", token_id, expected[:-4] + "AAA=", token=True)),
                           "--list", check=False)
        assert wrong.returncode != 0 and "SaslAuthenticationException" in wrong.stderr.decode(), \
            wrong.stderr.decode()[-2000:]
    finally:
        env.k("-n", NS, "delete", "kafkauser", "tokenowner", "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)


def user_condition(env, name: str) -> dict | None:
    """The Ready condition of KafkaUser `name` once it has one."""
    for c in env.get("-n", NS, "get", "kafkauser", name).get("status", {}).get("conditions", []):
        if c["type"] == "Ready":
            return c
    return None


def metadata_records(env, cluster: str) -> tuple[dict, list[dict]]:
    """The head of `cluster`'s metadata log and every record of it (blobs in the head's order,
    then the head's inline tail)."""
    head = json.loads(env.get("-n", NS, "get", "configmap", f"{cluster}-controller")["data"]["head.json"])
    records = []
    for blob in head["snapshot"] + head["log"]:
        text = env.get("-n", NS, "get", "configmap", f"{cluster}-controller-{blob}")["data"]["records.jsonl"]
        records += [json.loads(line) for line in text.splitlines() if line]
    return head, records + head["tail"]


def test_scram_verifiers_are_sealed_at_feature_level_3(env):
    """Issue #41: a namespace's `view` role reads ConfigMaps, so the metadata log must not show a
    SCRAM verifier there. A new cluster starts at the operator's highest level (sealed from the
    first record) unless its spec names a lower one: this one starts at `spec.featureLevel: 1`, so
    a SCRAM KafkaUser's verifier is written plain (as the previous release reads it) until
    `spec.featureLevel: 3` is finalized; then no ConfigMap of the namespace holds the
    user's salt, stored key or server key (as the log writes them, base64, hex or raw), the key
    lives in the Secret `<cluster>-controller-key` (owned by the cluster), the user still logs in,
    and after an operator failover the new operator opens the sealed log with that key: a user
    made afterwards logs in too."""
    from confluent_kafka import KafkaError, Producer

    name = "sealed"
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {name}
  namespace: {NS}
spec:
  replicas: 1
  featureLevel: 1
  storage:
    size: 1Gi
  config:
    listener.security.protocol.map: "PLAINTEXT:SASL_PLAINTEXT"
    sasl.enabled.mechanisms: SCRAM-SHA-512
    sasl.mechanism.inter.broker.protocol: SCRAM-SHA-512
    listener.name.plaintext.scram-sha-512.sasl.jaas.config: >-
      org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="unused";
---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: sealed-t
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 1
  replicationFactor: 1
""")

    def user_yaml(user: str) -> str:
        return f"""apiVersion: skein.dev/v1alpha1
kind: KafkaUser
metadata:
  name: {user}
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  authentication:
    type: scram-sha-512
"""

    boot = f"{name}-0.{name}-brokers.{NS}.svc:9092"

    def password_of(user: str) -> str:
        return base64.b64decode(env.get("-n", NS, "get", "secret", user)["data"]["password"]).decode()

    def produce(user: str, password: str) -> list[str]:
        errors: list[str] = []
        p = Producer({"bootstrap.servers": boot, "security.protocol": "SASL_PLAINTEXT",
                      "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
                      "log_level": 2, "message.timeout.ms": 15000,
                      "error_cb": lambda e: errors.append(e.name()) if e.code() == KafkaError._AUTHENTICATION
                      else None})
        p.produce("sealed-t", b"x", on_delivery=lambda err, _m: errors.append(err.name()) if err else None)
        p.flush(30)
        return errors

    def verifier_texts(cred: dict) -> list[str]:
        """Every way the credential's secret bytes could show in a ConfigMap's text."""
        out = []
        for field in ("salt", "stored_key", "server_key"):
            raw = bytes(cred[field])
            out += [json.dumps(cred[field], separators=(",", ":")), base64.b64encode(raw).decode(),
                    raw.hex(), raw.decode("latin-1")]
        return out

    def showing(needles: list[str]) -> list[str]:
        """The ConfigMaps of the namespace whose data shows any of `needles`."""
        found = []
        for cm in env.get("-n", NS, "get", "configmaps")["items"]:
            text = "\n".join((cm.get("data") or {}).values())
            if any(n in text for n in needles):
                found.append(cm["metadata"]["name"])
        return found

    try:
        env.k("apply", "-f", "-", stdin=user_yaml("alice"))
        wait_until(lambda: any(b["ready"] for b in env.get("-n", NS, "get", "kafkacluster", name)
                               .get("status", {}).get("brokers", [])), 180, "the broker registered")
        ready(env, "kafkauser", "alice", 90, "KafkaUser alice Ready=True")
        alice = password_of("alice")
        wait_until(lambda: produce("alice", alice) == [], 60, "alice producing")

        key = env.get("-n", NS, "get", "secret", f"{name}-controller-key")
        assert len(base64.b64decode(key["data"]["key"])) == 32, sorted(key["data"])
        owner = key["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("KafkaCluster", name), owner

        # Below level 3 the verifier is in the log in the clear: this is what the test looks for.
        head, records = metadata_records(env, name)
        plain = [r for r in records if r["type"] == "scram_user" and r["user"] == "alice" and r["credentials"]]
        assert plain, [r["type"] for r in records]
        needles = verifier_texts(plain[-1]["credentials"]["SCRAM-SHA-512"])
        assert showing(needles), "the plain verifier is not where the test looks"
        assert head["version"] <= 2, head["version"]

        env.k("-n", NS, "patch", "kafkacluster", name, "--type=merge", "-p", json.dumps({"spec": {"featureLevel": 3}}))
        wait_until(lambda: env.get("-n", NS, "get", "kafkacluster", name).get("status", {}).get("featureLevel") == 3,
                   90, "status.featureLevel 3")
        wait_until(lambda: showing(needles) == [], 30, "no ConfigMap showing alice's verifier")
        head, records = metadata_records(env, name)
        assert head["version"] == 3, head["version"]
        sealed = [r for r in records if r["type"] == "sealed_scram_user"]
        assert [r["user"] for r in sealed] == ["alice"], sealed
        assert not [r for r in records if r["type"] == "scram_user" and r["credentials"]], records
        assert produce("alice", alice) == [], "alice logs in with her sealed credentials"

        # A new operator opens the sealed log with the key Secret: it starts the cluster's
        # controller and writes a new user's credentials, sealed.
        old = env.leader_pod()["metadata"]["name"]
        env.k("-n", OP_NS, "delete", "pod", old, "--wait=false")
        wait_until(lambda: (lambda p: p if p and p["metadata"]["name"] != old else None)(env.leader_pod()), 60,
                   "another operator replica holding the Lease")
        env.k("apply", "-f", "-", stdin=user_yaml("bob"))
        ready(env, "kafkauser", "bob", 90, "KafkaUser bob Ready=True after the failover")
        bob = password_of("bob")
        wait_until(lambda: produce("bob", bob) == [], 60, "bob producing")
        assert produce("alice", alice) == []
        head, records = metadata_records(env, name)
        assert sorted(r["user"] for r in records if r["type"] == "sealed_scram_user") == ["alice", "bob"], records
        assert not [r for r in records if r["type"] == "scram_user" and r["credentials"]], records
        conds = env.get("-n", NS, "get", "kafkacluster", name)["status"]["conditions"]
        assert not [c for c in conds if c["reason"] == "MetadataKeyUnusable"], conds
    finally:
        env.k("-n", NS, "delete", "kafkauser", "alice", "bob", "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "topic", "sealed-t", "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)


def test_a_kafka_user_never_writes_a_secret_it_did_not_make(env):
    """Issue #41: a KafkaUser's Secret is named like the KafkaUser, and the operator writes it only
    while it is absent or that KafkaUser's. A KafkaUser named after the cluster CA's Secret, one
    named like an application's Secret, a `tls` user taking the brokers' principal and one whose
    password.valueFrom names the CA's key are each refused with a condition saying why; the CA
    Secret and the application's keep their data, version and owners, nothing is written for the
    refused users, and deleting them (garbage collection) takes neither Secret."""
    name = "owned"
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {name}
  namespace: {NS}
spec:
  replicas: 1
  storage:
    size: 1Gi
  listeners:
    clients:
      - name: secure
        port: 9093
        type: internal
        tls: true
""")
    env.k("-n", NS, "create", "secret", "generic", "app-settings", "--from-literal=password=db-secret")

    def kafka_user(user: str, spec: str) -> str:
        return f"""apiVersion: skein.dev/v1alpha1
kind: KafkaUser
metadata:
  name: {user}
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
{spec}
---
"""
    scram = "  authentication:\n    type: scram-sha-512"
    users = {
        f"{name}-cluster-ca": (scram, "ReservedSecretName", f"{name}-cluster-ca"),
        "app-settings": (scram, "SecretOwnedByAnother", "Secret app-settings"),
        "replicator": ("  userName: skein-broker\n  authentication:\n    type: tls", "ReservedUserName",
                       "skein-broker"),
        "thief": (scram + f"""
    password:
      valueFrom:
        secretKeyRef: {{name: {name}-cluster-ca, key: ca.key}}""", "PasswordSecretNotAllowed",
                  f"{name}-cluster-ca"),
    }
    try:
        # A Secret the operator makes appears whole (created with its data,
        # never as an empty skeleton first).
        ca = wait_until(lambda: env.get("-n", NS, "get", "secret", f"{name}-cluster-ca"), 90, "the cluster CA Secret")
        assert ca.get("data", {}).get("ca.crt"), ca["metadata"]
        app = env.get("-n", NS, "get", "secret", "app-settings")
        env.k("apply", "-f", "-", stdin="".join(kafka_user(u, spec) for u, (spec, _, _) in users.items()))
        for user, (_, reason, says) in users.items():
            c = wait_until(lambda: (lambda c: c if c and c["status"] == "False" else None)(user_condition(env, user)),
                           60, f"KafkaUser {user} refused")
            assert c["reason"] == reason and says in c["message"], (user, c)
        # Past the first look: a reconcile a while later changes nothing either.
        time.sleep(5)
        for before in (ca, app):
            now = env.get("-n", NS, "get", "secret", before["metadata"]["name"])
            assert now["data"] == before["data"], before["metadata"]["name"]
            assert now["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], now["metadata"]
            assert now["metadata"].get("ownerReferences") == before["metadata"].get("ownerReferences"), now["metadata"]
        assert [o["kind"] for o in ca["metadata"]["ownerReferences"]] == ["KafkaCluster"]
        assert env.k("-n", NS, "get", "secret", "thief", "replicator", "--ignore-not-found").strip() == "", \
            "nothing is written for a refused user"
        env.k("-n", NS, "delete", "kafkauser", *users, "--timeout=90s")
        time.sleep(3)  # the garbage collector would act on an owner reference at once
        assert env.get("-n", NS, "get", "secret", f"{name}-cluster-ca")["data"] == ca["data"]
        assert env.get("-n", NS, "get", "secret", "app-settings")["data"] == app["data"]
    finally:
        env.k("-n", NS, "delete", "kafkauser", *users, "--ignore-not-found", "--timeout=90s", check=False)
        env.k("-n", NS, "delete", "secret", "app-settings", "--ignore-not-found", check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)


def java_console_tools(boot: str, props: Path, jaas: str, ca: Path):
    """Ten records through Kafka's Java console producer and back through its consumer, as a SCRAM
    user over TLS with the cluster CA as a PEM truststore."""
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                     f"sasl.jaas.config={jaas}\nssl.truststore.type=PEM\nssl.truststore.location={ca}\n")
    lines = "".join(f"java-{i}\n" for i in range(10)).encode()
    kafka_tool("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", boot, "--topic", "edge-granted",
               "--command-config", str(props), "--command-property", "acks=all", input=lines)
    r = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", boot,
                   "--topic", "edge-granted", "--command-config", str(props), "--group", "bob-java",
                   "--from-beginning", "--max-messages", "30", "--timeout-ms", "30000")
    read = r.stdout.decode().split()
    assert all(f"java-{i}" in read for i in range(10)), read


def test_client_listeners_nodeport_tls_and_scram_from_outside(env, tmp_path):
    """spec.listeners.clients: an internal TLS + SCRAM listener and an external nodeport TLS + SCRAM
    one on two brokers. The operator makes the cluster CA and the brokers' certificate (with the
    nodes' addresses), a NodePort Service per broker and a bootstrap one; each broker advertises
    its node's address and its own node port, and status.listeners gives the external bootstrap.
    A KafkaUser's SCRAM Secret and the CA from <cluster>-cluster-ca-cert are all a confluent-kafka
    client outside the pod network needs: it produces and consumes through the node ports
    (hostname verification on), is denied on a topic its ACLs do not grant, a wrong password is
    refused, and a plaintext client gets nothing from the TLS listener. (The node ports are served
    by the pod runner standing in for kube-proxy. With TLS listeners the brokers replicate over
    mutual TLS by default, as the operator's own super user. Nobody else is a super user: the
    operator deletes topics through the cluster's controller, not the Kafka protocol, so the
    Topics' finalizers complete without ACLs for it.)"""
    from confluent_kafka import Consumer, KafkaError, Producer
    from confluent_kafka.admin import AdminClient

    name = "edge"
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {name}
  namespace: {NS}
spec:
  replicas: 2
  storage:
    size: 1Gi
  listeners:
    clients:
      - name: secure
        port: 9093
        type: internal
        tls: true
        authentication:
          type: scram-sha-512
      - name: external
        port: 9094
        type: nodeport
        tls: true
        authentication:
          type: scram-sha-512
      - name: mtls
        port: 9095
        type: internal
        tls: true
        authentication:
          type: tls
  config:
    authorizer.class.name: org.apache.kafka.metadata.authorizer.StandardAuthorizer
---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: edge-granted
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 2
  replicationFactor: 2
---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: edge-forbidden
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 1
  replicationFactor: 1
---
apiVersion: skein.dev/v1alpha1
kind: KafkaUser
metadata:
  name: bob
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  authentication:
    type: scram-sha-512
  authorization:
    acls:
      - resource: {{type: topic, name: edge-granted}}
        operations: [Write, Read, Describe]
      - resource: {{type: group, name: bob-, patternType: prefix}}
        operations: [Read]
---
apiVersion: skein.dev/v1alpha1
kind: KafkaUser
metadata:
  name: carol
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  authentication:
    type: tls
  authorization:
    acls:
      - resource: {{type: topic, name: edge-granted}}
        operations: [Write, Describe]
""")
    try:
        def external():
            kc = env.get("-n", NS, "get", "kafkacluster", name)
            ls = {lst["name"]: lst for lst in kc.get("status", {}).get("listeners", [])}
            ext = ls.get("external", {})
            return ls if ext.get("bootstrap") else None
        listeners = wait_until(external, 180, "status.listeners with the external bootstrap")
        assert listeners["external"]["securityProtocol"] == "SASL_SSL", listeners
        assert listeners["secure"]["bootstrap"] == f"{name}-bootstrap.{NS}.svc:9093", listeners
        boot = listeners["external"]["bootstrap"]
        if MODE == "local":
            assert boot.startswith("127.0.0.1:"), boot  # kwok's node address, the bootstrap node port
        # The chart's default networkPolicy.enabled: the control port only from the operator's
        # pods, the plaintext port only from the brokers (the operator speaks no Kafka), the client
        # listeners open (no networkPolicyPeers). Not enforced here (no network plugin).
        np = env.get("-n", NS, "get", "networkpolicy", f"{name}-brokers")
        rules = {r["ports"][0]["port"]: r.get("from", []) for r in np["spec"]["ingress"]}
        assert sorted(rules) == [9091, 9092, 9093, 9094, 9095, 9192, 9644], rules
        assert [p["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] for p in rules[9091]] == [name], rules
        # TLS listeners: replication over mutual TLS by default.
        props = env.get("-n", NS, "get", "configmap", f"{name}-config")["data"]["server.properties"]
        assert "inter.broker.listener.name=REPLICATION\n" in props, props
        assert [p["podSelector"]["matchLabels"]["app.kubernetes.io/name"] for p in rules[9192]] == ["skein-operator"]
        assert [p["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] for p in rules[9092]] == [name], rules
        assert rules[9094] == [] and rules[9644] == [], rules
        svcs = {s["metadata"]["name"]: s for s in env.get("-n", NS, "get", "services")["items"]}
        node_ports = {i: svcs[f"{name}-external-{i}"]["spec"]["ports"][0]["nodePort"] for i in (0, 1)}
        assert svcs[f"{name}-external-bootstrap"]["spec"]["type"] == "NodePort"
        assert svcs[f"{name}-external-0"]["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] == f"{name}-0"

        # The brokers' certificate names the node address clients connect to.
        tls = env.get("-n", NS, "get", "secret", f"{name}-listener-tls")
        sans = tls["metadata"]["annotations"]["skein.dev/subject-alternative-names"].split(",")
        host = boot.split(",")[0].rsplit(":", 1)[0]
        assert host in sans and f"*.{name}-brokers.{NS}.svc" in sans, sans
        ca = tmp_path / "ca.crt"
        ca.write_bytes(base64.b64decode(env.get("-n", NS, "get", "secret", f"{name}-cluster-ca-cert")["data"]["ca.crt"]))
        cm = env.get("-n", NS, "get", "configmap", f"{name}-cluster-ca-cert")
        assert cm["data"]["ca.crt"] == ca.read_text()
        user = ready(env, "kafkauser", "bob", 120, "KafkaUser bob Ready=True")
        password = base64.b64decode(env.get("-n", NS, "get", "secret", user["status"]["secret"])["data"]["password"]).decode()

        def conf(pw: str) -> dict:
            return {"bootstrap.servers": boot, "security.protocol": "SASL_SSL", "ssl.ca.location": str(ca),
                    "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": pw,
                    "log_level": 2}

        def produce(topic: str, pw: str, n: int = 20) -> list[str]:
            errors: list[str] = []
            p = Producer({**conf(pw), "acks": "all", "message.timeout.ms": 15000,
                          "error_cb": lambda e: errors.append(e.name())
                          if e.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL) else None})
            for i in range(n):
                p.produce(topic, f"{topic}-{i}".encode(), partition=i % 2 if topic == "edge-granted" else 0,
                          on_delivery=lambda err, _m: errors.append(err.name()) if err else None)
            p.flush(30)
            return errors

        for t in ("edge-granted", "edge-forbidden"):
            wait_until(lambda: cond(env.get("-n", NS, "get", "topic", t), "Ready") == "True", 120, f"Topic {t} Ready")
        # Certificates follow the brokers' nodes and the credential reaches the brokers: retry.
        wait_until(lambda: produce("edge-granted", password) == [], 120, "bob producing through the node ports")
        # Each broker advertises the node address and its own node port.
        md = AdminClient(conf(password)).list_topics(timeout=30)
        advertised = sorted((b.id, b.port) for b in md.brokers.values())
        assert advertised == [(0, node_ports[0]), (1, node_ports[1])], advertised
        assert all(b.host in sans for b in md.brokers.values()), (md.brokers, sans)
        cons = Consumer({**conf(password), "group.id": "bob-readers", "auto.offset.reset": "earliest"})
        cons.subscribe(["edge-granted"])
        got = poll_values(cons, 20, 60)
        assert len(got) >= 20, f"bob read {len(got)} records through the node ports"
        denied = produce("edge-forbidden", password, 3)
        assert denied and all(e == "TOPIC_AUTHORIZATION_FAILED" for e in denied), denied
        # Kafka's Java console tools with the Secret's sasl.jaas.config line and the CA as a PEM
        # truststore, through the node ports too (test.sh installs Kafka's jars and Java is on every
        # machine here; the runner pod of cluster-e2e.sh has neither, which is said, not hidden).
        jaas = base64.b64decode(env.get("-n", NS, "get", "secret", "bob")["data"]["sasl.jaas.config"]).decode()
        java_here = shutil.which("java") and (ROOT / "e2e/kafka-dist/pom.xml").exists()
        if MODE == "existing" and not java_here:
            print("NOTE: no Java or Kafka jars in this runner: the Java console-tool step of the listener "
                  "test did not run")
        else:
            java_console_tools(boot, tmp_path / "bob.properties", jaas, ca)
        wrong = produce("edge-granted", password + "x", 1)
        assert "_AUTHENTICATION" in wrong, wrong
        # A plaintext client on the TLS listener gets no metadata.
        plain = AdminClient({"bootstrap.servers": boot, "log_level": 0, "socket.timeout.ms": 5000})
        with pytest.raises(Exception):
            plain.list_topics(timeout=8)

        # carol: a client certificate from the clients CA, on the mtls listener (in-cluster names,
        # which the runner's hosts file resolves); her principal is the certificate's subject.
        carol = ready(env, "kafkauser", "carol", 120, "KafkaUser carol Ready=True")
        assert carol["status"]["principal"] == "User:CN=carol", carol["status"]
        files = {k: base64.b64decode(v) for k, v in env.get("-n", NS, "get", "secret", "carol")["data"].items()}
        assert sorted(files) == ["ca.crt", "user-keystore.pem", "user.crt", "user.key"], sorted(files)
        for k, v in files.items():
            (tmp_path / k).write_bytes(v)
        mtls = {"bootstrap.servers": f"{name}-0.{name}-brokers.{NS}.svc:9095", "security.protocol": "SSL",
                "ssl.ca.location": str(tmp_path / "ca.crt"), "ssl.certificate.location": str(tmp_path / "user.crt"),
                "ssl.key.location": str(tmp_path / "user.key"), "log_level": 2}

        def produce_mtls(topic: str, extra: dict | None = None) -> list[str]:
            errors: list[str] = []
            p = Producer({**mtls, **(extra or {}), "message.timeout.ms": 15000,
                          "error_cb": lambda e: errors.append(e.name())
                          if e.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError._TRANSPORT)
                          else None})
            for i in range(5):
                p.produce(topic, b"carol", on_delivery=lambda err, _m: errors.append(err.name()) if err else None)
            p.flush(30)
            return errors

        wait_until(lambda: produce_mtls("edge-granted") == [], 90, "carol producing with her certificate")
        denied = produce_mtls("edge-forbidden")
        assert denied and all(e == "TOPIC_AUTHORIZATION_FAILED" for e in denied), denied
        # Without a client certificate the mtls listener refuses the handshake.
        refused = produce_mtls("edge-granted", {"ssl.certificate.location": "", "ssl.key.location": ""})
        assert refused and "TOPIC_AUTHORIZATION_FAILED" not in refused, refused

        # Deleting a Topic removes it from the cluster, with the authorizer on and no super user
        # but the brokers': the finalizer goes through the cluster's controller, not through a
        # Kafka principal of the operator's own.
        env.k("-n", NS, "delete", "topic", "edge-granted", "--timeout=60s")
        deleted = [e for e in env.get("-n", NS, "get", "events", "--field-selector", "reason=TopicDeleted")["items"]
                   if e.get("involvedObject", {}).get("name") == "edge-granted"]
        assert deleted, "no TopicDeleted event for edge-granted"
        wait_until(lambda: "edge-granted" not in AdminClient(conf(password)).list_topics(timeout=30).topics, 30,
                   "edge-granted gone from the brokers' metadata")
    finally:
        env.k("-n", NS, "delete", "kafkauser", "bob", "carol", "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "topic", "edge-granted", "edge-forbidden", "--ignore-not-found",
              "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)


def tls_cluster(name: str, certificates: str, topic: str, user: str) -> str:
    """A two-broker cluster with a TLS listener (9093) and a mutual-TLS one (9095), its
    `spec.certificates` lines as given, a Topic (2 partitions, replication factor 2) and a `tls`
    KafkaUser."""
    return f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {name}
  namespace: {NS}
spec:
  replicas: 2
  storage:
    size: 1Gi
  certificates:
{certificates}
  listeners:
    clients:
      - name: tls
        port: 9093
        type: internal
        tls: true
      - name: mtls
        port: 9095
        type: internal
        tls: true
        authentication:
          type: tls
  config:
    min.insync.replicas: "2"
---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: {topic}
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 2
  replicationFactor: 2
---
apiVersion: skein.dev/v1alpha1
kind: KafkaUser
metadata:
  name: {user}
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  authentication:
    type: tls
"""


def tls_verifies(host: str, port: int, cafile: Path, cert: tuple[Path, Path] | None = None) -> bool | None:
    """Whether a TLS handshake with host:port verifies the served certificate against `cafile`
    (hostname checked) and, with `cert`, the server accepts that client certificate. None: no
    connection in five tries a second apart (not listening yet, the name not resolving yet)."""
    for _ in range(5):
        answer = tls_handshake(host, port, cafile, cert)
        if answer is not None:
            return answer
        time.sleep(1)
    return None


def tls_handshake(host: str, port: int, cafile: Path, cert: tuple[Path, Path] | None) -> bool | None:
    import socket
    import ssl
    ctx = ssl.create_default_context(cafile=str(cafile))
    if cert:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    try:
        with socket.create_connection((host, port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname=host) as s:
                if cert:
                    # TLS 1.3: the server's verdict on the client certificate comes after the
                    # handshake; a Kafka ApiVersions request makes it answer or close.
                    s.sendall(bytes.fromhex("0000001200120000000000010008736b65696e2d6361"))
                    return len(s.recv(4)) == 4
                return True
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError, socket.timeout):
        return False  # the server's certificate is not trusted, or ours is refused
    except OSError:
        return None


def ssl_der(pem: str) -> bytes:
    import ssl
    return ssl.PEM_cert_to_DER_cert(pem)


def served_certificate(host: str, port: int) -> bytes | None:
    """The certificate host:port serves (DER), unverified; None when no handshake."""
    import socket
    import ssl
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname=host) as s:
                return s.getpeercert(binary_form=True)
    except OSError:
        return None


def test_forced_ca_renewal_and_replacement_roll_certificates_under_an_acks_all_producer(env, tmp_path):
    """spec.certificates and the force annotations. A renewal (skein.dev/force-renew-ca=cluster)
    gives the cluster CA a new certificate with the same key: a client holding the old CA
    certificate still verifies the brokers. A replacement of both CAs
    (skein.dev/force-replace-ca=cluster,clients) goes through its phases in the status
    (TrustingNew: clients get a two-certificate bundle; ReplacingCertificates: the brokers serve a
    certificate of the new CA and the tls user gets a new client certificate; then the old CAs are
    dropped): afterwards the old cluster CA verifies nothing the brokers serve and the user's old
    certificate is refused while the new one is taken. All along an acks=all producer, which
    connected before it all, delivers every record: zero failed deliveries."""
    from confluent_kafka import Consumer, Producer

    name = "roll"
    env.k("apply", "-f", "-", stdin=tls_cluster(name, "    validityDays: 90\n    renewalDays: 10", "roll-t", "dave"))
    stop = threading.Event()
    try:
        def cas() -> dict:
            st = env.get("-n", NS, "get", "kafkacluster", name).get("status", {})
            return {c["name"]: c for c in st.get("certificateAuthorities", [])}
        first = wait_until(lambda: (lambda c: c if len(c) == 2 else None)(cas()), 180,
                           "status.certificateAuthorities")
        assert {c["phase"] for c in first.values()} == {"Steady"}, first
        ready(env, "topic", "roll-t", 120, "Topic roll-t Ready")
        ready(env, "kafkauser", "dave", 120, "KafkaUser dave Ready")

        def secret(n: str) -> dict[str, bytes]:
            return {k: base64.b64decode(v) for k, v in env.get("-n", NS, "get", "secret", n)["data"].items()}

        def save(n: str, data: bytes) -> Path:
            (tmp_path / n).write_bytes(data)
            return tmp_path / n

        ca0 = save("ca0.crt", secret(f"{name}-cluster-ca-cert")["ca.crt"])
        key0 = secret(f"{name}-cluster-ca")["ca.key"]
        dave0 = secret("dave")
        dave0_cert = (save("dave0.crt", dave0["user.crt"]), save("dave0.key", dave0["user.key"]))
        host = f"{name}-0.{name}-brokers.{NS}.svc"
        wait_until(lambda: tls_verifies(host, 9093, ca0), 90, "the brokers serving TLS")
        assert tls_verifies(host, 9095, ca0, dave0_cert), "dave's first certificate is taken"

        # The producer: connected before everything, keeps the first CA certificate it was given.
        sent = {"ok": 0, "failed": []}
        prod = Producer({"bootstrap.servers": f"{host}:9093", "security.protocol": "SSL",
                         "ssl.ca.location": str(ca0), "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "log_level": 2})

        def report(err, _msg):
            if err:
                sent["failed"].append(err.name())
            else:
                sent["ok"] += 1

        def produce():
            i = 0
            while not stop.is_set():
                prod.produce("roll-t", f"r{i}".encode(), on_delivery=report)
                prod.poll(0.02)
                i += 1
            prod.flush(60)
            sent["produced"] = i

        t = threading.Thread(target=produce, daemon=True)
        t.start()
        wait_until(lambda: sent["ok"] > 20, 60, "the producer delivering")

        # Renewal: new certificate, same key; the old certificate still verifies the brokers.
        env.k("-n", NS, "annotate", "kafkacluster", name, "skein.dev/force-renew-ca=cluster")
        wait_until(lambda: "skein.dev/force-renew-ca" not in env.get("-n", NS, "get", "kafkacluster", name)
                   ["metadata"].get("annotations", {}), 60, "the renewal done (annotation removed)")
        ca1 = save("ca1.crt", secret(f"{name}-cluster-ca-cert")["ca.crt"])
        assert ca1.read_bytes() != ca0.read_bytes() and secret(f"{name}-cluster-ca")["ca.key"] == key0
        assert cas()["cluster"]["notAfter"] != first["cluster"]["notAfter"], cas()
        # Once the brokers serve the certificate issued after the renewal, the old CA certificate
        # and the renewed one both verify it.
        keystore = secret(f"{name}-listener-tls")["broker-keystore.pem"].decode()
        issued = ssl_der(keystore[keystore.index("-----BEGIN CERTIFICATE-----"):])
        wait_until(lambda: served_certificate(host, 9093) == issued, 30, "the brokers serving the new certificate")
        assert tls_verifies(host, 9093, ca0) and tls_verifies(host, 9093, ca1)

        # Replacement of both CAs, in phases.
        env.k("-n", NS, "annotate", "kafkacluster", name, "skein.dev/force-replace-ca=cluster,clients")
        trusting = wait_until(lambda: (lambda c: c if c["cluster"]["phase"] == "TrustingNew" else None)(cas()),
                              60, "the TrustingNew phase")
        assert trusting["clients"]["phase"] == "TrustingNew", trusting
        bundle = secret(f"{name}-cluster-ca-cert")["ca.crt"]
        assert bundle.count(b"BEGIN CERTIFICATE") == 2, "clients get both CAs while the new one comes in"
        phases = set()

        def steady():
            c = cas()
            phases.update(v["phase"] for v in c.values())
            return c if {v["phase"] for v in c.values()} == {"Steady"} else None
        wait_until(steady, 180, "both CAs replaced and steady again")
        assert "ReplacingCertificates" in phases, phases
        assert "skein.dev/force-replace-ca" not in env.get("-n", NS, "get", "kafkacluster", name)[
            "metadata"].get("annotations", {})
        assert secret(f"{name}-cluster-ca")["ca.key"] != key0
        assert sorted(secret(f"{name}-cluster-ca")) == ["ca.crt", "ca.key"]
        ca2 = save("ca2.crt", secret(f"{name}-cluster-ca-cert")["ca.crt"])
        assert ca2.read_bytes().count(b"BEGIN CERTIFICATE") == 1
        dave2 = secret("dave")
        assert dave2["user.crt"] != dave0["user.crt"]
        dave2_cert = (save("dave2.crt", dave2["user.crt"]), save("dave2.key", dave2["user.key"]))
        # Once the brokers reloaded: only the new CA verifies them, only dave's new certificate is taken.
        wait_until(lambda: tls_verifies(host, 9093, ca2) and tls_verifies(host, 9093, ca0) is False,
                   60, "the brokers serving the new CA's certificate only")
        wait_until(lambda: tls_verifies(host, 9095, ca2, dave2_cert)
                   and tls_verifies(host, 9095, ca2, dave0_cert) is False,
                   60, "the brokers taking only dave's new certificate")

        before = sent["ok"]
        wait_until(lambda: sent["ok"] > before + 20, 60, "the producer still delivering after the rollover")
        stop.set()
        t.join(90)
        assert not t.is_alive(), "the producer's flush did not end"
        assert sent["failed"] == [], sent["failed"][:5]
        assert sent["ok"] == sent["produced"], sent
        cons = Consumer({"bootstrap.servers": f"{host}:9093", "security.protocol": "SSL",
                         "ssl.ca.location": str(ca2), "group.id": "roll-check",
                         "auto.offset.reset": "earliest", "log_level": 2})
        cons.subscribe(["roll-t"])
        got = poll_values(cons, sent["ok"], 90)
        assert len(got) >= sent["ok"], f"read {len(got)} of {sent['ok']} acknowledged records"
    finally:
        stop.set()
        env.k("-n", NS, "delete", "kafkauser", "dave", "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "topic", "roll-t", "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)


def test_loadbalancer_and_ingress_listeners_reach_the_brokers_from_outside(env, tmp_path):
    """type loadbalancer: a LoadBalancer Service per broker and a bootstrap one; once the cloud
    (here the pod runner, standing in for a cloud controller) gives them addresses, each broker
    advertises its own, the certificate names them and status.listeners gives the bootstrap
    address. type ingress: ClusterIP Services and an Ingress per host with TLS passthrough; each
    broker advertises its host on 443, and a client reaches every broker through one address that
    routes by SNI (the pod runner standing in for ingress-nginx with --enable-ssl-passthrough).
    confluent-kafka, verifying host names against the cluster CA, produces and consumes through
    both."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

    name = "reach"
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {name}
  namespace: {NS}
spec:
  replicas: 2
  storage:
    size: 1Gi
  listeners:
    clients:
      - name: lb
        port: 9094
        type: loadbalancer
        tls: true
        annotations:
          service.beta.kubernetes.io/aws-load-balancer-type: nlb
      - name: edge
        port: 9095
        type: ingress
        tls: true
        ingress:
          className: nginx
          bootstrapHost: kafka.reach.test
          brokerHostTemplate: "broker-{{id}}.reach.test"
---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: reach-t
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 2
  replicationFactor: 2
""")
    try:
        def listeners():
            st = env.get("-n", NS, "get", "kafkacluster", name).get("status", {})
            ls = {x["name"]: x for x in st.get("listeners", [])}
            return ls if ls.get("lb", {}).get("bootstrap") else None
        ls = wait_until(listeners, 180, "the load balancer's address in status.listeners")
        assert ls["lb"]["type"] == "loadbalancer" and ls["lb"]["bootstrap"].startswith("127.0.1."), ls
        assert ls["edge"] == {"name": "edge", "type": "ingress", "bootstrap": "kafka.reach.test:443",
                              "securityProtocol": "SSL"}, ls
        svcs = {s["metadata"]["name"]: s for s in env.get("-n", NS, "get", "services")["items"]}
        assert svcs[f"{name}-lb-0"]["spec"]["type"] == "LoadBalancer"
        assert svcs[f"{name}-lb-0"]["metadata"]["annotations"][
            "service.beta.kubernetes.io/aws-load-balancer-type"] == "nlb"
        assert svcs[f"{name}-edge-1"]["spec"]["type"] == "ClusterIP"
        ings = {i["metadata"]["name"]: i for i in env.get("-n", NS, "get", "ingresses")["items"]}
        assert sorted(i for i in ings if i.startswith(name)) == [f"{name}-edge-0", f"{name}-edge-1",
                                                                  f"{name}-edge-bootstrap"]
        ing = ings[f"{name}-edge-1"]
        assert ing["metadata"]["annotations"]["nginx.ingress.kubernetes.io/ssl-passthrough"] == "true"
        assert ing["spec"]["ingressClassName"] == "nginx"
        assert ing["spec"]["rules"][0]["host"] == "broker-1.reach.test"
        lb_addr = {i: svcs[f"{name}-lb-{i}"]["status"]["loadBalancer"]["ingress"][0]["ip"] for i in (0, 1)}
        ready(env, "topic", "reach-t", 120, "Topic reach-t Ready")
        ca = tmp_path / "ca.crt"
        ca.write_bytes(base64.b64decode(env.get("-n", NS, "get", "secret", f"{name}-cluster-ca-cert")["data"]["ca.crt"]))

        def conf(boot: str) -> dict:
            return {"bootstrap.servers": boot, "security.protocol": "SSL", "ssl.ca.location": str(ca),
                    "log_level": 2}

        def advertised(boot: str) -> list | None:
            try:
                md = AdminClient(conf(boot)).list_topics(timeout=10)
            except Exception:  # noqa: BLE001 - brokers rolling, certificate being reissued
                return None
            return sorted((b.id, b.host, b.port) for b in md.brokers.values())

        # The brokers roll once to take their load balancer's address (the ConfigMap changed).
        want_lb = [(0, lb_addr[0], 9094), (1, lb_addr[1], 9094)]
        wait_until(lambda: advertised(ls["lb"]["bootstrap"]) == want_lb, 240,
                   "each broker advertising its load balancer's address")
        # That can hold before the roll is over: a broker started after both addresses were
        # known advertises them at once and is still rolled for the new ConfigMap. Producing
        # into that restart timed out in CI (30 s of acks=all): wait for the roll to end.
        def rolled() -> bool:
            rev = env.get("-n", NS, "get", "statefulset", name)["status"].get("updateRevision")
            pods = env.get("-n", NS, "get", "pods", "-l", f"app.kubernetes.io/instance={name}")["items"]
            return len(pods) == 2 and all(p["metadata"]["labels"].get("controller-revision-hash") == rev
                                          and not p["metadata"].get("deletionTimestamp") for p in pods)
        wait_until(rolled, 240, "every broker pod on the StatefulSet's current revision")
        wait_until(lambda: cond(env.get("-n", NS, "get", "kafkacluster", name), "Ready") == "True", 120,
                   "KafkaCluster Ready=True after the roll")
        # And each broker answering through its own load balancer, with a
        # certificate naming that address (the roll and the reissued
        # certificate may still be settling when the bootstrap one answers).
        for i in (0, 1):
            wait_until(lambda i=i: advertised(f"{lb_addr[i]}:9094") == want_lb, 120,
                       f"broker {i} answering through its own load balancer")
        want_ing = [(0, "broker-0.reach.test", 443), (1, "broker-1.reach.test", 443)]
        wait_until(lambda: advertised("kafka.reach.test:443") == want_ing, 60,
                   "each broker advertising its ingress host")

        for boot, tag in ((ls["lb"]["bootstrap"], "lb"), ("kafka.reach.test:443", "ingress")):
            errors: list[str] = []
            delivered = []
            # Errors logged (level 3): a failure here says why on stderr.
            p = Producer({**conf(boot), "acks": "all", "message.timeout.ms": 30000, "log_level": 3})
            for i in range(20):
                p.produce("reach-t", f"{tag}-{i}".encode(), partition=i % 2,
                          on_delivery=lambda err, m: errors.append(err.name()) if err else delivered.append(m))
            p.flush(60)
            assert errors == [] and len(delivered) == 20, (tag, errors, len(delivered))
            cons = Consumer({**conf(boot), "group.id": f"reach-{tag}", "auto.offset.reset": "earliest"})
            cons.subscribe(["reach-t"])
            got = poll_values(cons, 40 if tag == "ingress" else 20, 60)
            assert sum(v.startswith(tag.encode()) for v in got) == 20, (tag, got)
    finally:
        env.k("-n", NS, "delete", "topic", "reach-t", "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)


def test_oauth_listener_takes_signed_tokens_of_its_identity_provider(env, tmp_path):
    """authentication.type oauth: the identity provider's JWKS from a ConfigMap (mounted into the
    broker pods), issuer and audience expected. confluent-kafka with a token signed by the
    provider's key produces and consumes over SASL_SSL/OAUTHBEARER; a token for another audience
    and one signed by a key the JWKS does not hold are refused."""
    from confluent_kafka import Consumer, Producer
    from pki import make_jwt_key, sign_jwt

    name = "sso"
    jwks = {"keys": [make_jwt_key(tmp_path, "idp1")]}
    make_jwt_key(tmp_path, "rogue")
    env.k("-n", NS, "create", "configmap", "sso-idp", f"--from-literal=jwks.json={json.dumps(jwks)}")
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {name}
  namespace: {NS}
spec:
  replicas: 1
  storage:
    size: 1Gi
  listeners:
    clients:
      - name: sso
        port: 9096
        type: internal
        tls: true
        authentication:
          type: oauth
          oauth:
            jwksConfigMap: {{name: sso-idp, key: jwks.json}}
            issuer: https://idp.example.test
            audience: kafka
""")
    try:
        def status():
            st = env.get("-n", NS, "get", "kafkacluster", name).get("status", {})
            ls = {x["name"]: x for x in st.get("listeners", [])}
            return ls if "sso" in ls and st.get("readyReplicas") == 1 else None
        ls = wait_until(status, 180, "the oauth listener and a ready broker")
        assert ls["sso"]["securityProtocol"] == "SASL_SSL", ls
        ca = tmp_path / "ca.crt"
        ca.write_bytes(base64.b64decode(env.get("-n", NS, "get", "secret", f"{name}-cluster-ca-cert")["data"]["ca.crt"]))

        def token(kid: str = "idp1", **over) -> str:
            now = int(time.time())
            claims = {"sub": "alice", "iat": now, "exp": now + 600, "aud": "kafka",
                      "iss": "https://idp.example.test", **over}
            return sign_jwt(tmp_path, kid, claims, header_kid="idp1")

        def conf(tok: str) -> dict:
            return {"bootstrap.servers": f"{name}-0.{name}-brokers.{NS}.svc:9096",
                    "security.protocol": "SASL_SSL", "ssl.ca.location": str(ca),
                    "sasl.mechanism": "OAUTHBEARER", "oauth_cb": lambda _c: (tok, time.time() + 600),
                    "log_level": 2}

        def produce(tok: str, n: int) -> list[str]:
            errors: list[str] = []
            p = Producer({**conf(tok), "acks": "all", "message.timeout.ms": 15000,
                          "error_cb": lambda e: errors.append(e.name())})
            for i in range(n):
                p.produce("sso-t", f"v{i}".encode(),
                          on_delivery=lambda err, _m: errors.append(err.name()) if err else None)
            p.flush(30)
            return errors

        good = token()
        wait_until(lambda: produce(good, 10) == [], 120, "alice producing with her token")
        cons = Consumer({**conf(good), "group.id": "sso-readers", "auto.offset.reset": "earliest"})
        cons.subscribe(["sso-t"])
        assert len(poll_values(cons, 10, 60)) >= 10
        for bad, why in ((token(aud="other"), "another audience"), (token(kid="rogue"), "an unknown key")):
            errors = produce(bad, 1)
            assert "_AUTHENTICATION" in errors, (why, errors)
    finally:
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)
        env.k("-n", NS, "delete", "configmap", "sso-idp", "--ignore-not-found", check=False)


def test_replication_tls_replicates_over_mutual_tls_as_a_super_user(env, tmp_path):
    """spec.listeners.replicationTls: the brokers replicate over a REPLICATION listener with mutual
    TLS (the brokers' certificate both ways, only the cluster CA trusted), as the principal
    User:skein-broker#replication which the operator adds to the spec's super.users. With Kafka's
    authorizer on and no ACLs, acks=all with min.insync.replicas=2 succeeds and both replicas stay
    in sync — which only replication authorized on the TLS listener gives; a client certificate of
    the clients CA is refused there."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    name = "relay"
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {name}
  namespace: {NS}
spec:
  replicas: 2
  storage:
    size: 1Gi
  listeners:
    replicationTls: true
  config:
    authorizer.class.name: org.apache.kafka.metadata.authorizer.StandardAuthorizer
    super.users: User:ANONYMOUS
---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: relay-t
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 2
  replicationFactor: 2
  config:
    min.insync.replicas: "2"
---
apiVersion: skein.dev/v1alpha1
kind: KafkaUser
metadata:
  name: erin
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  authentication:
    type: tls
""")
    try:
        ready(env, "kafkacluster", name, 180, "KafkaCluster relay Ready")
        props = env.get("-n", NS, "get", "configmap", f"{name}-config")["data"]["server.properties"]
        assert "inter.broker.listener.name=REPLICATION\n" in props, props
        assert "super.users=User:ANONYMOUS;User:skein-broker#replication\n" in props, props
        ready(env, "topic", "relay-t", 120, "Topic relay-t Ready")
        boot = f"{name}-0.{name}-brokers.{NS}.svc:9092,{name}-1.{name}-brokers.{NS}.svc:9092"
        errors: list[str] = []
        p = Producer({"bootstrap.servers": boot, "acks": "all", "message.timeout.ms": 30000, "log_level": 2})
        for i in range(200):
            p.produce("relay-t", f"v{i}".encode(), partition=i % 2,
                      on_delivery=lambda err, _m: errors.append(err.name()) if err else None)
        p.flush(60)
        assert errors == [], errors[:5]
        admin = AdminClient({"bootstrap.servers": boot})
        wait_until(lambda: all(sorted(pm.isrs) == [0, 1] for pm in
                               admin.list_topics("relay-t", timeout=10).topics["relay-t"].partitions.values()),
                   30, "both replicas of every partition in sync")

        # The replication listener trusts the cluster CA only: erin's certificate (clients CA) is refused.
        ready(env, "kafkauser", "erin", 120, "KafkaUser erin Ready")
        files = {k: base64.b64decode(v) for k, v in env.get("-n", NS, "get", "secret", "erin")["data"].items()}
        for k in ("ca.crt", "user.crt", "user.key"):
            (tmp_path / k).write_bytes(files[k])
        keystore = tmp_path / "broker.pem"
        keystore.write_bytes(base64.b64decode(
            env.get("-n", NS, "get", "secret", f"{name}-listener-tls")["data"]["broker-keystore.pem"]))
        host = f"{name}-0.{name}-brokers.{NS}.svc"
        # A broker's certificate (cluster CA) is answered; erin's is not.
        wait_until(lambda: tls_verifies(host, 9091, tmp_path / "ca.crt", (keystore, keystore)), 30,
                   "a Kafka answer on 9091 to the brokers' certificate")
        assert tls_verifies(host, 9091, tmp_path / "ca.crt", (tmp_path / "user.crt", tmp_path / "user.key")) is False
    finally:
        env.k("-n", NS, "delete", "kafkauser", "erin", "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "topic", "relay-t", "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)


def test_tiered_storage_on_a_real_s3_server(env, tmp_path):
    """spec.tieredStorage with a credentials Secret, on SeaweedFS (an S3 server the brokers reach
    with the Secret's keys from their environment). A topic written without tiering has
    remote.storage.enable switched on through its Topic resource while it runs: its closed
    segments go to the store and local.retention.ms deletes them locally; the Topic status shows
    the remote bytes. A librdkafka consumer then reads every record from offset 0, with no change
    on its side: after the leader moved (its pod deleted), and from a broker that came back on a
    new, empty volume and leads, which serves the old records from the store without copying
    them to its disk (its EARLIEST_LOCAL offset stays above 0)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from seaweedfs import SeaweedS3
    import rawkafka

    s3 = SeaweedS3()
    s3.start(tmp_path / "seaweedfs")
    name, topic = "tier", "tiered-t"
    boot = f"{name}-0.{name}-brokers.{NS}.svc:9092,{name}-1.{name}-brokers.{NS}.svc:9092"
    try:
        env.k("apply", "-f", "-", stdin=f"""apiVersion: v1
kind: Secret
metadata:
  name: tier-s3
  namespace: {NS}
stringData:
  AWS_ACCESS_KEY_ID: {s3.access_key}
  AWS_SECRET_ACCESS_KEY: {s3.secret_key}
---
apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {name}
  namespace: {NS}
spec:
  replicas: 2
  storage:
    size: 1Gi
  tieredStorage:
    bucket: {s3.bucket}
    prefix: k8s
    endpoint: {s3.endpoint}
    credentialsSecret:
      name: tier-s3
  config:
    remote.log.manager.task.interval.ms: "500"
    log.retention.check.interval.ms: "500"
---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: {topic}
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 1
  replicationFactor: 2
  config:
    segment.bytes: "65536"
""")
        ready(env, "kafkacluster", name, 180, "KafkaCluster tier Ready")
        props = env.get("-n", NS, "get", "configmap", f"{name}-config")["data"]["server.properties"]
        assert "remote.log.storage.system.enable=true\n" in props, props
        assert f"rsm.config.storage.url=s3://{s3.bucket}/k8s\n" in props, props
        assert s3.secret_key not in props, "the secret key must not be in the ConfigMap"
        ready(env, "topic", topic, 120, f"Topic {topic} Ready")
        errors: list[str] = []
        p = Producer({"bootstrap.servers": boot, "acks": "all", "batch.size": 16384, "linger.ms": 5,
                      "log_level": 2})

        def produce(first: int, n: int):
            for i in range(first, first + n):
                p.produce(topic, f"v{i:08d}".encode() + b"x" * 180,
                          on_delivery=lambda err, _m: errors.append(err.name()) if err else None)
                p.poll(0)
            p.flush(60)
            assert errors == [], errors[:5]
        produce(0, 1500)
        client = s3.client()

        def remote_logs() -> int:
            listed = client.list_objects_v2(Bucket=s3.bucket, Prefix="k8s/")
            return sum(1 for o in listed.get("Contents", []) if o["Key"].endswith(".log"))
        time.sleep(2)  # several copy rounds (500 ms): none may copy while the topic does not tier
        assert remote_logs() == 0, "segments copied before remote.storage.enable"

        # Switched on while it runs, through the Topic resource.
        env.k("-n", NS, "patch", "topic", topic, "--type=merge", "-p", json.dumps(
            {"spec": {"config": {"segment.bytes": "65536", "remote.storage.enable": "true",
                                 "local.retention.ms": "1000"}}}))
        produce(1500, 1500)
        n = 3000
        wait_until(lambda: remote_logs() >= 3, 90, "segments copied to the S3 server")

        def leader() -> int:
            # (a tuple: broker 0 is a leader too, and 0 would read as "not yet")
            return wait_until(lambda: (lambda ps: (ps[0]["leader"],) if ps and ps[0]["leader"] >= 0 else None)(
                topic_partitions(env, topic)), 90, f"{topic} led")[0]

        def offsets(broker: int) -> tuple[int, int]:
            """ListOffsets EARLIEST (-2) and EARLIEST_LOCAL (-4, v8) from `broker`."""
            conn = rawkafka.Connection(f"{name}-{broker}.{name}-brokers.{NS}.svc", 9092)
            try:
                return (conn.list_offset(topic, 0, -2, version=8)[2],
                        conn.list_offset(topic, 0, -4, version=8)[2])
            finally:
                conn.close()
        # Offset 0 is no longer on the leader's disk: -4 moved on while -2 is still 0.
        wait_until(lambda: offsets(leader())[1] > 0, 90, "local segments deleted after tiering")
        assert offsets(leader())[0] == 0

        def storage() -> dict:
            return env.get("-n", NS, "get", "topic", topic).get("status", {}).get("storage") or {}
        shown = wait_until(lambda: (lambda s: s if s.get("remoteBytes", 0) > 0 and s.get("remoteSegments", 0) >= 3
                                    else None)(storage()), 120, "remote bytes in the Topic status")
        print(f"Topic status storage: {shown}")

        def read_all(what: str):
            cons = Consumer({"bootstrap.servers": boot, "group.id": f"tier-{uuid.uuid4().hex[:6]}",
                             "enable.auto.commit": False, "log_level": 2})
            cons.assign([TopicPartition(topic, 0, 0)])
            got = poll_values(cons, n, 120)
            assert [int(v[1:9]) for v in got] == list(range(n)), f"{what}: records lost, duplicated or out of order"
        read_all("first read")

        def full_isr() -> bool:
            ps = topic_partitions(env, topic)
            return bool(ps) and len(ps[0]["isr"]) == 2

        def move_leadership_off(broker: int) -> int:
            """Deletes `broker`'s pod; the other broker leads. Waits until both are in sync again."""
            pod = f"{name}-{broker}"
            uid = env.get("-n", NS, "get", "pod", pod)["metadata"]["uid"]
            env.k("-n", NS, "delete", "pod", pod, "--wait=false")
            new = wait_until(lambda: (lambda ps: (ps[0]["leader"],) if ps and ps[0]["leader"] not in (-1, broker)
                                      else None)(topic_partitions(env, topic)), 90, f"{topic} led by another broker")[0]
            wait_until(lambda: env.get("-n", NS, "get", "pod", pod)["metadata"]["uid"] != uid, 90, "the pod recreated")
            wait_until(full_isr, 120, f"{topic} back to a full ISR")
            return new

        # The leader moved: the other replica, which deleted its copied segments too, serves it all.
        wait_until(full_isr, 90, f"{topic} with a full ISR")
        first = leader()
        second = move_leadership_off(first)
        read_all(f"after the leader moved {first} -> {second}")

        # The old leader comes back on a new, empty volume, catches up from the store's metadata and
        # the leader's tail, then leads: the old records come from the store, not its disk.
        lose_volume(env, f"{name}-{first}")
        wait_until(full_isr, 180, f"{topic} back to a full ISR after broker {first}'s lost volume")
        assert move_leadership_off(second) == first
        earliest, local = offsets(first)
        assert earliest == 0 and local > 0, f"broker {first} on a new volume: EARLIEST {earliest}, EARLIEST_LOCAL {local}"
        read_all(f"from broker {first}, back on an empty volume")
        print(f"{topic}: read 3,000 records from 0 three times; broker {first} on its new volume holds "
              f"offsets from {local} locally")
    finally:
        env.k("-n", NS, "delete", "topic", topic, "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)
        env.k("-n", NS, "delete", "secret", "tier-s3", "--ignore-not-found", check=False)
        s3.stop()


def expandable_class(env) -> str | None:
    """The StorageClass for the growth test: $SKEIN_E2E_EXPANDABLE_STORAGE_CLASS, else the test
    tier's kwok-expandable, else any class with allowVolumeExpansion."""
    if os.environ.get("SKEIN_E2E_EXPANDABLE_STORAGE_CLASS"):
        return os.environ["SKEIN_E2E_EXPANDABLE_STORAGE_CLASS"]
    classes = [c for c in env.get("get", "storageclass")["items"] if c.get("allowVolumeExpansion")]
    names = sorted(c["metadata"]["name"] for c in classes)
    return "kwok-expandable" if "kwok-expandable" in names else (names[0] if names else None)


def broker_disk_bytes(env, pod: str) -> int:
    """The size of the broker's log directory's filesystem, as the broker sees it (statvfs, its
    skein_log_dir_total_bytes metric), through the API server's pod proxy."""
    text = env.k("get", "--raw", f"/api/v1/namespaces/{NS}/pods/{pod}:9644/proxy/metrics")
    for line in text.splitlines():
        if line.startswith("skein_log_dir_total_bytes"):
            return int(float(line.rsplit(" ", 1)[1]))
    raise AssertionError("skein_log_dir_total_bytes missing from the broker's metrics")


def test_storage_that_grows_only_offline_restarts_each_broker_once(env):
    """A StorageClass whose driver grows filesystems only offline: after the volume grew, the claim
    says FileSystemResizePending until its pod starts again. The operator restarts each such broker
    once, one at a time under the rolling restart's rules, while an acks=all producer writes
    without a failed delivery; every broker then sees the new size and Resizing ends."""
    from confluent_kafka import Consumer, TopicPartition

    classes = {c["metadata"]["name"] for c in env.get("get", "storageclass")["items"]}
    cls = os.environ.get("SKEIN_E2E_OFFLINE_STORAGE_CLASS") or (
        "kwok-offline-expandable" if "kwok-offline-expandable" in classes else None)
    if cls is None:
        if MODE == "local":
            pytest.fail("the test tier's kwok-offline-expandable StorageClass is missing")
        pytest.skip("set SKEIN_E2E_OFFLINE_STORAGE_CLASS to a class whose driver grows filesystems offline")
    name, topic = "offline", "offline-t"
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {name}
  namespace: {NS}
spec:
  replicas: 3
  storage:
    size: 64Mi
    storageClassName: {cls}
  config:
    min.insync.replicas: "2"
---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: {topic}
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 3
  replicationFactor: 3
""")
    boot = ",".join(f"{name}-{i}.{name}-brokers.{NS}.svc:9092" for i in range(3))
    pods = [f"{name}-{i}" for i in range(3)]
    writer = AcksAllWriter(boot, topic, 3, "o")
    acked, failed = writer.acked, writer.failed

    try:
        ready(env, "kafkacluster", name, 180, "KafkaCluster offline Ready")
        ready(env, "topic", topic, 120, "Topic offline-t Ready")
        writer.start()
        wait_until(lambda: len(acked) > 200, 60, "the producer writing")
        seen: dict[str, set[str]] = {p: set() for p in pods}

        def look():
            items = env.get("-n", NS, "get", "pods", "-l", f"app.kubernetes.io/instance={name}")["items"]
            for p in items:
                if p["metadata"]["name"] in seen:
                    seen[p["metadata"]["name"]].add(p["metadata"]["uid"])
            return items
        look()
        first = {p: next(iter(u)) for p, u in seen.items()}
        env.k("-n", NS, "patch", "kafkacluster", name, "--type=merge", "-p",
              json.dumps({"spec": {"storage": {"size": "128Mi"}}}))

        def grown():
            look()
            return all(broker_disk_bytes(env, p) == 128 * 1024 * 1024 for p in pods)
        wait_until(grown, 360, "every broker on its grown filesystem")
        cond_ = wait_until(lambda: (lambda c: c if c and c["reason"] == "VolumesAtSize" else None)(
            next((c for c in env.get("-n", NS, "get", "kafkacluster", name)["status"].get("conditions", [])
                  if c["type"] == "Resizing"), None)), 120, "Resizing: VolumesAtSize")
        for _ in range(5):  # a second restart would show up here
            look()
            time.sleep(1)
        assert all(len(u) == 2 and first[p] in u for p, u in seen.items()), seen
        for pvc in env.get("-n", NS, "get", "pvc", "-l", f"app.kubernetes.io/instance={name}")["items"]:
            assert not [c for c in pvc.get("status", {}).get("conditions", [])
                        if c["type"] == "FileSystemResizePending"], pvc["status"]
        events = env.get("-n", NS, "get", "events", "--field-selector",
                         f"involvedObject.name={name},reason=RestartingBroker")["items"]
        assert events, "no RestartingBroker event"
        writer.finish()
        assert failed == [], failed[:5]
        cons = Consumer({"bootstrap.servers": boot, "group.id": f"offline-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
        cons.assign([TopicPartition(topic, p, 0) for p in range(3)])
        got = poll_values(cons, len(acked), 120)
        assert sorted(got) == sorted(acked), f"{len(got)} read back of {len(acked)} acknowledged"
        print(f"offline growth: each broker restarted once ({cond_['message']}); "
              f"{len(acked)} acknowledged records all read back")
    finally:
        writer.stop()
        env.k("-n", NS, "delete", "topic", topic, "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)
        env.k("-n", NS, "delete", "pvc", "-l", f"app.kubernetes.io/instance={name}", "--wait=false", check=False)


def test_storage_grows_online_and_never_shrinks(env):
    """spec.storage.size grows: the operator asks every broker's claim for the new size (the
    StatefulSet's claim template cannot change), the storage grows the volumes online and the
    brokers see the new size without a restart; Resizing reports the progress and Ready stays
    True. The API server refuses a shrink and a change of class (CEL rules); growing on a class
    without allowVolumeExpansion is reported as Degraded, nothing else changes."""
    from confluent_kafka import Consumer, Producer

    cls = expandable_class(env)
    if cls is None:
        if MODE == "local":
            pytest.fail("the test tier's kwok-expandable StorageClass is missing (e2e/k8s/kwok/storage-class.yaml)")
        pytest.skip("this cluster has no StorageClass with allowVolumeExpansion "
                    "(or set SKEIN_E2E_EXPANDABLE_STORAGE_CLASS)")
    name, fixed = "expand", "fixedsc"

    def cluster(cname: str, size: str, cls: str | None) -> str:
        storage_class = f"\n    storageClassName: {cls}" if cls else ""
        return f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {cname}
  namespace: {NS}
spec:
  replicas: 2
  storage:
    size: {size}{storage_class}
"""

    def resizing(cname: str) -> dict | None:
        for c in env.get("-n", NS, "get", "kafkacluster", cname).get("status", {}).get("conditions", []):
            if c["type"] == "Resizing":
                return c
        return None

    env.k("apply", "-f", "-", stdin=cluster(name, "64Mi", cls) + f"""---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: expand-t
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 2
  replicationFactor: 2
""")
    try:
        ready(env, "kafkacluster", name, 180, "KafkaCluster expand Ready")
        ready(env, "topic", "expand-t", 120, "Topic expand-t Ready")
        pods = [f"{name}-0", f"{name}-1"]
        uids = {p: env.get("-n", NS, "get", "pod", p)["metadata"]["uid"] for p in pods}
        before = {p: broker_disk_bytes(env, p) for p in pods}
        if MODE == "local":
            assert set(before.values()) == {64 << 20}, before
        boot = f"{name}-0.{name}-brokers.{NS}.svc:9092,{name}-1.{name}-brokers.{NS}.svc:9092"
        errors: list[str] = []
        p = Producer({"bootstrap.servers": boot, "acks": "all", "log_level": 2})
        for i in range(100):
            p.produce("expand-t", f"v{i}".encode(), on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
        p.flush(60)
        assert errors == [], errors[:5]

        # Grow: every claim, and every broker's filesystem, reaches 128Mi; no pod restarts.
        env.k("-n", NS, "patch", "kafkacluster", name, "--type", "merge",
              "-p", '{"spec":{"storage":{"size":"128Mi"}}}')
        not_ready: list[str] = []

        def grown():
            o = env.get("-n", NS, "get", "kafkacluster", name)
            if cond(o, "Ready") != "True":
                not_ready.append(time.strftime("%H:%M:%S"))
            c = resizing(name)
            return c if c and c["status"] == "False" and c["reason"] == "VolumesAtSize" else None
        wait_until(grown, 120, "Resizing=False VolumesAtSize after growing to 128Mi")
        assert not not_ready, f"Ready went False while volumes grew: {not_ready}"
        for i in range(2):
            pvc = env.get("-n", NS, "get", "pvc", f"data-{name}-{i}")
            assert pvc["spec"]["resources"]["requests"]["storage"] == "128Mi", pvc["spec"]
            assert pvc["status"]["capacity"]["storage"] == "128Mi", pvc["status"]
        after = wait_until(lambda: (lambda d: d if all(d[p] > before[p] for p in pods) else None)(
            {p: broker_disk_bytes(env, p) for p in pods}), 30, "the brokers seeing their grown volumes")
        if MODE == "local":
            assert set(after.values()) == {128 << 20}, after
        assert {p: env.get("-n", NS, "get", "pod", p)["metadata"]["uid"] for p in pods} == uids, \
            "a broker was restarted to grow its volume"
        sts = env.get("-n", NS, "get", "statefulset", name)
        assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "64Mi"
        reasons = [e.get("reason") for e in env.get("-n", NS, "get", "events.events.k8s.io")["items"]
                   if e.get("regarding", {}).get("name") == name]
        assert "ExpandingVolume" in reasons and "VolumesResized" in reasons, reasons

        # The records are all there.
        c = Consumer({"bootstrap.servers": boot, "group.id": f"expand-{uuid.uuid4().hex[:6]}",
                      "auto.offset.reset": "earliest"})
        c.subscribe(["expand-t"])
        assert len(poll_values(c, 100, 60)) == 100

        # Shrinking and changing the class are refused by the API server.
        r = env.k_run("-n", NS, "patch", "kafkacluster", name, "--type", "merge",
                      "-p", '{"spec":{"storage":{"size":"96Mi"}}}')
        assert r.returncode != 0 and "may grow but never shrink" in r.stderr, r.stderr
        r = env.k_run("-n", NS, "patch", "kafkacluster", name, "--type", "merge",
                      "-p", '{"spec":{"storage":{"storageClassName":"other"}}}')
        assert r.returncode != 0 and "storageClassName is immutable" in r.stderr, r.stderr
        # The same size in other units is no change.
        env.k("-n", NS, "patch", "kafkacluster", name, "--type", "merge",
              "-p", '{"spec":{"storage":{"size":"134217728"}}}')

        # A class without allowVolumeExpansion: the claims stay, the cluster says why.
        if MODE == "local":
            env.k("apply", "-f", "-", stdin=cluster(fixed, "64Mi", "kwok-volume"))
            ready(env, "kafkacluster", fixed, 180, "KafkaCluster fixedsc Ready")
            env.k("-n", NS, "patch", "kafkacluster", fixed, "--type", "merge",
                  "-p", '{"spec":{"storage":{"size":"128Mi"}}}')
            refused = wait_until(lambda: (lambda c: c if c and c["reason"] == "VolumeExpansionRefused" else None)(
                resizing(fixed)), 60, "Resizing reason VolumeExpansionRefused")
            assert "data-fixedsc-0" in refused["message"], refused
            o = env.get("-n", NS, "get", "kafkacluster", fixed)
            assert cond(o, "Degraded") == "True" and cond(o, "Ready") == "True", o["status"]["conditions"]
            assert env.get("-n", NS, "get", "pvc", "data-fixedsc-0")["spec"]["resources"]["requests"]["storage"] \
                == "64Mi"
    finally:
        env.k("-n", NS, "delete", "topic", "expand-t", "--ignore-not-found", "--timeout=60s", check=False)
        for cname in (name, fixed):
            env.k("-n", NS, "delete", "kafkacluster", cname, "--ignore-not-found", "--wait=false", check=False)
            # Claims outlive their StatefulSet: removed, so no later cluster of that name finds them.
            env.k("-n", NS, "delete", "pvc", "-l", f"app.kubernetes.io/instance={cname}", "--wait=false",
                  check=False)


class Sampler:
    """Sampling threads (the subclass's methods named in `loops`), each looping until `stop()`."""

    loops: tuple[str, ...] = ()

    def __init__(self):
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=getattr(self, f), daemon=True) for f in self.loops]

    def start(self):
        for t in self._threads:
            t.start()
        return self

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(10)


class HealWatch(Sampler):
    """Samples, in threads of their own: every 0.25 s the SelfHealing condition's reason and the
    cluster's Metadata (live brokers, each partition's replicas); every second each broker's
    bytes on disk per partition of `topic` (its skein_log_size_bytes)."""

    loops = ("_status", "_meta", "_disk")

    def __init__(self, env, name: str, topic: str, boot: str, brokers: int):
        super().__init__()
        self.env, self.name, self.topic, self.boot, self.n = env, name, topic, boot, brokers
        self.reasons: list[tuple[float, str]] = []
        self.metadata: list[tuple[float, set[int], dict[int, list[int]]]] = []
        self.sizes: list[tuple[float, int, dict[int, int]]] = []  # (t, broker, partition -> bytes)

    def _status(self):
        while not self._stop.is_set():
            try:
                o = self.env.get("-n", NS, "get", "kafkacluster", self.name)
                c = next((c for c in o.get("status", {}).get("conditions", []) if c["type"] == "SelfHealing"), {})
                if c and (not self.reasons or self.reasons[-1][1] != c["reason"]):
                    self.reasons.append((time.time(), c["reason"]))
            except Exception:  # noqa: BLE001 - a slow kubectl call: the next sample
                pass
            time.sleep(0.25)

    def _meta(self):
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": self.boot, "log_level": 2})
        while not self._stop.is_set():
            try:
                md = admin.list_topics(self.topic, timeout=5)
                parts = {p.id: list(p.replicas) for p in md.topics[self.topic].partitions.values()}
                self.metadata.append((time.time(), set(md.brokers), parts))
            except Exception:  # noqa: BLE001
                pass
            time.sleep(0.25)

    def _disk(self):
        while not self._stop.is_set():
            for b in range(self.n):
                try:
                    text = self.env.k("get", "--raw",
                                      f"/api/v1/namespaces/{NS}/pods/{self.name}-{b}:9644/proxy/metrics")
                except Exception:  # noqa: BLE001 - a broker that is gone
                    continue
                sizes = {}
                for line in text.splitlines():
                    if line.startswith("skein_log_size_bytes{") and f'topic="{self.topic}"' in line:
                        part = int(line.split('partition="')[1].split('"')[0])
                        sizes[part] = int(float(line.rsplit(" ", 1)[1]))
                self.sizes.append((time.time(), b, sizes))
            time.sleep(1)

    def first(self, pred) -> float | None:
        """When the Metadata first showed `pred(brokers, replicas)`."""
        return next((t for t, brokers, parts in self.metadata if pred(brokers, parts)), None)


def test_a_broker_gone_past_the_grace_period_gets_its_replicas_recreated_then_refilled(env):
    """Self-healing: a broker pod that cannot be scheduled (a LimitRange makes its replacement ask
    for more CPU than any node has) stays gone past spec.selfHealing.brokerLossGraceSeconds (20);
    the controller starts re-creating its replicas on other brokers 20 s after it was fenced, to
    within the second (measured from the Metadata: the broker leaving it, then the first new
    replica in it), as ordinary reassignments (copy, join the ISR, then the lost replica leaves)
    throttled to spec.reassignmentThrottleBytesPerSecond (64 KiB/s here: each broker receiving
    copies takes at most that, beyond the throttle's first ten-second window, measured from its
    bytes on disk), while an acks=all producer keeps writing without a failed delivery.
    SelfHealing goes through every step in order: WaitingForBroker, RestoringReplicationFactor,
    ReplicationFactorRestored; and back to NoBrokerLost when the broker can run again, comes
    back empty, and the operator spreads replicas back onto it."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    name, topic = "heal", "heal-t"
    grace, throttle = 20, 65536
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {name}
  namespace: {NS}
spec:
  replicas: 4
  storage:
    size: 1Gi
  reassignmentThrottleBytesPerSecond: {throttle}
  selfHealing:
    brokerLossGraceSeconds: {grace}
  config:
    min.insync.replicas: "2"
---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: {topic}
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 8
  replicationFactor: 3
  config:
    min.insync.replicas: "2"
""")
    boot = ",".join(f"{name}-{i}.{name}-brokers.{NS}.svc:9092" for i in range(4))
    limit_range = f"""apiVersion: v1
kind: LimitRange
metadata:
  name: heal-unschedulable
  namespace: {NS}
spec:
  limits:
  - type: Container
    defaultRequest:
      cpu: "1000"
"""
    writer = AcksAllWriter(boot, topic, 8, "h")
    acked, failed = writer.acked, writer.failed
    watch = HealWatch(env, name, topic, boot, 4)

    def replicas() -> list[list[int]]:
        return [p["replicas"] for p in topic_partitions(env, topic)]

    try:
        ready(env, "kafkacluster", name, 180, "KafkaCluster heal Ready")
        wait_until(lambda: (lambda ps: len(ps) == 8 and all(len(p["isr"]) == 3 for p in ps))(
            topic_partitions(env, topic)), 90, "heal-t placed with full ISRs")
        # The copies self-healing starts are throttled: the operator set the cluster-wide rates
        # (spec.reassignmentThrottleBytesPerSecond) and every broker took them.
        def throttle_rates(pod: str) -> dict:
            text = env.k("get", "--raw", f"/api/v1/namespaces/{NS}/pods/{pod}:9644/proxy/metrics")
            return {line.split('direction="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
                    for line in text.splitlines() if line.startswith("skein_replication_throttle_rate_bytes{")}
        wait_until(lambda: all(throttle_rates(f"{name}-{i}") == {"leader": throttle, "follower": throttle}
                               for i in range(4)), 60, "the replication throttle rates on every broker")
        # 1 MiB per partition: what the lost broker held takes tens of seconds to copy at the rate.
        loader = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 20, "log_level": 2})
        chunk = os.urandom(32 * 1024)
        for part in range(8):
            for _ in range(32):
                loader.produce(topic, b"pre" + chunk, partition=part)
                loader.poll(0)
        assert loader.flush(120) == 0
        writer.start()
        wait_until(lambda: len(acked) > 200, 60, "the producer writing")
        victim = topic_partitions(env, topic)[0]["leader"]
        before = {i: r for i, r in enumerate(replicas())}
        held = sum(victim in r for r in before.values())
        assert held > 0
        watch.start()
        wait_until(lambda: watch.metadata and victim in watch.metadata[-1][1], 30, "the watch sampling")

        # The victim's pod goes, and its replacement cannot be scheduled.
        env.k("apply", "-f", "-", stdin=limit_range)
        env.k("-n", NS, "delete", "pod", f"{name}-{victim}", "--wait=false")
        wait_until(lambda: (lambda p: p if p["metadata"].get("uid") and p["status"].get("phase") == "Pending"
                            else None)(env.get("-n", NS, "get", "pod", f"{name}-{victim}")),
                   60, "the replacement pod Pending")
        waiting = wait_until(lambda: next((r for _, r in watch.reasons if r == "WaitingForBroker"), None)
                             and env.get("-n", NS, "get", "kafkacluster", name), 60, "SelfHealing WaitingForBroker")
        message = next(c for c in waiting["status"]["conditions"] if c["type"] == "SelfHealing")["message"]
        assert f"broker {victim} gone" in message, message

        # Past the grace period: every partition has three in-sync replicas, none on the victim.
        wait_until(lambda: (lambda ps: all(victim not in p["replicas"] and len(p["replicas"]) == 3
                                           and len(p["isr"]) == 3 for p in ps))(topic_partitions(env, topic)),
                   300, "every partition back to three in-sync replicas without the lost broker")
        wait_until(lambda: watch.reasons[-1][1] == "ReplicationFactorRestored", 60,
                   "SelfHealing ReplicationFactorRestored")
        fenced = watch.first(lambda brokers, _: victim not in brokers)
        moved = watch.first(lambda _, parts: any(set(r) - set(before[p]) for p, r in parts.items()))
        assert fenced is not None and moved is not None, (fenced, moved)
        assert grace - 1 <= moved - fenced <= grace + 3, \
            f"replicas re-created {moved - fenced:.1f} s after the broker was fenced (grace {grace} s)"
        steps = [r for _, r in watch.reasons]
        order = ["WaitingForBroker", "RestoringReplicationFactor", "ReplicationFactorRestored"]
        assert [r for r in steps if r in order] == order, f"SelfHealing went {steps}"

        # The copies ran at the throttle: each broker that received new replicas took, beyond the
        # throttle's first ten-second window, at most the rate (and the copy lasted accordingly).
        new_on = {b: {p for p, r in enumerate(replicas()) if b in r and b not in before[p]} for b in range(4)}
        rates = {}
        for b, parts in new_on.items():
            if not parts:
                continue
            series = [(t, sum(sz.get(p, 0) for p in parts)) for t, bb, sz in watch.sizes if bb == b and t >= moved]
            total = series[-1][1]
            start = next(t for t, v in series if v > 0)
            end = next(t for t, v in series if v >= total * 0.98)
            window = [(t, v) for t, v in series if start + 11 <= t <= end]
            assert total > throttle * 15, f"broker {b}: {total} bytes copied, too little to measure a rate"
            assert end - start >= (total - throttle * 11) / throttle * 0.8, \
                f"broker {b}: {total} bytes copied in {end - start:.1f} s: faster than {throttle} B/s"
            if len(window) >= 5:
                rate = (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])
                rates[b] = rate
                assert rate <= throttle * 1.3, f"broker {b} received {rate:.0f} B/s (throttle {throttle})"
        assert rates, f"no copy long enough to measure: {new_on}"
        restored = next(c for c in env.get("-n", NS, "get", "kafkacluster", name)["status"]["conditions"]
                        if c["type"] == "SelfHealing")
        print(f"self-healing: {restored['message']}; moves began {moved - fenced:.1f} s after broker {victim} "
              f"was fenced (grace {grace} s); copy rates B/s {rates} (throttle {throttle}); steps {steps}")
        # The moves are over: the controller took their entries out of the throttle lists.
        from confluent_kafka.admin import AdminClient, ConfigResource
        res = ConfigResource("topic", topic)
        admin = AdminClient({"bootstrap.servers": boot})  # held: a collected client fails its futures
        configs = admin.describe_configs([res])[res].result(30)
        for key in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"):
            assert not (configs[key].value if key in configs else ""), (key, configs[key].value)

        # The broker can run again (and copies may go fast now): it comes back empty and gets
        # replicas again.
        env.k("-n", NS, "patch", "kafkacluster", name, "--type=merge", "-p",
              json.dumps({"spec": {"reassignmentThrottleBytesPerSecond": 52428800}}))
        env.k("-n", NS, "delete", "limitrange", "heal-unschedulable")
        env.k("-n", NS, "delete", "pod", f"{name}-{victim}", "--wait=false")
        ready(env, "kafkacluster", name, 180, "KafkaCluster heal Ready again")
        wait_until(lambda: (lambda rs: sum(victim in r for r in rs) > 0
                            and all(len(p["isr"]) == len(p["replicas"]) == 3 for p in topic_partitions(env, topic)))(
            replicas()), 180, f"replicas spread back onto broker {victim}")
        wait_until(lambda: watch.reasons[-1][1] == "NoBrokerLost", 60, "SelfHealing NoBrokerLost")
        counts = [sum(b in r for r in replicas()) for b in range(4)]
        assert max(counts) - min(counts) <= 1, counts

        writer.finish()
        assert failed == [], failed[:5]
        cons = Consumer({"bootstrap.servers": boot, "group.id": f"heal-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
        cons.assign([TopicPartition(topic, p, 0) for p in range(8)])
        got = [v for v in poll_values(cons, 256 + len(acked), 120) if not v.startswith(b"pre")]
        assert sorted(got) == sorted(acked), f"{len(got)} read back of {len(acked)} acknowledged"
        print(f"self-healing: broker {victim} lost past {grace} s, {held} replicas re-created, "
              f"{len(acked)} acknowledged records all read back, replicas per broker now {counts}")
    finally:
        watch.stop()
        writer.stop()
        env.k("-n", NS, "delete", "limitrange", "heal-unschedulable", "--ignore-not-found", check=False)
        env.k("-n", NS, "delete", "topic", topic, "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)
        env.k("-n", NS, "delete", "pvc", "-l", f"app.kubernetes.io/instance={name}", "--wait=false", check=False)


@pytest.mark.timeout(600)
def test_scale_3_to_6_the_balancer_shows_its_plan_then_spreads_bytes_within_5_percent(env):
    """Balance: a 3-broker cluster with 24 partitions of 0.5-2 MiB each (replication factor 2) is
    scaled to 6. The balancer shows its plan in status.balance (Balanced=False, PlanProposed, an
    Event) and, with spec.balancer.approval Manual, moves nothing until the plan's id is in the
    skein.dev/approve-balance-plan annotation; then it runs as throttled reassignments and ends
    with every broker's bytes on disk (its skein_log_size_bytes, read from the broker) within 5%
    of their mean, or one partition where partitions are coarser than that, and replica counts
    within one of each other: what the planner aims for. The
    reassignments run at the throttle: each broker receiving replicas takes at most
    reassignmentThrottleBytesPerSecond beyond the throttle's first ten-second window (measured from
    its bytes on disk every second). An acks=all producer's p99
    delivery latency while the data moves stays within 2x of its p99 on the same 6 brokers while
    the plan waited."""
    from confluent_kafka import Producer

    name, topic, probe = "spread", "spread-t", "spread-lat"
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {name}
  namespace: {NS}
spec:
  replicas: 3
  storage:
    size: 1Gi
  balancer:
    planDelaySeconds: 20
    minimumImbalanceBytes: 1048576
  # Like Kafka's, the throttle measures its rate over ten seconds at least, so the first ten
  # seconds' worth of bytes pass at once: at 1 MiB/s a new broker's ~10 MiB went by in about a
  # second, too short to measure the producer while data moves. At 256 KiB/s it takes ~30 s.
  reassignmentThrottleBytesPerSecond: 262144
---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: {topic}
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 24
  replicationFactor: 2
---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: {probe}
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 1
  replicationFactor: 3
""")

    def boot(n: int) -> str:
        return ",".join(f"{name}-{i}.{name}-brokers.{NS}.svc:9092" for i in range(n))

    def broker_bytes(i: int, only: str | None = None) -> int:
        text = env.k("get", "--raw", f"/api/v1/namespaces/{NS}/pods/{name}-{i}:9644/proxy/metrics")
        return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines()
                   if line.startswith("skein_log_size_bytes{")
                   and (only is None or f'topic="{only}"' in line))

    def partition_bytes() -> dict[int, int]:
        """Each partition of the loaded topic: its bytes on disk (the largest of its replicas)."""
        sizes: dict[int, int] = {}
        for i in range(6):
            text = env.k("get", "--raw", f"/api/v1/namespaces/{NS}/pods/{name}-{i}:9644/proxy/metrics")
            for line in text.splitlines():
                if line.startswith("skein_log_size_bytes{") and f'topic="{topic}"' in line:
                    p = int(line.split('partition="')[1].split('"')[0])
                    sizes[p] = max(sizes.get(p, 0), int(float(line.rsplit(" ", 1)[1])))
        return sizes

    def kc() -> dict:
        return env.get("-n", NS, "get", "kafkacluster", name)

    def p99_while(running, what: str, boot_n: int) -> tuple[float, int]:
        """p99 of acks=all delivery latency (ms) of 200 records/s to the probe topic while
        running() holds."""
        lat: list[float] = []
        failed: list[str] = []
        p = Producer({"bootstrap.servers": boot(boot_n), "acks": "all", "linger.ms": 0,
                      "enable.idempotence": True, "log_level": 2})

        def done(err, _m, start):
            if err:
                failed.append(str(err))
            else:
                lat.append((time.monotonic() - start) * 1000)
        # Warm up first: an idempotent librdkafka producer's first record waits ~0.5 s for its
        # producer id (the client's own timer), which is not the broker's latency.
        for _ in range(20):
            p.produce(probe, b"w")
        assert p.flush(30) == 0
        while running():
            t = time.monotonic()
            p.produce(probe, b"x" * 100, on_delivery=lambda e, m, t=t: done(e, m, t))
            p.poll(0)
            time.sleep(max(0.0, 0.005 - (time.monotonic() - t)))
        p.flush(60)
        assert not failed, failed[:3]
        assert len(lat) > 200, f"{what}: only {len(lat)} deliveries"
        lat.sort()
        return lat[int(len(lat) * 0.99)], len(lat)

    try:
        ready(env, "kafkacluster", name, 180, "KafkaCluster spread Ready")
        wait_until(lambda: len(topic_partitions(env, topic)) == 24 and len(topic_partitions(env, probe)) == 1,
                   90, "topics placed")
        # 0.5, 1, 1.5 or 2 MiB per partition.
        loader = Producer({"bootstrap.servers": boot(3), "acks": "all", "linger.ms": 20,
                           "batch.size": 1048576, "log_level": 2})
        chunk = os.urandom(64 * 1024)
        for part in range(24):
            for _ in range(8 * (1 + part % 4)):
                loader.produce(topic, chunk, partition=part)
                loader.poll(0)
        assert loader.flush(120) == 0
        # Balanced at 3 brokers first (topics made while a broker was still starting sit on the
        # others until the balancer spreads them).
        wait_until(lambda: cond(kc(), "Balanced") == "True" and not kc()["status"].get("balance")
                   and all_in_sync_of(env, [topic, probe]), 240, "balanced at 3 brokers")
        before = [broker_bytes(i) for i in range(3)]
        print("balance: bytes per broker at 3 brokers", before)

        # From now on a plan waits for its approval.
        env.k("-n", NS, "patch", "kafkacluster", name, "--type=merge", "-p",
              json.dumps({"spec": {"replicas": 6, "balancer": {"approval": "Manual"}}}))
        # The plan is shown before anything moves.
        plan = wait_until(lambda: (lambda b: b if b and b.get("state") == "Proposed" else None)(
            kc().get("status", {}).get("balance")), 180, "a balance plan in status.balance")
        moved_early = {3, 4, 5} & {b for p in topic_partitions(env, topic) for b in p["replicas"]}
        assert not moved_early, f"replicas on {moved_early} before the plan ran"
        assert [b["id"] for b in plan["brokers"]] == list(range(6)), plan
        assert plan["moveCount"] > 0 and any(m["toBroker"] >= 3 for m in plan["moves"]), plan
        balanced = next(c for c in kc()["status"]["conditions"] if c["type"] == "Balanced")
        assert balanced["status"] == "False" and balanced["reason"] == "PlanProposed", balanced
        events = env.get("-n", NS, "get", "events", "--field-selector",
                         f"involvedObject.name={name},reason=BalancePlanProposed")["items"]
        # (Events of one reason fold into a series: the first plan's note names its own id.)
        assert any("balance plan" in e["message"] for e in events), [e["message"] for e in events]
        print(f"balance: plan {plan['planId']}: {plan['moveCount']} moves, "
              f"{plan['bytesToMove'] >> 20} MiB, brokers {plan['brokers']}")

        # Unapproved, it waits (well past planDelaySeconds): the producer's baseline on 6 brokers.
        t_idle = time.monotonic() + 25
        idle_p99, n_idle = p99_while(lambda: time.monotonic() < t_idle, "idle", 6)
        waiting = kc()["status"].get("balance") or {}
        assert waiting.get("state") == "Proposed", waiting
        moved_early = {3, 4, 5} & {b for p in topic_partitions(env, topic) for b in p["replicas"]}
        assert not moved_early, f"replicas on {moved_early} before the plan was approved"

        # Approved by its id: it runs; measure the producer while replicas move.
        env.k("-n", NS, "annotate", "kafkacluster", name, "--overwrite",
              f"skein.dev/approve-balance-plan={waiting['planId']}")
        wait_until(lambda: (kc().get("status", {}).get("balance") or {}).get("state") == "Running", 120,
                   "the plan running")

        state = {"moving": True, "sampling": True}
        received: dict[int, list[tuple[float, int]]] = {i: [] for i in range(3, 6)}

        def watch():
            while state["moving"]:
                b = kc().get("status", {}).get("balance")
                state["moving"] = bool(b) and b.get("state") == "Running"
                time.sleep(0.5)

        def sample():
            # The new brokers' bytes of the loaded topic (all of it copied to them), every second.
            while state["sampling"]:
                for i in received:
                    try:
                        received[i].append((time.time(), broker_bytes(i, topic)))
                    except Exception:  # noqa: BLE001 - a slow proxy call: the next sample
                        pass
                time.sleep(1)
        threading.Thread(target=watch, daemon=True).start()
        threading.Thread(target=sample, daemon=True).start()
        busy_p99, n_busy = p99_while(lambda: state["moving"], "moving", 6)

        def approved_plan_done() -> bool:
            # Done: no plan, or only a later one waiting for its own approval (Manual).
            b = kc().get("status", {}).get("balance")
            later = bool(b) and b.get("planId") != waiting["planId"] and b.get("state") == "Proposed"
            return (not b or later) and all_in_sync_of(env, [topic, probe])
        wait_until(approved_plan_done, 300, "the approved plan done with every partition in sync")
        state["sampling"] = False
        # Each new broker received its replicas at the throttle (262144 B/s) beyond the throttle's
        # first ten-second window, and so took as long as that rate needs.
        throttle = 262144
        rates = {}
        for i, series in received.items():
            total = series[-1][1]
            start = next(t for t, v in series if v > 0)
            end = next(t for t, v in series if v >= total * 0.98)
            assert end - start >= (total - throttle * 11) / throttle * 0.8, \
                f"broker {i}: {total} bytes received in {end - start:.1f} s: faster than {throttle} B/s"
            window = [(t, v) for t, v in series if start + 11 <= t <= end]
            assert len(window) >= 5, f"broker {i}: the copy ended within the throttle's first window: {series}"
            rates[i] = (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])
            assert rates[i] <= throttle * 1.3, f"broker {i} received {rates[i]:.0f} B/s (throttle {throttle})"
        print(f"balance: new brokers received {{broker: B/s}} {({i: round(r) for i, r in rates.items()})} "
              f"beyond the first window (throttle {throttle})")
        # The loaded topic's bytes: the probe topic (replication factor 3, so on three of the six
        # brokers) was empty when the plan was made and grows by ~2 MB on those three while this
        # test measures latency, data no plan could have seen.
        after = [broker_bytes(i, topic) for i in range(6)]
        mean = sum(after) / 6
        print(f"balance: bytes per broker at 6 brokers {after} (mean {mean:.0f}; with the probe topic "
              f"{[broker_bytes(i) for i in range(6)]}); producer p99 "
              f"{idle_p99:.1f} ms before approval ({n_idle}), {busy_p99:.1f} ms while moving ({n_busy})")
        counts = {i: 0 for i in range(6)}
        for p in topic_partitions(env, topic) + topic_partitions(env, probe):
            for b in p["replicas"]:
                counts[b] += 1
        print(f"balance: replicas per broker at 6 brokers {counts}")
        # What the planner aims for (half the 10% threshold): every broker within 5% of the mean,
        # except where the partitions are too coarse for that: here a mean of 10 MiB in partitions of
        # 0.5 to 2 MiB, so no closer than one 0.5 MiB partition (5.0014% was seen). And 51 replicas,
        # 8 or 9 each.
        # (One partition: its size on disk, 1% over for the record overheads that differ between
        # brokers' mixes of partitions.) The plan ran as shown: each broker ends at its bytesAfter.
        smallest = min(partition_bytes().values())
        assert all(abs(b - mean) <= max(0.05 * mean, 1.01 * smallest) for b in after), (after, smallest)
        assert after == [b["bytesAfter"] for b in waiting["brokers"]], (after, waiting["brokers"])
        assert max(counts.values()) - min(counts.values()) <= 1, counts
        # Throttled moves keep producers' p99 within twice the idle one, plus 10 ms: idle p99s
        # here are a few ms, and on two shared cores one scheduling hiccup doubles such a figure
        # (7.9 -> 16.2 ms while another build ran) without the moves being at fault.
        assert busy_p99 <= 2 * idle_p99 + 10, (idle_p99, busy_p99)
    finally:
        env.k("-n", NS, "delete", "topic", topic, probe, "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)
        env.k("-n", NS, "delete", "pvc", "-l", f"app.kubernetes.io/instance={name}", "--wait=false", check=False)


def all_in_sync_of(env, topics: list[str]) -> bool:
    parts = [p for t in topics for p in topic_partitions(env, t)]
    return bool(parts) and all(sorted(p["isr"]) == sorted(p["replicas"]) and p["leader"] >= 0 for p in parts)


def test_replication_factor_change_reassigns_every_partition(env):
    """spec.replicationFactor of a Topic changes: 1 -> 3 on a three-broker cluster adds two
    replicas to every partition through a reassignment (they catch up and join the ISR; the
    preferred leader stays first), which the Topic status, the Kafka Metadata API and
    kafka-topics --describe all show. Then the broker that held partition 0's only replica
    loses its pod and its volume, and every acknowledged record is read back from the replicas
    the change added. 3 -> 2 drops one replica of each partition and keeps its leader."""
    import re

    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    name, topic = "grow", "grow-t"
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {name}
  namespace: {NS}
spec:
  replicas: 3
  storage:
    size: 1Gi
  config:
    # Leadership returns to the preferred replicas within a second.
    leader.imbalance.check.interval.seconds: "1"
""")
    topic_yaml = f"""apiVersion: skein.dev/v1alpha1
kind: Topic
metadata:
  name: {topic}
  namespace: {NS}
spec:
  clusterRef:
    name: {name}
  partitions: 3
  replicationFactor: 1
"""
    boot = ",".join(f"{name}-{i}.{name}-brokers.{NS}.svc:9092" for i in range(3))

    def partitions() -> list[dict]:
        return topic_partitions(env, topic)

    def settled(rf: int) -> list[dict] | None:
        """The partitions once each has `rf` replicas, all in sync, with a
        leader and no reassignment running; the Topic Ready for its spec."""
        t = env.get("-n", NS, "get", "topic", topic)
        ps = t.get("status", {}).get("partitions", [])
        ok = len(ps) == 3 and all(len(p["replicas"]) == rf and sorted(p["isr"]) == sorted(p["replicas"])
                                  and p["leader"] >= 0 and not p.get("addingReplicas")
                                  and not p.get("removingReplicas") for p in ps)
        current = t["status"].get("observedGeneration") == t["metadata"]["generation"]
        return ps if ok and current and cond(t, "Ready") == "True" else None

    def metadata() -> dict:
        md = AdminClient({"bootstrap.servers": boot}).list_topics(topic, timeout=10).topics[topic]
        return {p.id: (sorted(p.replicas), sorted(p.isrs), p.leader) for p in md.partitions.values()}

    def read_all(want: int) -> list[bytes]:
        cons = Consumer({"bootstrap.servers": boot, "group.id": f"rf-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
        cons.assign([TopicPartition(topic, p, 0) for p in range(3)])
        return poll_values(cons, want, 90)

    def events(reason: str) -> list[dict]:
        return [e for e in env.get("-n", NS, "get", "events", "--field-selector", f"reason={reason}")["items"]
                if e.get("involvedObject", {}).get("name") == topic]

    try:
        # The topic once all three brokers are up: placed on one broker each (created earlier, its
        # replicas would be moved onto the brokers that joined later).
        wait_until(lambda: len([b for b in env.get("-n", NS, "get", "kafkacluster", name)
                                .get("status", {}).get("brokers", []) if b["ready"]]) == 3,
                   240, f"3 brokers of {name} registered")
        env.k("apply", "-f", "-", stdin=topic_yaml)
        before = wait_until(lambda: settled(1), 120, f"{topic} placed at replication factor 1 and Ready")
        assert sorted(p["replicas"][0] for p in before) == [0, 1, 2], before
        originals = {p["partition"]: p["replicas"][0] for p in before}
        prod = Producer({"bootstrap.servers": boot, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
        acked: list[bytes] = []
        failed: list[str] = []

        def report(err, msg):
            (failed.append(str(err)) if err else acked.append(msg.value()))
        for i in range(3000):
            prod.produce(topic, f"rf-{i}".encode() + b"x" * 100, partition=i % 3, on_delivery=report)
            if i % 500 == 0:
                prod.poll(0)
        assert prod.flush(60) == 0 and not failed, failed[:3]
        assert len(acked) == 3000

        # 1 -> 3: every partition reassigned; its only replica stays first (the preferred leader).
        env.k("-n", NS, "patch", "topic", topic, "--type=merge", "-p", '{"spec": {"replicationFactor": 3}}')
        grown = wait_until(lambda: settled(3), 180, f"every partition of {topic} with 3 replicas in sync")
        for p in grown:
            assert p["replicas"][0] == originals[p["partition"]], p
            assert sorted(p["replicas"]) == [0, 1, 2], p
        started = wait_until(lambda: events("ReplicationFactorChanging"), 30, "a ReplicationFactorChanging Event")
        assert "replication factor 3: reassigning 3 partition(s)" in started[-1]["message"], started[-1]
        wait_until(lambda: events("ReplicationFactorChanged"), 60, "a ReplicationFactorChanged Event")
        wait_until(lambda: all(r == [0, 1, 2] and i == [0, 1, 2] for r, i, _ in metadata().values()), 30,
                   "the brokers' Metadata: 3 replicas, all in sync, for every partition")
        # Kafka's own kafka-topics too, where Java and Kafka's jars are (the runner pod of
        # cluster-e2e.sh has neither, which is said, not hidden; the Metadata check above stands).
        java_here = shutil.which("java") and (ROOT / "e2e/kafka-dist/pom.xml").exists()
        if MODE == "existing" and not java_here:
            print("NOTE: no Java or Kafka jars in this runner: the kafka-topics --describe step of the "
                  "replication factor test did not run")
        else:
            described = kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", boot,
                                   "--describe", "--topic", topic).stdout.decode()
            rows = re.findall(r"Partition: (\d+)\s+Leader: (-?\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]*)",
                              described)
            assert len(rows) == 3, described
            for _, _, replicas, isr in rows:
                assert sorted(replicas.split(",")) == ["0", "1", "2"] and \
                    sorted(isr.split(",")) == ["0", "1", "2"], described
            print("kafka-topics --describe after 1 -> 3:\n" + described.strip())

        # The broker that held partition 0's only copy loses its pod and its volume: every
        # acknowledged record is still there, served by the replicas the change added.
        victim = originals[0]
        lose_volume(env, f"{name}-{victim}")
        got = read_all(len(acked))
        assert len(got) == len(acked) and sorted(got) == sorted(acked), \
            f"{len(got)} read back of {len(acked)} acknowledged after broker {victim} lost its volume"
        print(f"broker {victim} (partition 0's original replica) on a new volume: all {len(acked)} records read back")

        # 3 -> 2, once the victim has caught up and the preferred leaders lead again.
        leaders = wait_until(lambda: (lambda ps: {p["partition"]: p["leader"] for p in ps}
                                      if ps and all(p["leader"] == p["replicas"][0] for p in ps) else None)(
            settled(3)), 180, "every partition in sync again, led by its preferred replica")
        replicas3 = {p["partition"]: p["replicas"] for p in partitions()}
        env.k("-n", NS, "patch", "topic", topic, "--type=merge", "-p", '{"spec": {"replicationFactor": 2}}')
        shrunk = wait_until(lambda: settled(2), 120, f"every partition of {topic} with 2 replicas in sync")
        for p in shrunk:
            i = p["partition"]
            assert p["leader"] == leaders[i] and p["replicas"][0] == leaders[i], (p, leaders)
            assert set(p["replicas"]) < set(replicas3[i]), (p, replicas3)
        wait_until(lambda: all(len(r) == 2 and r == i for r, i, _ in metadata().values()), 30,
                   "the brokers' Metadata: 2 replicas for every partition")
        got = read_all(len(acked))
        assert sorted(got) == sorted(acked), f"{len(got)} read back of {len(acked)} after 3 -> 2"

        # More replicas than brokers: refused, and nothing moves.
        env.k("-n", NS, "patch", "topic", topic, "--type=merge", "-p", '{"spec": {"replicationFactor": 4}}')
        t = wait_until(lambda: (lambda o: o if cond(o, "Degraded") == "True" else None)(
            env.get("-n", NS, "get", "topic", topic)), 60, "replication factor 4 refused")
        deg = [c for c in t["status"]["conditions"] if c["type"] == "Degraded"][0]
        assert deg["reason"] == "ReplicationFactorTooLarge", deg
        assert all(len(p["replicas"]) == 2 for p in partitions())
        r = env.k_run("-n", NS, "patch", "topic", topic, "--type=merge", "-p", '{"spec": {"replicationFactor": 0}}')
        assert r.returncode != 0 and "replicationFactor" in r.stderr, r.stderr
    finally:
        env.k("-n", NS, "delete", "topic", topic, "--ignore-not-found", "--timeout=60s", check=False)
        env.k("-n", NS, "delete", "kafkacluster", name, "--ignore-not-found", "--wait=false", check=False)


def test_namespaced_install_manages_only_its_namespaces_with_roles(env):
    """watchNamespaces: the chart renders a Role and RoleBinding in each listed namespace and no
    ClusterRole, and the operator watches only those namespaces: a KafkaCluster there gets its
    objects, one in another namespace is left alone, and the operator's ServiceAccount can do
    nothing outside them. Then back to a cluster-wide install."""
    other = f"{NS}-unwatched"
    sa = env.k("-n", OP_NS, "get", "deployment", "-o",
               "jsonpath={.items[0].spec.template.spec.serviceAccountName}").strip()
    who = f"system:serviceaccount:{OP_NS}:{sa}"

    def can(verb: str, res: str, *where: str) -> bool:
        return env.k("auth", "can-i", verb, res, *where, "--as", who, check=False).strip() == "yes"

    def leader_of(pods_before: set[str]) -> dict | None:
        p = env.leader_pod()
        return p if p and p["metadata"]["name"] not in pods_before else None

    def cluster(cname: str, ns: str) -> str:
        return f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata:
  name: {cname}
  namespace: {ns}
spec:
  replicas: 1
  storage:
    size: 1Gi
"""
    pods = {p["metadata"]["name"] for p in env.get("-n", OP_NS, "get", "pods")["items"]}
    env.k("create", "namespace", other)
    try:
        env.helm_install("--set", f"watchNamespaces={{{NS}}}", verb="upgrade")
        assert env.k_run("get", "clusterrole", "skein").returncode != 0, "no ClusterRole in a namespaced install"
        assert env.k_run("get", "clusterrolebinding", "skein").returncode != 0
        role = env.get("-n", NS, "get", "role", "skein")
        assert any("secrets" in r["resources"] for r in role["rules"]), role["rules"]
        assert env.k_run("-n", other, "get", "role", "skein").returncode != 0
        assert can("create", "secrets", "-n", NS) and can("patch", "statefulsets.apps", "-n", NS)
        for verb, res in [("get", "secrets"), ("create", "secrets"), ("delete", "pods"),
                          ("list", "kafkaclusters.skein.dev"), ("patch", "statefulsets.apps")]:
            assert not can(verb, res, "-n", other), (verb, res, other)
        assert not can("list", "kafkaclusters.skein.dev", "--all-namespaces")
        assert not can("list", "nodes"), "no cluster-scoped permission"
        # The new operator pods (the Deployment's env changed) take the Lease.
        wait_until(lambda: leader_of(pods), 120, "a new operator replica holding the Lease")
        env.k("apply", "-f", "-", stdin=cluster("watched", NS) + "---\n" + cluster("unwatched", other))
        wait_until(lambda: env.get("-n", NS, "get", "statefulset", "watched"), 90,
                   "the watched namespace's cluster gets its StatefulSet")
        wait_until(lambda: env.get("-n", NS, "get", "kafkacluster", "watched").get("status"), 60,
                   "the watched cluster's status")
        time.sleep(5)
        assert not env.get("-n", other, "get", "kafkacluster", "unwatched").get("status"), \
            "a cluster outside watchNamespaces has no status"
        assert env.k("-n", other, "get", "statefulsets", "-o", "name").strip() == ""
    finally:
        env.k("-n", NS, "delete", "kafkacluster", "watched", "--ignore-not-found", "--wait=false", check=False)
        env.k("-n", other, "delete", "kafkacluster", "unwatched", "--ignore-not-found", "--wait=false", check=False)
        env.k("delete", "namespace", other, "--wait=false", check=False)
        pods = {p["metadata"]["name"] for p in env.get("-n", OP_NS, "get", "pods")["items"]}
        env.helm_install(verb="upgrade")
        wait_until(lambda: leader_of(pods), 120, "a cluster-wide operator holding the Lease again")
    assert wait_until(lambda: can("list", "kafkaclusters.skein.dev", "--all-namespaces"), 30,
                      "the ClusterRole back")
