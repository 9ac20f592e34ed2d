"""A stand-in kubelet for Skein's pods (brokers, and the operator the Helm
chart deploys) on the e2e/k8s control plane.

kwok marks pods Running and gives them an IP, but nothing runs in them (there
is no container runtime here). This runner makes each skein broker pod real:
for every Running pod it starts the pod's own container command (`/bin/sh -c
<args>` exactly as the StatefulSet builder wrote it) as a local process, with

- `skein-broker` replaced by the binary under test,
- `0.0.0.0` replaced by the pod's IP (every pod has its own address, as in a
  real cluster; run under e2e/k8s/netns.sh so the pod CIDR is local),
- each configMap and secret volume written to a directory and its mountPath
  replaced by it (in the command line and in the configMap's files),
- each persistentVolumeClaim volume backed by a directory named after the
  claim object (name and uid), so a recreated pod finds its data again (what a
  PVC gives) and a replaced claim starts empty (what a new volume gives),
- `HOSTNAME`, and the downward-API (`fieldRef`) and Secret (`secretKeyRef`) env vars of the
  pod spec.

For claims of an expandable StorageClass (`kwok-expandable`, which has
`allowVolumeExpansion`), the directory is a tmpfs of the claim's size, and
the runner is the storage system's resizer and the kubelet: when a bound
claim asks for more, it grows the tmpfs in place (the broker keeps running
and sees the new size with statvfs), then reports the new capacity on the
PersistentVolume and the claim's status, in that order, as a CSI resizer
and the kubelet do. For `kwok-offline-expandable` it grows the volume only
(the claim says `FileSystemResizePending`) and the tmpfs when the claim's
pod starts again, as a driver without online expansion does.

A container without a shell command line (the operator's: the image's
entrypoint plus `args`) runs as `<binary> <args>`; the binary is chosen by the
image name (`skein-operator`, `skein-broker`). A pod with a ServiceAccount
gets a token for it (`kubectl create token`) in `sa_dir`, which the test
mounts at /var/run/secrets/kubernetes.io/serviceaccount in its private mount
namespace, and KUBERNETES_SERVICE_HOST/PORT pointing at the API server: the
in-cluster configuration a real pod has.

It is the kubelet's prober too (probes.py): each process's `startupProbe` and
`readinessProbe` run as the kubelet runs them, and the pod's `Ready` and
`ContainersReady` conditions and `containerStatuses[].ready/started` follow
them (kwok leaves the operator's broker pods not ready: kwok/stages.yaml); a
process that is not running makes its pod not ready at once. Every change is a
line of the runner's log (stdout and <workdir>/runner.log, timestamped) and an
entry of `ready_transitions(pod)`.

And a slow disk: each process with a claim is started with LD_PRELOAD of
slowio.so (slowio.c, built once with gcc), which paces its writes to the
claims' directories to the rate `slow_disk(pod, bytes_per_s)` wrote to the
pod's file (read again every 0.2 s; kept across restarts and recreation).

A pod the runner runs carries its finalizer (`skein.dev/pod-runner`) until
its process has exited, as a kubelet keeps a deleted pod Terminating until its
containers stopped: kwok deletes a pod at once otherwise, and the StatefulSet
controller would create the next pod of that name while the old process still
runs (and registers with the controller).

It also keeps /etc/hosts (the private copy netns.sh mounts) mapping every pod's
stable DNS name (`<pod>.<subdomain>.<ns>.svc`) to its IP, standing in for
cluster DNS. A pod that is deleted gets SIGTERM, then SIGKILL after its grace
period, as the kubelet would do. Mounted Secrets are written again when they
change (looked at every 3 s; a kubelet takes up to about a minute), a key the
Secret lost removed, as the kubelet refreshes secret volumes: brokers reload
renewed certificates without a restart.

And it stands in for kube-proxy's NodePorts: every NodePort Service of the
namespace is served on the node address (127.0.0.1, kwok's node IP) at its
node port, each connection forwarded to a ready pod the Service selects, at
the target port; so a client outside the pod network reaches brokers the way
it would through a real node. For a cloud's load balancers: every
LoadBalancer Service gets an address of its own (127.0.1.N, written to its
status as a cloud controller does) served at the Service's port. And for an
ingress controller with TLS passthrough (ingress-nginx
`--enable-ssl-passthrough`): 127.0.0.1:443 reads the server name (SNI) of each
TLS ClientHello and forwards the connection, untouched, to the Service the
Ingress of that host names; the hosts file maps every Ingress host to
127.0.0.1, as DNS would point it at the controller.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.append(str(HERE))
from probes import Prober  # noqa: E402


# Held on every pod whose process runs, until the process has exited.
FINALIZER = "skein.dev/pod-runner"
# Claims of this StorageClass (allowVolumeExpansion) are tmpfs the runner grows.
EXPANDABLE_CLASS = "kwok-expandable"
# Grows only offline: the filesystem waits for the pod to start again.
OFFLINE_CLASS = "kwok-offline-expandable"
TMPFS_CLASSES = (EXPANDABLE_CLASS, OFFLINE_CLASS)

_SUFFIXES = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "k": 10 ** 3, "M": 10 ** 6,
             "G": 10 ** 9, "T": 10 ** 12, "": 1}


def quantity_bytes(q: str) -> int:
    """Bytes of a Kubernetes quantity such as 128Mi, 1G or 134217728."""
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(q).strip())
    if not m or m.group(2) not in _SUFFIXES:
        raise ValueError(f"not a storage quantity: {q!r}")
    return int(float(m.group(1)) * _SUFFIXES[m.group(2)])


# The runners of one test process (one per namespace) share the hosts file.
HOSTS_LOCK = threading.Lock()


class PodRunner:
    def __init__(self, kubectl: list[str], namespace: str, binaries: dict[str, str], workdir: Path,
                 selector: str = "app.kubernetes.io/name=skein", api: tuple[str, int] | None = None,
                 sa_dir: Path | None = None):
        self.kubectl = kubectl
        self.ns = namespace
        self.binaries = binaries
        self.api = api
        self.sa_dir = sa_dir
        self.tokens: set[str] = set()
        self.workdir = workdir
        self.selector = selector
        self.procs: dict[str, dict] = {}  # pod uid -> {name, proc, log}
        self.terminating: dict[int, str] = {}  # pid -> pod IP, until the process is gone
        self.hosts_file = Path(os.environ.get("SKEIN_K8S_HOSTS_FILE", "/etc/hosts"))
        self.manage_hosts = bool(os.environ.get("SKEIN_K8S_HOSTS_FILE"))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.started: list[tuple[str, str]] = []  # (pod, uid) in start order
        self.node_ports = NodePorts()
        self.lb_addresses: dict[str, str] = {}  # Service uid -> its load balancer's address
        self.ingress_hosts: list[str] = []
        self._last_services = 0.0
        self._last_secrets = 0.0
        self._last_volumes = 0.0
        self.tmpfs: dict[str, Path] = {}  # claim uid -> its mounted tmpfs
        self.stopping_threads: list[threading.Thread] = []
        self.log_file = workdir / "runner.log"
        self.prober = Prober(kubectl, self.log)
        self.slowio_dir = workdir / "slowio"  # <pod name>: its data volume's write rate, bytes/s
        self._slowio_so: Path | None | bool = False  # False: not compiled yet; None: failed
        self._slowio_lock = threading.Lock()  # slow_disk() (a test's thread) and _start() may both build it

    def log(self, msg: str):
        """A line of the runner's log: stdout and <workdir>/runner.log, with a timestamp."""
        now = time.time()
        line = f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(now))}.{int(now * 1000) % 1000:03d}Z {msg}"
        print(f"pod runner: {line}", flush=True)
        try:
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_file, "a") as f:
                f.write(line + "\n")
        except OSError:
            pass

    # -- what tests use
    def ready_transitions(self, pod_name: str) -> list[tuple[float, bool]]:
        """Every change of pod `pod_name`'s readiness the runner's probes made, oldest first:
        (time.time(), ready), across restarts of its process and pods recreated with the name."""
        return self.prober.ready_transitions(pod_name)

    def slow_disk(self, pod_name: str, write_bytes_per_s: int | None):
        """Paces the writes of pod `pod_name`'s process to its data volume (the claim's directory)
        to `write_bytes_per_s`; None or 0: full speed. Takes effect within 0.2 s, without a
        restart, and holds for later processes of the pod and pods recreated with the name."""
        if self._slowio() is None:
            raise RuntimeError("the slow-disk shim (slowio.so) could not be built: see the runner's log")
        self.slowio_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.slowio_dir / f".{pod_name}.tmp"
        tmp.write_text(f"{int(write_bytes_per_s or 0)}\n")
        os.replace(tmp, self.slowio_dir / pod_name)
        self.log(f"pod {pod_name}: data volume writes " +
                 (f"paced to {int(write_bytes_per_s)} B/s" if write_bytes_per_s else "at full speed"))

    def _slowio(self) -> Path | None:
        """slowio.so (e2e/k8s/slowio.c), built once per runner with gcc; None if that failed."""
        with self._slowio_lock:
            if self._slowio_so is False:
                so = self.workdir / "slowio.so"
                self.workdir.mkdir(parents=True, exist_ok=True)
                try:
                    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", f"{so}.tmp", str(HERE / "slowio.c"),
                                    "-ldl", "-lpthread"], check=True, capture_output=True, text=True, timeout=120)
                    os.replace(f"{so}.tmp", so)
                    self._slowio_so = so
                except (OSError, subprocess.SubprocessError) as e:
                    self.log(f"slowio.c did not build, no slow disks: {getattr(e, 'stderr', '') or e}")
                    self._slowio_so = None
            return self._slowio_so

    # -- lifecycle
    def start(self):
        self.prober.start()
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(10)
        self.prober.stop()
        self.node_ports.close()
        for uid in list(self.procs):
            self._terminate(self.procs.pop(uid), grace=10)
        # Processes of pods deleted earlier and still stopping: the threads
        # waiting on them die with this process, so end them here rather
        # than leave them running (on addresses the next run hands out).
        for pid in list(self.terminating):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # Their threads release the pods' finalizers once the processes are gone.
        for t in self.stopping_threads:
            t.join(30)
        for d in self.tmpfs.values():
            subprocess.run(["umount", "-l", str(d)], capture_output=True)
        self.tmpfs.clear()

    def _loop(self):
        while not self._stop.is_set():
            try:
                self.sync()
            except Exception as e:  # keep running: the API server may be briefly busy
                self.log(f"{e}")
            self._stop.wait(0.3)

    def _set_finalizer(self, pod: dict, held: bool) -> bool:
        """Adds (or removes) the runner's finalizer on `pod`; False when the pod is gone."""
        meta = pod["metadata"]
        rest = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        want = rest + [FINALIZER] if held else rest
        patch = json.dumps({"metadata": {"finalizers": want or None, "uid": meta["uid"]}})
        r = subprocess.run([*self.kubectl, "-n", meta["namespace"], "patch", "pod", meta["name"],
                            "--type=merge", "-p", patch], capture_output=True, text=True, timeout=30)
        return r.returncode == 0

    def _kubectl_json(self, *args: str):
        r = subprocess.run([*self.kubectl, *args, "-o", "json"], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
        return json.loads(r.stdout)

    # -- one pass
    def sync(self):
        pods = self._kubectl_json("-n", self.ns, "get", "pods", "-l", self.selector)["items"]
        live = {}
        for p in pods:
            uid = p["metadata"]["uid"]
            ip = p.get("status", {}).get("podIP")
            if p["metadata"].get("deletionTimestamp"):
                continue
            if p.get("status", {}).get("phase") != "Running" or not ip:
                continue
            live[uid] = p
        self.prober.observe(pods)
        now = time.monotonic()
        if now - self._last_services >= 2:
            self._last_services = now
            self._sync_node_ports()
        if now - self._last_secrets >= 3:
            self._last_secrets = now
            self._refresh_secrets()
        if now - self._last_volumes >= 1:
            self._last_volumes = now
            self._resize_volumes()
        for uid in list(self.procs):
            if uid not in live:
                # Off the loop: other pods keep being served while one stops.
                entry = self.procs.pop(uid)
                self.prober.stopping(uid)  # not ready from now on
                self.terminating[entry["proc"].pid] = entry["ip"]
                t = threading.Thread(target=self._terminate, args=(entry, 30), daemon=True)
                self.stopping_threads.append(t)
                t.start()
        busy_ips = set(self.terminating.values())
        # A name resolves to a pod's IP only once its old holder is gone (a
        # real pod IP is not reused while the old sandbox still exists).
        self._write_hosts(p for u, p in live.items() if u in self.procs or p["status"]["podIP"] not in busy_ips)
        for uid, p in live.items():
            entry = self.procs.get(uid)
            if entry is None:
                # A real pod IP is free only once the old sandbox is gone; kwok
                # may hand out an IP whose old process is still stopping.
                if p["status"]["podIP"] not in busy_ips:
                    self._start(p)
            elif entry["proc"].poll() is not None:
                # restartPolicy Always: the kubelet restarts a container that
                # exits, with a growing back-off.
                if "retry_at" not in entry:
                    entry["restarts"] = entry.get("restarts", 0) + 1
                    entry["retry_at"] = time.monotonic() + min(10, 2 ** (entry["restarts"] - 1))
                    self.log(f"broker of pod {entry['name']} exited with {entry['proc'].returncode}; "
                             f"restart {entry['restarts']} in {entry['retry_at'] - time.monotonic():.0f}s")
                elif time.monotonic() >= entry["retry_at"] and p["status"]["podIP"] not in busy_ips:
                    restarts = entry["restarts"]
                    del self.procs[uid]
                    self._start(p)
                    self.procs[uid]["restarts"] = restarts

    # -- volumes
    def _claim_dir(self, pvc: dict) -> Path:
        """The directory backing a claim; for an expandable class a tmpfs of the claim's current
        capacity, mounted once and kept while the runner runs (a recreated pod finds its data)."""
        meta = pvc["metadata"]
        d = self.workdir / "volumes" / f"{meta['name']}-{meta['uid'][:8]}"
        d.mkdir(parents=True, exist_ok=True)
        if pvc["spec"].get("storageClassName") in TMPFS_CLASSES and meta["uid"] not in self.tmpfs:
            size = quantity_bytes(pvc.get("status", {}).get("capacity", {}).get("storage")
                                  or pvc["spec"]["resources"]["requests"]["storage"])
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d)], check=True,
                           capture_output=True)
            self.tmpfs[meta["uid"]] = d
        pending = any(c.get("type") == "FileSystemResizePending" and c.get("status") == "True"
                      for c in pvc.get("status", {}).get("conditions", []))
        if pvc["spec"].get("storageClassName") == OFFLINE_CLASS and pending:
            # The kubelet of an offline-only driver: the filesystem grows as the pod mounts it.
            want = pvc["spec"]["resources"]["requests"]["storage"]
            subprocess.run(["mount", "-o", f"remount,size={quantity_bytes(want)}", str(d)], check=True,
                           capture_output=True)
            subprocess.run([*self.kubectl, "-n", self.ns, "patch", "pvc", meta["name"], "--subresource=status",
                            "--type", "merge", "-p",
                            json.dumps({"status": {"capacity": {"storage": want}, "conditions": []}})],
                           check=True, capture_output=True, timeout=30)
            self.log(f"filesystem of claim {meta['name']} grown to {want} as its pod started")
        return d

    def _resize_volumes(self):
        """The resizer and kubelet of the expandable class: a bound claim asking for more than its
        capacity has its filesystem grown online, then the PV and the claim report the new size."""
        pvcs = self._kubectl_json("-n", self.ns, "get", "pvc")["items"]
        for pvc in pvcs:
            meta, spec, status = pvc["metadata"], pvc["spec"], pvc.get("status", {})
            if spec.get("storageClassName") not in TMPFS_CLASSES or status.get("phase") != "Bound":
                continue
            want = spec.get("resources", {}).get("requests", {}).get("storage")
            have = status.get("capacity", {}).get("storage")
            if not want or quantity_bytes(want) <= quantity_bytes(have or "0"):
                continue
            if spec.get("storageClassName") == OFFLINE_CLASS:
                # The resizer grows the volume; its filesystem waits for the pod to restart.
                if any(c.get("type") == "FileSystemResizePending" for c in status.get("conditions", [])):
                    continue
                subprocess.run([*self.kubectl, "patch", "pv", spec["volumeName"], "--type", "merge", "-p",
                                json.dumps({"spec": {"capacity": {"storage": want}}})],
                               check=True, capture_output=True, timeout=30)
                pending = {"type": "FileSystemResizePending", "status": "True",
                           "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "message": "Waiting for user to (re-)start a pod to finish file system resize of volume on node."}
                subprocess.run([*self.kubectl, "-n", self.ns, "patch", "pvc", meta["name"], "--subresource=status",
                                "--type", "merge", "-p", json.dumps({"status": {"conditions": [pending]}})],
                               check=True, capture_output=True, timeout=30)
                self.log(f"volume of claim {meta['name']} grown to {want}; filesystem waits for a restart")
                continue
            d = self.tmpfs.get(meta["uid"])
            if d is not None:
                subprocess.run(["mount", "-o", f"remount,size={quantity_bytes(want)}", str(d)], check=True,
                               capture_output=True)
            subprocess.run([*self.kubectl, "patch", "pv", spec["volumeName"], "--type", "merge", "-p",
                            json.dumps({"spec": {"capacity": {"storage": want}}})],
                           check=True, capture_output=True, timeout=30)
            subprocess.run([*self.kubectl, "-n", self.ns, "patch", "pvc", meta["name"], "--subresource=status",
                            "--type", "merge", "-p", json.dumps({"status": {"capacity": {"storage": want}}})],
                           check=True, capture_output=True, timeout=30)
            self.log(f"volume of claim {meta['name']} grown to {want}")

    def _sync_node_ports(self):
        services = self._kubectl_json("-n", self.ns, "get", "services")["items"]
        pods = self._kubectl_json("-n", self.ns, "get", "pods")["items"]
        ingresses = self._kubectl_json("-n", self.ns, "get", "ingresses")["items"]
        want: dict[tuple[str, int], list[tuple[str, int]]] = {}
        by_service: dict[tuple[str, int], list[tuple[str, int]]] = {}  # (name, port) -> targets
        for svc in services:
            spec = svc.get("spec", {})
            if not spec.get("selector"):
                continue
            sel = spec["selector"]
            # As kube-proxy: ready pods only, unless the Service publishes not-ready ones too.
            any_ready = spec.get("publishNotReadyAddresses", False)
            backends = [p for p in pods if all(p["metadata"].get("labels", {}).get(k) == v for k, v in sel.items())
                        and p.get("status", {}).get("podIP") and not p["metadata"].get("deletionTimestamp")
                        and (any_ready or any(c["type"] == "Ready" and c["status"] == "True"
                                              for c in p["status"].get("conditions", [])))]
            lb = self._load_balancer(svc) if spec.get("type") == "LoadBalancer" else None
            for port in spec.get("ports", []):
                targets = []
                for p in backends:
                    target = port.get("targetPort", port["port"])
                    if isinstance(target, str):
                        named = [cp["containerPort"] for c in p["spec"]["containers"] for cp in c.get("ports", [])
                                 if cp.get("name") == target]
                        if not named:
                            continue
                        target = named[0]
                    targets.append((p["status"]["podIP"], int(target)))
                by_service[(svc["metadata"]["name"], int(port["port"]))] = targets
                if port.get("nodePort") and spec.get("type") in ("NodePort", "LoadBalancer"):
                    want[(self.node_ports.host, int(port["nodePort"]))] = targets
                if lb:
                    want[(lb, int(port["port"]))] = targets
        # The ingress controller: SNI host -> the backends of the Service its Ingress names.
        routes: dict[str, list[tuple[str, int]]] = {}
        for ing in ingresses:
            for rule in ing.get("spec", {}).get("rules", []):
                for path in rule.get("http", {}).get("paths", []):
                    backend = path.get("backend", {}).get("service", {})
                    key = (backend.get("name"), int(backend.get("port", {}).get("number", 0)))
                    if rule.get("host"):
                        routes[rule["host"]] = by_service.get(key, [])
        self.ingress_hosts = sorted(routes)
        self.node_ports.set(want, routes)

    def _load_balancer(self, svc: dict) -> str:
        """The Service's load balancer address, assigned once and written to its status."""
        uid = svc["metadata"]["uid"]
        if uid not in self.lb_addresses:
            self.lb_addresses[uid] = f"127.0.1.{len(self.lb_addresses) + 1}"
        addr = self.lb_addresses[uid]
        have = [i.get("ip") for i in svc.get("status", {}).get("loadBalancer", {}).get("ingress", [])]
        if have != [addr]:
            patch = json.dumps({"status": {"loadBalancer": {"ingress": [{"ip": addr}]}}})
            subprocess.run([*self.kubectl, "-n", self.ns, "patch", "service", svc["metadata"]["name"],
                            "--subresource=status", "--type=merge", "-p", patch],
                           capture_output=True, text=True, timeout=30)
        return addr

    def _refresh_secrets(self):
        """Every few seconds, as the kubelet's sync (about a minute on a real node): each key
        written anew when its value changed (a new file renamed over the old one, so a reader
        never sees half of it), and keys the Secret no longer has removed."""
        fetched: dict[str, dict] = {}  # one read per Secret per pass, however many pods mount it
        for entry in list(self.procs.values()):
            for d, name in entry.get("secrets", []):
                if name not in fetched:
                    fetched[name] = self._kubectl_json("-n", self.ns, "get", "secret", name)
                data = fetched[name].get("data") or {}
                for f in d.iterdir():
                    if not f.name.startswith(".") and f.name not in data:
                        f.unlink()
                        self.log(f"secret {name} key {f.name} removed for pod {entry['name']}")
                for k, b64 in data.items():
                    value = base64.b64decode(b64)
                    f = d / k
                    if f.exists() and f.read_bytes() == value:
                        continue
                    tmp = d / f".{k}.tmp"
                    tmp.write_bytes(value)
                    tmp.chmod(0o400)
                    os.replace(tmp, f)
                    self.log(f"secret {name} key {k} updated for pod {entry['name']}")

    def _write_hosts(self, pods):
        """Maps this runner's pods (and Ingress hosts) in the hosts file. The
        runners of other namespaces share the file: each rewrites only its own
        lines (tagged with its namespace), so they do not take turns erasing
        each other's names (which left a name resolvable only half the time)."""
        if not self.manage_hosts:
            return
        tag = f"# pod_runner.py {self.ns}"
        own = []
        for p in pods:
            sub = p["spec"].get("subdomain")
            if not sub:
                continue
            name, ns, ip = p["metadata"]["name"], p["metadata"]["namespace"], p["status"]["podIP"]
            own.append(f"{ip} {name}.{sub}.{ns}.svc {name}.{sub}.{ns}.svc.cluster.local  {tag}")
        if self.ingress_hosts:
            own.append(f"{self.node_ports.host} {' '.join(self.ingress_hosts)}  {tag}")
        with HOSTS_LOCK:
            current = self.hosts_file.read_text()
            others = [line for line in current.splitlines() if not line.endswith(tag)]
            text = "\n".join(others + own) + "\n"
            if current != text:
                # In place (/etc/hosts is a bind mount of this file), overwritten rather than truncated
                # first: a lookup at that moment must not find the file empty.
                with open(self.hosts_file, "r+") as f:
                    f.write(text)
                    f.truncate()

    def _binary(self, image: str) -> str:
        """The binary of the longest key the image names: `skein-broker:0.1.0` (an
        older release, in the upgrade test) wins over `skein-broker`."""
        for name, path in sorted(self.binaries.items(), key=lambda kv: -len(kv[0])):
            if name in image:
                return path
        raise RuntimeError(f"no binary for image {image}")

    def _token(self, sa: str):
        if self.sa_dir is None or sa in self.tokens:
            return
        token = subprocess.run([*self.kubectl, "-n", self.ns, "create", "token", sa, "--duration=7200s"],
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip()
        (self.sa_dir / "token").write_text(token)
        (self.sa_dir / "namespace").write_text(self.ns)
        self.tokens.add(sa)

    def _start(self, pod: dict):
        meta, spec = pod["metadata"], pod["spec"]
        name, uid, ip = meta["name"], meta["uid"], pod["status"]["podIP"]
        c = spec["containers"][0]
        binary = self._binary(c["image"])
        command = c.get("command") or []
        pod_dir = self.workdir / "pods" / name
        pod_dir.mkdir(parents=True, exist_ok=True)
        if command[:2] == ["/bin/sh", "-c"]:
            line = " ".join(c.get("args") or [])
            volumes = {v["name"]: v for v in spec.get("volumes", [])}
            mounts = sorted(c.get("volumeMounts", []), key=lambda m: -len(m["mountPath"]))
            dirs: dict[str, Path] = {}
            claim_dirs: list[Path] = []
            for m in mounts:
                v = volumes.get(m["name"], {})
                if "configMap" in v:
                    dirs[m["mountPath"]] = pod_dir / f"configmap-{m['name']}"
                elif "secret" in v:
                    dirs[m["mountPath"]] = pod_dir / f"secret-{m['name']}"
                elif "persistentVolumeClaim" in v:
                    # One directory per claim object: a claim deleted and made
                    # again (the StatefulSet recreates a missing one) starts
                    # empty, as a newly provisioned volume would.
                    claim = v["persistentVolumeClaim"]["claimName"]
                    pvc = self._kubectl_json("-n", self.ns, "get", "pvc", claim)
                    dirs[m["mountPath"]] = self._claim_dir(pvc)
                    claim_dirs.append(dirs[m["mountPath"]])

            def relocate(text: str) -> str:
                # Longest mount path first, so a nested mount wins.
                for path, d in dirs.items():
                    text = text.replace(path, str(d))
                return text
            secrets: list[tuple[Path, str]] = []
            for m in mounts:
                v = volumes.get(m["name"], {})
                d = dirs.get(m["mountPath"])
                if d is None:
                    continue
                d.mkdir(parents=True, exist_ok=True)
                if "configMap" in v:
                    cm = self._kubectl_json("-n", self.ns, "get", "configmap", v["configMap"]["name"])
                    for k, text in (cm.get("data") or {}).items():
                        # Paths into other volumes (a properties file naming a
                        # mounted Secret's file) point at their directories.
                        (d / k).write_text(relocate(text))
                elif "secret" in v:
                    secrets.append((d, v["secret"]["secretName"]))
                    sec = self._kubectl_json("-n", self.ns, "get", "secret", v["secret"]["secretName"])
                    for k, b64 in (sec.get("data") or {}).items():
                        f = d / k
                        f.write_bytes(base64.b64decode(b64))
                        f.chmod(0o400)
            line = relocate(line)
            line = re.sub(r"\bskein-(broker|operator)\b", binary, line, count=1)
            argv = ["/bin/sh", "-c", line.replace("0.0.0.0", ip)]
        elif not command:
            secrets, claim_dirs = [], []
            argv = [binary, *[a.replace("0.0.0.0", ip) for a in c.get("args") or []]]
        else:
            raise RuntimeError(f"pod {name}: unexpected container command {command}")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOSTNAME": name, "HOME": str(pod_dir),
               "RUST_LOG": os.environ.get("RUST_LOG", "info")}
        if claim_dirs and self._slowio() is not None:
            # The slow disk (slow_disk()): writes to the claims' directories paced to the rate in the
            # pod's file, which the shim reads again every 0.2 s (missing or 0: full speed).
            env["LD_PRELOAD"] = str(self._slowio())
            env["SKEIN_SLOWIO_PREFIX"] = ":".join(os.path.realpath(d) for d in claim_dirs)
            env["SKEIN_SLOWIO_RATE_FILE"] = str(self.slowio_dir.resolve() / name)
        if self.api is not None:
            env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"] = self.api[0], str(self.api[1])
        if spec.get("serviceAccountName") and spec.get("automountServiceAccountToken", True):
            self._token(spec["serviceAccountName"])
        for e in c.get("env", []):
            if "value" in e:
                env[e["name"]] = e["value"].replace("0.0.0.0", ip)
            elif "fieldRef" in e.get("valueFrom", {}):
                path = e["valueFrom"]["fieldRef"]["fieldPath"]
                # metadata.labels['k'] / metadata.annotations['k'] (a missing key: empty, as the kubelet).
                m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
                if m:
                    env[e["name"]] = (meta.get(m.group(1)) or {}).get(m.group(2), "")
                    continue
                env[e["name"]] = {"metadata.name": name, "metadata.namespace": meta["namespace"],
                                  "status.podIP": ip, "spec.nodeName": spec.get("nodeName", ""),
                                  "status.hostIP": pod["status"].get("hostIP", "")}.get(path, "")
            elif "secretKeyRef" in e.get("valueFrom", {}):
                # As the kubelet: a missing Secret or key keeps the container from starting
                # (CreateContainerConfigError); the next pass tries again.
                ref = e["valueFrom"]["secretKeyRef"]
                sec = self._kubectl_json("-n", meta["namespace"], "get", "secret", ref["name"])
                value = (sec.get("data") or {}).get(ref["key"])
                if value is None:
                    raise RuntimeError(f"pod {name}: secret {ref['name']} has no key {ref['key']}")
                env[e["name"]] = base64.b64decode(value).decode()
        if FINALIZER not in (meta.get("finalizers") or []) and not self._set_finalizer(pod, True):
            return  # deleted meanwhile: nothing to run
        log = self.workdir / "logs" / f"{name}-{uid[:8]}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        fh = open(log, "ab")
        proc = subprocess.Popen(argv, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        fh.close()
        self.procs[uid] = {"name": name, "proc": proc, "log": log, "ip": ip, "secrets": secrets,
                           "grace": spec.get("terminationGracePeriodSeconds", 30),
                           "pod": {"metadata": {"name": name, "namespace": meta["namespace"], "uid": uid,
                                                "finalizers": [FINALIZER]}}}
        self.started.append((name, uid))
        self.log(f"started pod {name} ({ip}) pid {proc.pid}, {binary}: {' '.join(argv)[-300:]}")
        self.prober.process_started(pod, proc)

    def _terminate(self, entry: dict, grace: float):
        proc = entry["proc"]
        self.terminating[proc.pid] = entry["ip"]
        try:
            self._stop_proc(entry, proc, grace)
        finally:
            self.terminating.pop(proc.pid, None)
            # As the kubelet: the stopped container's status (not ready) is written before the pod goes.
            try:
                self.prober.finish(entry["pod"]["metadata"]["uid"])
            except Exception as e:
                self.log(f"pod {entry['name']}: last status: {e}")
            # The process is gone: the pod object may go too.
            self._set_finalizer(entry["pod"], False)

    def _stop_proc(self, entry: dict, proc, grace: float):
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(min(grace, entry.get("grace", grace)))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self.log(f"pod {entry['name']} stopped ({proc.returncode})")

    def pid_of(self, pod: str) -> int | None:
        for e in self.procs.values():
            if e["name"] == pod and e["proc"].poll() is None:
                return e["proc"].pid
        return None

    def log_tail(self, pod: str, lines: int = 60) -> str:
        out = []
        for e in self.procs.values():
            if e["name"] == pod:
                out.append(e["log"].read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(sum(out, []))


class NodePorts:
    """kube-proxy's NodePorts on the node address 127.0.0.1 and the cloud's load balancers on
    their addresses: a listener per (address, port), each accepted connection piped to one of the
    Service's ready pods (round robin). With SNI routes, also the ingress controller on
    127.0.0.1:443 (TLS passthrough)."""

    INGRESS_PORT = 443

    def __init__(self, host: str = "127.0.0.1"):
        self.host = host
        self.targets: dict[tuple[str, int], list[tuple[str, int]]] = {}
        self.routes: dict[str, list[tuple[str, int]]] = {}
        self.listeners: dict[tuple[str, int], socket.socket] = {}
        self.turn = 0
        self.lock = threading.Lock()

    def set(self, want: dict[tuple[str, int], list[tuple[str, int]]],
            routes: dict[str, list[tuple[str, int]]] | None = None):
        with self.lock:
            self.targets = dict(want)
            self.routes = routes or {}
            keys = set(want)
            if self.routes:
                keys.add((self.host, self.INGRESS_PORT))
            for key in list(self.listeners):
                if key not in keys:
                    self.listeners.pop(key).close()
            for key in keys:
                if key not in self.listeners:
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    try:
                        s.bind(key)
                    except OSError as e:
                        print(f"pod runner: {key[0]}:{key[1]}: {e}", flush=True)
                        s.close()
                        continue
                    s.listen(64)
                    self.listeners[key] = s
                    threading.Thread(target=self._accept, args=(key, s), daemon=True).start()

    def close(self):
        self.set({})

    def _pick(self, targets: list[tuple[str, int]]) -> tuple[str, int] | None:
        with self.lock:
            self.turn += 1
            return targets[self.turn % len(targets)] if targets else None

    def _accept(self, key: tuple[str, int], s: socket.socket):
        while True:
            try:
                conn, _ = s.accept()
            except OSError:
                return
            if key == (self.host, self.INGRESS_PORT) and key not in self.targets:
                threading.Thread(target=self._route_by_sni, args=(conn,), daemon=True).start()
                continue
            with self.lock:
                targets = self.targets.get(key, [])
            target = self._pick(targets)
            if target is None:
                conn.close()
                continue
            threading.Thread(target=self._pipe, args=(conn, target), daemon=True).start()

    def _route_by_sni(self, conn: socket.socket):
        """Reads the ClientHello's server name and pipes the connection (the hello included) to
        a backend of that host's Service; no route, no connection."""
        conn.settimeout(10)
        try:
            hello = b""
            while len(hello) < 5 or len(hello) < 5 + int.from_bytes(hello[3:5], "big"):
                chunk = conn.recv(65536)
                if not chunk:
                    raise OSError("closed before the ClientHello")
                hello += chunk
            host = sni(hello)
        except (OSError, ValueError, IndexError):
            conn.close()
            return
        conn.settimeout(None)
        with self.lock:
            targets = self.routes.get(host or "", [])
        target = self._pick(targets)
        if target is None:
            conn.close()
            return
        self._pipe(conn, target, hello)

    @staticmethod
    def _pipe(conn: socket.socket, target: tuple[str, int], first: bytes = b""):
        try:
            up = socket.create_connection(target, timeout=10)
            up.settimeout(None)
            if first:
                up.sendall(first)
        except OSError:
            conn.close()
            return

        def copy(src, dst):
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for sock in (src, dst):
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
        threading.Thread(target=copy, args=(up, conn), daemon=True).start()
        copy(conn, up)
        conn.close()
        up.close()


def sni(record: bytes) -> str | None:
    """The server name of a TLS ClientHello (the first record), None without one."""
    if record[0] != 22 or record[5] != 1:  # handshake record, ClientHello
        raise ValueError("not a ClientHello")
    i = 5 + 4 + 2 + 32  # record header, handshake header, version, random
    i += 1 + record[i]  # session id
    i += 2 + int.from_bytes(record[i:i + 2], "big")  # cipher suites
    i += 1 + record[i]  # compression methods
    end = i + 2 + int.from_bytes(record[i:i + 2], "big")
    i += 2
    while i + 4 <= end:
        kind, size = int.from_bytes(record[i:i + 2], "big"), int.from_bytes(record[i + 2:i + 4], "big")
        if kind == 0:  # server_name: list length, then (type 0, length, name)
            n = int.from_bytes(record[i + 7:i + 9], "big")
            return record[i + 9:i + 9 + n].decode("ascii")
        i += 4 + size
    return None
