"""The Kubernetes tier of metadata_scale.py (`--systems skein-k8s`, issue #16): the same
measurements on the e2e/k8s control plane instead of `skein-operator local`.

    e2e/k8s/netns.sh e2e/.venv/bin/python e2e/bench/metadata_scale.py --systems skein-k8s --partitions 30000

What runs (everything the operator suite's fixture starts, e2e/k8s/test_operator.py LocalCluster):

  - the local control plane of e2e/k8s/up.sh (etcd, kube-apiserver, kube-controller-manager,
    kube-scheduler built from source; kwok for 3 fake nodes), its state under the run's work dir;
  - charts/skein installed with helm (CRDs, RBAC, the operator Deployment: 2 replicas, one active
    through the Lease; the chart's default lease of 15 s). pod_runner.py runs each operator pod
    as a local `skein-operator kubernetes` process with a token of the chart's ServiceAccount;
  - a KafkaCluster of 3 brokers whose spec.config is the benchmark's broker settings. The operator
    makes the StatefulSet; pod_runner.py (the kubelet's stand-in) runs each broker pod's own
    command line as a `skein-broker` process bound to the pod IP, its data in a directory named
    after the pod's PVC, and restarts a broker that exits (restartPolicy Always, back-off 1, 2,
    4 … 10 s, as the kubelet);
  - the controller is the active operator replica's process: it keeps the metadata log in
    ConfigMaps (`<cluster>-controller` head + `<cluster>-controller-<blob>`), writes each
    topic's partitions into the status of a Topic resource (one per topic made through the Kafka
    API), and holds a control session with every broker.

Must run under e2e/k8s/netns.sh (as root): pod IPs are local addresses in its network namespace
and its private /etc/hosts, kept by pod_runner.py, resolves the brokers' advertised names
(`<cluster>-N.<cluster>-brokers.<namespace>.svc`), so the benchmark's Kafka clients reach the
pods as the operator suite's tests do.

The broker ids are the pod ordinals 0, 1, 2. A SIGKILL or SIGTERM goes to the broker process
(the pod's PID 1 after the shell's `exec`), as the kubelet signals a container; the pod object
stays, and pod_runner.py starts the process again after its back-off."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import metadata_scale as ms  # the module running as __main__ (metadata_scale.py aliases itself)

K8S_DIR = ms.E2E_DIR / "k8s"
sys.path.insert(0, str(K8S_DIR))

import test_operator as k8s  # noqa: E402  (LocalCluster: up.sh, helm, the pod runners; NS, OP_NS)

CLUSTER = "bench"
KAFKA_PORT = 9092
SA_PATH = Path("/var/run/secrets/kubernetes.io/serviceaccount")
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
# One process per pod: the runner's map of processes is changed by its own thread.
RUNNER_RETRIES = 5


def runner_pid(runner, pod: str) -> int | None:
    """The pid of the process pod_runner.py runs for `pod` (None while it is not running)."""
    for _ in range(RUNNER_RETRIES):
        try:
            return runner.pid_of(pod)
        except RuntimeError:  # "dictionary changed size during iteration"
            time.sleep(0.01)
    return None


def runner_restarts(runner, pod: str) -> int | None:
    for e in list(runner.procs.values()):
        if e["name"] == pod:
            return e.get("restarts", 0)
    return None


def newest(paths) -> Path | None:
    paths = [p for p in paths if p.exists()]
    return max(paths, key=lambda p: p.stat().st_mtime) if paths else None


def cluster_object(overrides: dict[str, str]) -> dict:
    return {"apiVersion": "skein.dev/v1alpha1", "kind": "KafkaCluster",
            "metadata": {"name": CLUSTER, "namespace": k8s.NS},
            "spec": {"replicas": 3, "storage": {"size": "100Gi"}, "config": dict(overrides)}}


class SkeinK8sSystem:
    """Skein on the e2e/k8s control plane: the chart's operator (controller in the active
    replica's process, metadata in ConfigMaps) and a KafkaCluster of 3 broker pods run by
    pod_runner.py."""

    kind = "skein-k8s"
    label = "Skein on Kubernetes"
    controller_note = ("the active skein-operator replica's process (the chart's Deployment, 2 replicas and a Lease; "
                       "run by pod_runner.py): controller core in-process, metadata log in ConfigMaps, partition "
                       "state mirrored into Topic status; it does not restart brokers, pod_runner.py does")

    def __init__(self, workdir: Path, overrides: dict[str, str], start_timeout: float):
        self.workdir = workdir
        self.overrides = dict(overrides)
        # the control plane and the chart come first (~30-60 s here)
        self.start_timeout = start_timeout + 300
        self.ids = [0, 1, 2]
        self.operator_bin = Path(os.environ.get("SKEIN_OPERATOR_BIN", ms.CACHE_RELEASE / "skein-operator"))
        self.broker_bin = Path(os.environ.get("SKEIN_BROKER_BIN", self.operator_bin.parent / "skein-broker"))
        self.env: k8s.LocalCluster | None = None
        self.ips: dict[int, str] = {}
        self.leader: tuple[str, int] | None = None  # (operator pod, pid)
        self.leaders_seen: list[str] = []
        self.sa_made: list[Path] = []
        self.start_phases: dict = {}

    # -- what metadata_scale.py asks of a system

    def describe(self) -> dict:
        d = ms.describe_binaries(self.operator_bin, self.broker_bin)
        versions = dict(line.split("=", 1) for line in (K8S_DIR / "versions.env").read_text().splitlines()
                        if "=" in line and not line.startswith("#"))
        d["kubernetes"] = {k: v.split("#")[0].strip() for k, v in versions.items()}
        d["layout"] = ("e2e/k8s control plane (kwok nodes), charts/skein (operator Deployment, 2 replicas, Lease "
                       "15 s), KafkaCluster of 3 brokers; pods run by e2e/k8s/pod_runner.py")
        d["namespace"], d["operator_namespace"] = k8s.NS, k8s.OP_NS
        d["kafka_cluster"] = cluster_object(self.overrides)
        d["controller_note"] = self.controller_note
        return d

    def start(self):
        if not os.environ.get("SKEIN_K8S_IN_NETNS"):
            raise RuntimeError("skein-k8s runs under e2e/k8s/netns.sh (pod IPs and names are local there)")
        for b in (self.operator_bin, self.broker_bin):
            if not (b.is_file() and os.access(b, os.X_OK)):
                raise RuntimeError(f"{b} not found: set SKEIN_OPERATOR_BIN / SKEIN_BROKER_BIN")
        # LocalCluster's pod runners take the binaries from the environment.
        os.environ["SKEIN_OPERATOR_BIN"] = str(self.operator_bin)
        os.environ["SKEIN_BROKER_BIN"] = str(self.broker_bin)
        # It mounts the ServiceAccount token dir there (in netns.sh's private mount namespace), but
        # the mount point is made on the real file system: removed again by stop() if made here.
        p = SA_PATH
        while not p.exists():
            self.sa_made.append(p)
            p = p.parent
        self.workdir.mkdir(parents=True, exist_ok=True)
        deadline = ms.now() + self.start_timeout
        t = ms.now()
        self.env = k8s.LocalCluster(self.workdir)
        self.env.start_platform()
        self.start_phases["control_plane_s"] = round(ms.now() - t, 2)
        t = ms.now()
        # The chart as an installation gets it: its default lease (the suite shortens it to 6 s).
        self.env.helm_install("--set", "leaderElection.leaseDurationSeconds=15")
        self.env.k("create", "namespace", k8s.NS)
        k8s.wait_until(self.env.leader_pod, max(30.0, deadline - ms.now()), "an operator replica holding the Lease")
        self.start_phases["operator_s"] = round(ms.now() - t, 2)
        t = ms.now()
        self.env.k("apply", "-f", "-", stdin=json.dumps(cluster_object(self.overrides)))

        def registered():
            kc = self.env.get("-n", k8s.NS, "get", "kafkacluster", CLUSTER)
            return len([b for b in kc.get("status", {}).get("brokers", []) if b.get("ready")]) == 3
        k8s.wait_until(registered, max(30.0, deadline - ms.now()), "3 brokers registered with the controller")
        self.refresh_ips()
        for b in self.ids:
            self.wait_listed(b, deadline)
        self.start_phases["brokers_s"] = round(ms.now() - t, 2)
        self.controller_pid()

    def refresh_ips(self):
        for b in self.ids:
            pod = self.env.get("-n", k8s.NS, "get", "pod", f"{CLUSTER}-{b}")
            self.ips[b] = pod["status"]["podIP"]

    def wait_listed(self, bid: int, deadline: float):
        """Broker bid answers Metadata listing all 3 brokers."""
        last = None
        while ms.now() < deadline:
            mc = ms.MetadataClient(self.ips[bid], KAFKA_PORT, timeout=30)
            try:
                if len(mc.fetch().brokers) >= 3:
                    return
            except Exception as e:  # noqa: BLE001
                last = e
            finally:
                mc.close()
            time.sleep(0.3)
        raise ms.Unreachable(f"broker {bid} ({self.ips.get(bid)}) does not list 3 brokers in time ({last})")

    def stop(self):
        if self.env is None:
            return
        try:
            # The brokers first, all at once (each would otherwise get the runner's 10 s one after
            # the other), while the controller still runs; then the operator; then the platform.
            brokers = self.env.runners[1:] if len(self.env.runners) > 1 else []
            for b in self.ids:
                pid = self.broker_pid(b)
                if pid:
                    try:
                        os.killpg(pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            for r in brokers:
                r.stop()
        finally:
            # down.sh keeps the state dir (the control plane's logs, which run_one copies after this);
            # it goes with the work dir.
            keep = os.environ.get("SKEIN_K8S_KEEP")
            os.environ["SKEIN_K8S_KEEP"] = "1"
            try:
                self.env.teardown()
            finally:
                if keep is None:
                    os.environ.pop("SKEIN_K8S_KEEP", None)
                else:
                    os.environ["SKEIN_K8S_KEEP"] = keep
            self.env = None
            for p in self.sa_made:  # deepest first
                try:
                    p.rmdir()
                except OSError:
                    pass

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{CLUSTER}-{b}.{CLUSTER}-brokers.{k8s.NS}.svc:{KAFKA_PORT}" for b in self.ids)

    def addr(self, bid: int) -> tuple[str, int]:
        return self.ips[bid], KAFKA_PORT

    def controller_pid(self) -> int | None:
        """The Lease holder's process (looked up again when that process is gone)."""
        if self.leader and ms.proc_alive(self.leader[1]):
            return self.leader[1]
        if self.env is None:
            return None
        try:
            pod = self.env.leader_pod()
        except Exception:  # noqa: BLE001
            return None
        if not pod:
            return None
        name = pod["metadata"]["name"]
        pid = runner_pid(self.env.runners[0], name)
        self.leader = (name, pid) if pid else None
        if pid and (not self.leaders_seen or self.leaders_seen[-1] != name):
            self.leaders_seen.append(name)
        return pid

    def broker_pid(self, bid: int) -> int | None:
        if self.env is None or len(self.env.runners) < 2:
            return None
        return runner_pid(self.env.runners[1], f"{CLUSTER}-{bid}")

    def _signal(self, bid: int, sig: int) -> int:
        pid = self.broker_pid(bid)
        if pid is None:
            raise ms.Unreachable(f"broker {bid} has no running process")
        os.kill(pid, sig)
        return pid

    def kill9(self, bid: int) -> int:
        return self._signal(bid, signal.SIGKILL)

    def sigterm(self, bid: int) -> int:
        return self._signal(bid, signal.SIGTERM)

    def bring_back(self, bid: int, old_pid: int, timeout: float) -> dict:
        """pod_runner.py restarts the exited broker after its back-off: wait for the new process."""
        t0 = ms.now()
        new = None
        while ms.now() - t0 < timeout:
            p = self.broker_pid(bid)
            if p and p != old_pid:
                new = p
                break
            time.sleep(0.05)
        if new is None:
            raise ms.Unreachable(f"pod_runner.py did not restart broker {bid} within {timeout:.0f} s")
        return {"restarted_by": "pod_runner.py (the kubelet's stand-in: restartPolicy Always, back-off "
                                "1, 2, 4 … 10 s)",
                "new_process_after_s": round(ms.now() - t0, 2),
                "restarts": runner_restarts(self.env.runners[1], f"{CLUSTER}-{bid}")}

    def wait_exit(self, pid: int, timeout: float) -> bool:
        t0 = ms.now()
        while ms.now() - t0 < timeout:
            if not ms.proc_alive(pid):
                return True
            time.sleep(0.02)
        return False

    def data_path(self, bid: int) -> Path:
        """The directory backing the pod's PVC (pod_runner.py: <claim>-<uid>)."""
        found = newest((self.workdir / "runner" / "volumes").glob(f"data-{CLUSTER}-{bid}-*"))
        return found or self.workdir / "runner" / "volumes" / f"data-{CLUSTER}-{bid}"

    @property
    def data_root(self) -> Path:
        return self.workdir / "runner" / "volumes"

    def logs(self) -> dict[str, Path]:
        d: dict[str, Path] = {}
        ops = sorted((self.workdir / "op-runner" / "logs").glob("*.log"))
        active = self.leader[0] if self.leader else None
        for p in ops:
            pod = p.name.rsplit("-", 1)[0]
            d["controller" if pod == active else f"operator-{pod}"] = p
        for b in self.ids:
            p = newest((self.workdir / "runner" / "logs").glob(f"{CLUSTER}-{b}-*.log"))
            if p:
                d[f"broker-{b}"] = p
        for name in ("kube-apiserver", "etcd"):
            d[name] = self.workdir / "k8s" / "logs" / f"{name}.log"
        return d

    # -- extras metadata_scale.py records when a system has them

    def other_pids(self) -> dict[str, int | None]:
        """The standby operator replica and the control plane's processes."""
        out: dict[str, int | None] = {}
        if self.env is None:
            return out
        active = self.leader[0] if self.leader else None
        for e in list(self.env.runners[0].procs.values()):
            if e["name"] != active and e["proc"].poll() is None:
                out[f"operator-standby {e['name']}"] = e["proc"].pid
        for name in CONTROL_PLANE:
            try:
                out[name] = int((self.workdir / "k8s" / "pids" / name).read_text())
            except (OSError, ValueError):
                out[name] = None
        return out

    def platform(self) -> dict:
        """What the cluster's state costs on Kubernetes: the metadata log's ConfigMaps, the Topic
        resources, etcd's database, the Lease; and the start's phases."""
        out: dict = {"start": dict(self.start_phases)}
        if self.env is None:
            return out
        try:
            cms = self.env.get("-n", k8s.NS, "get", "configmaps")["items"]
            mine = [c for c in cms if c["metadata"]["name"].startswith(f"{CLUSTER}-controller")]
            sizes = [sum(len(v) for v in (c.get("data") or {}).values()) for c in mine]
            head = next((c for c in mine if c["metadata"]["name"] == f"{CLUSTER}-controller"), None)
            out["metadata_configmaps"] = len(mine)
            out["metadata_kib"] = round(sum(sizes) / 1024, 1)
            out["metadata_largest_kib"] = round(max(sizes, default=0) / 1024, 1)
            if head:
                h = json.loads((head.get("data") or {}).get("head.json", "{}") or "{}")
                out["head"] = {"snapshot_blobs": len(h.get("snapshot") or []), "log_blobs": len(h.get("log") or []),
                               "tail_records": len(h.get("tail") or [])}
        except Exception as e:  # noqa: BLE001
            out["metadata_error"] = str(e)[:300]
        try:
            r = subprocess.run([*self.kubectl(), "-n", k8s.NS, "get", "topics", "-o", "json"],
                               capture_output=True, text=True, timeout=120)
            topics = json.loads(r.stdout)["items"]
            st = [len(json.dumps(t.get("status") or {})) for t in topics]
            out["topic_resources"] = len(topics)
            out["topic_resources_with_partitions"] = sum(1 for t in topics if (t.get("status") or {}).get("partitions"))
            out["topic_status_kib"] = round(sum(st) / 1024, 1)
            out["topics_not_ready"] = sum(1 for t in topics if k8s.cond(t, "Ready") != "True")
        except Exception as e:  # noqa: BLE001
            out["topics_error"] = str(e)[:300]
        try:
            lease = self.env.get("-n", k8s.OP_NS, "get", "lease", "skein-operator")["spec"]
            out["lease"] = {"holder": lease.get("holderIdentity"), "transitions": lease.get("leaseTransitions")}
        except Exception as e:  # noqa: BLE001
            out["lease_error"] = str(e)[:300]
        out["operator_replicas_seen_active"] = list(self.leaders_seen)
        try:
            kc = self.env.get("-n", k8s.NS, "get", "kafkacluster", CLUSTER)
            out["kafkacluster_conditions"] = {c["type"]: f"{c['status']} ({c.get('reason')})"
                                              for c in kc.get("status", {}).get("conditions", [])}
        except Exception as e:  # noqa: BLE001
            out["kafkacluster_error"] = str(e)[:300]
        db = self.workdir / "k8s" / "etcd" / "member" / "snap" / "db"
        try:
            out["etcd_db_mib"] = round(db.stat().st_size / ms.MIB, 1)
        except OSError:
            pass
        # This process's CPU (the pod runners' threads, the clients) and its finished children's (the
        # runners' kubectl calls every 0.3 s, and broker processes that exited): the harness' share.
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        out["harness_cpu_s"] = {"self": round(me.ru_utime + me.ru_stime, 1),
                                "children": round(kids.ru_utime + kids.ru_stime, 1)}
        try:
            dep = self.env.get("-n", k8s.OP_NS, "get", "deployment")["items"][0]
            out["operator_resources"] = dep["spec"]["template"]["spec"]["containers"][0].get("resources")
        except Exception:  # noqa: BLE001
            pass
        return out

    def kubectl(self) -> list[str]:
        return [self.env.kubectl, "--kubeconfig", self.env.kubeconfig]
