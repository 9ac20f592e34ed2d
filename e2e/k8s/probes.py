"""The kubelet's prober for the pods pod_runner.py runs: each container's `startupProbe` and
`readinessProbe`, with the kubelet's semantics, and the result written to the pod's status as the
kubelet's status manager writes it.

- A probe runs first `initialDelaySeconds` after its process started, then every `periodSeconds`
  (default 10), each attempt bounded by `timeoutSeconds` (default 1). Its result changes after
  `successThreshold` (default 1) successes or `failureThreshold` (default 3) failures in a row.
- The startup probe runs until it succeeds (a container without one has started at once); the
  readiness probe only runs once the container has started, the first time right then (the
  kubelet triggers it when a started container has no readiness result yet). A container
  without a readiness probe is ready once started. Readiness starts as failure.
- Actions: `httpGet` (host: the pod IP unless `host` is set; `port`: a number or the name of a
  containerPort; `path`; `scheme` HTTP or HTTPS, the certificate not verified; `httpHeaders`;
  success is a status of 200-399, redirects not followed) and `tcpSocket` (the connection is
  made). `exec` and `grpc` are not supported here: logged, and they fail.
- A process that is not running (exited, waiting for its back-off restart, being stopped)
  makes the container not started and not ready at once; a restarted process starts over
  (startup first, readiness failure).
- Not done: a startup probe that keeps failing does not get the container killed (the kubelet
  restarts it), and liveness probes are not run.

Status: conditions `ContainersReady` and `Ready` (strategic merge patch of the status
subresource: conditions merge by type, so Initialized, PodScheduled and readiness gates stay;
`lastTransitionTime` moves only when the status changes; reason `ContainersNotReady` while
False) and `containerStatuses[].ready`/`.started` (that list is atomic: the whole list is sent,
the other fields as they were, the patch conditional on the resourceVersion read). Patched only
when a value changes; a status changed by someone else is set back, as the kubelet's status
sync does, at most every 10 s.

One thread wakes every 0.5 s and hands the probes that are due, and the status patches, to a
small pool, so a hanging probe delays neither other pods' probes nor the runner's sync loop.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

TICK = 0.5
RESYNC = 10.0  # the kubelet's status manager sets back a status someone else changed, this often
USER_AGENT = "kube-probe/1.37"


def rfc3339(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t if t is not None else time.time()))


def container_port(port, container: dict) -> int:
    """A probe's port: a number, or the name of one of the container's ports."""
    if isinstance(port, int) or (isinstance(port, str) and port.isdigit()):
        return int(port)
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return int(p["containerPort"])
    raise ValueError(f"no container port named {port!r}")


def describe(spec: dict, ip: str = "") -> str:
    if "httpGet" in spec:
        h = spec["httpGet"]
        path = h.get("path") or "/"
        path = path if path.startswith("/") else "/" + path
        return f"httpGet {h.get('scheme', 'HTTP').lower()}://{h.get('host') or ip}:{h.get('port')}{path}"
    if "tcpSocket" in spec:
        return f"tcpSocket {spec['tcpSocket'].get('host') or ip}:{spec['tcpSocket'].get('port')}"
    for kind in ("exec", "grpc"):
        if kind in spec:
            return kind
    return "no action"


def run_action(spec: dict, container: dict, pod_ip: str) -> tuple[bool, str]:
    """One attempt of a probe: (success, what happened). Blocks up to about timeoutSeconds."""
    timeout = float(spec.get("timeoutSeconds") or 1)
    try:
        if "httpGet" in spec:
            h = spec["httpGet"]
            host = h.get("host") or pod_ip
            port = container_port(h.get("port"), container)
            path = h.get("path") or "/"
            if not path.startswith("/"):
                path = "/" + path
            headers = {"User-Agent": USER_AGENT, "Accept": "*/*"}
            for hh in h.get("httpHeaders") or []:
                headers[hh["name"]] = hh.get("value", "")
            if str(h.get("scheme", "HTTP")).upper() == "HTTPS":
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
                conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ctx)
            else:
                conn = http.client.HTTPConnection(host, port, timeout=timeout)
            try:
                conn.request("GET", path, headers=headers)
                resp = conn.getresponse()
                resp.read(10 * 1024)
                return 200 <= resp.status < 400, f"HTTP {resp.status}"
            finally:
                conn.close()
        if "tcpSocket" in spec:
            t = spec["tcpSocket"]
            port = container_port(t.get("port"), container)
            socket.create_connection((t.get("host") or pod_ip, port), timeout=timeout).close()
            return True, "connected"
        if "exec" in spec or "grpc" in spec:
            return False, f"{describe(spec)} probes are not supported by the pod runner"
        return False, "probe without an action"
    except (OSError, ValueError, http.client.HTTPException) as e:
        return False, f"{type(e).__name__}: {e}"


class Probe:
    """One probe of one container's process: schedule, run counter, result."""

    def __init__(self, kind: str, spec: dict, started_at: float, initial: bool | None):
        self.kind, self.spec = kind, spec
        self.period = float(spec.get("periodSeconds") or 10)
        self.success_threshold = int(spec.get("successThreshold") or 1)
        self.failure_threshold = int(spec.get("failureThreshold") or 3)
        self.initial_delay = float(spec.get("initialDelaySeconds") or 0)
        self.next_due = started_at + self.initial_delay
        self.result = initial  # startup: unknown (None) until it succeeds; readiness: False
        self.last: bool | None = None
        self.run = 0
        self.busy = False

    def record(self, ok: bool) -> bool:
        """Counts one attempt; True when the result changed."""
        if ok == self.last:
            self.run += 1
        else:
            self.last, self.run = ok, 1
        if self.run < (self.success_threshold if ok else self.failure_threshold):
            return False
        changed = self.result != ok
        self.result = ok
        return changed


class Container:
    """The prober's view of the one container the runner runs for a pod (uid)."""

    def __init__(self, pod: dict):
        meta = pod["metadata"]
        self.name, self.ns, self.uid = meta["name"], meta["namespace"], meta["uid"]
        self.spec = pod["spec"]["containers"][0]
        self.ip = pod["status"]["podIP"]
        self.proc = None
        self.gen = 0
        self.running = False
        self.stopping = False
        self.started = False
        self.startup: Probe | None = None
        self.readiness: Probe | None = None
        self.why = "not started yet"
        # What the pod showed when the runner took it on, then what the runner decided: a
        # change of it is a transition.
        self.shown = pod_ready(pod)
        self.published: tuple[bool, bool] | None = None  # (ready, started) as last written
        self.patching = False
        self.observed: tuple[bool | None, bool | None, float] | None = None  # (ready, started, when)
        self.patched_at = 0.0

    def begin(self, proc, now: float):
        """A (new or restarted) process of the container: probing starts over."""
        self.gen += 1
        self.proc, self.running, self.stopping = proc, True, False
        sp, rp = self.spec.get("startupProbe"), self.spec.get("readinessProbe")
        self.startup = Probe("startup", sp, now, None) if sp else None
        self.readiness = Probe("readiness", rp, now, False) if rp else None
        self.started = self.startup is None
        self.why = ("startup probe not passed yet" if not self.started else
                    "readiness probe not passed yet" if self.readiness else "started; no readiness probe")

    def ready(self) -> bool:
        return self.running and self.started and (self.readiness is None or self.readiness.result is True)


def pod_ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in pod.get("status", {}).get("conditions") or [])


class Prober:
    def __init__(self, kubectl: list[str], log):
        self.kubectl = kubectl
        self.log = log
        self.lock = threading.Lock()
        self.containers: dict[str, Container] = {}  # pod uid ->
        self.transitions: dict[str, list[tuple[float, bool]]] = {}  # pod name -> [(time.time(), ready)]
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="probe")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="prober")

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(5)
        self.pool.shutdown(wait=False, cancel_futures=True)

    # -- what the runner tells
    def process_started(self, pod: dict, proc):
        """The runner started (or restarted) the process of `pod`."""
        with self.lock:
            c = self.containers.get(pod["metadata"]["uid"])
            if c is None:
                c = self.containers[pod["metadata"]["uid"]] = Container(pod)
            c.begin(proc, time.monotonic())
            self._transition(c)

    def stopping(self, uid: str):
        """The pod is gone or going: its process is being stopped."""
        with self.lock:
            c = self.containers.get(uid)
            if c is not None:
                c.stopping, c.running = True, False
                c.why = "process being stopped"
                self._transition(c)

    def finish(self, uid: str):
        """The process of a deleted pod has exited: its last status (not ready) is written, now,
        before the runner lets the pod object go."""
        with self.lock:
            c = self.containers.get(uid)
            if c is None:
                return
            if c.running or not c.stopping:
                c.why = "process stopped"
            c.running = False
            self._transition(c)
            if self._stop.is_set():  # the runner is stopping: no more status writes
                self.containers.pop(uid, None)
                return
        # A status write in flight (say Ready=True, decided just before) lands first: this one
        # must be the last. Holding `patching` keeps the prober's thread from starting another.
        deadline = time.monotonic() + 35
        while True:
            with self.lock:
                if not c.patching or time.monotonic() > deadline:
                    c.patching = True
                    break
            time.sleep(0.05)
        try:
            self._publish(c, c.gen, False, False)
        finally:
            with self.lock:
                self.containers.pop(uid, None)

    def observe(self, pods: list[dict]):
        """The pods as the runner's last list showed them (to set back a status changed by others)."""
        now = time.monotonic()
        with self.lock:
            for p in pods:
                c = self.containers.get(p["metadata"]["uid"])
                if c is None:
                    continue
                cs = [s for s in p.get("status", {}).get("containerStatuses") or [] if s.get("name") == c.spec["name"]]
                c.observed = (pod_ready(p) if cs else None, bool(cs[0].get("started")) if cs else None, now)

    def ready_transitions(self, pod_name: str) -> list[tuple[float, bool]]:
        with self.lock:
            return list(self.transitions.get(pod_name, []))

    # -- the prober's thread
    def _loop(self):
        while not self._stop.wait(TICK):
            try:
                self._tick()
            except Exception as e:  # keep probing
                self.log(f"prober: {type(e).__name__}: {e}")

    def _tick(self):
        now = time.monotonic()
        with self.lock:
            for c in list(self.containers.values()):
                if c.running and c.proc is not None and c.proc.poll() is not None:
                    c.running = False
                    c.why = f"process exited ({c.proc.returncode})"
                if c.running:
                    probe = c.readiness if c.started else c.startup
                    if probe is not None and not probe.busy and now >= probe.next_due:
                        probe.busy = True
                        probe.next_due = max(probe.next_due + probe.period, now)
                        self.pool.submit(self._probe, c, c.gen, probe)
                self._transition(c)
                want = (c.ready(), c.running and c.started)
                resync = (c.observed is not None and c.observed[2] > c.patched_at + 1 and now - c.patched_at >= RESYNC
                          and c.observed[:2] != want and c.observed[0] is not None)
                if (want != c.published or resync) and not c.patching:
                    c.patching = True
                    self.pool.submit(self._publish_job, c, c.gen, *want)

    def _transition(self, c: Container):
        """Records and logs a change of the runner's verdict on the pod's readiness (lock held)."""
        ready = c.ready()
        if ready == c.shown:
            return
        c.shown = ready
        self.transitions.setdefault(c.name, []).append((time.time(), ready))
        self.log(f"pod {c.name} {'READY' if ready else 'NOT READY'} ({c.why})")

    def _probe(self, c: Container, gen: int, probe: Probe):
        try:
            ok, what = run_action(probe.spec, c.spec, c.ip)
        except Exception as e:
            ok, what = False, f"{type(e).__name__}: {e}"
        with self.lock:
            probe.busy = False
            if gen != c.gen or not c.running:
                return  # a probe of an earlier process, or of one that stopped meanwhile
            first_failure = not ok and probe.last is not False
            changed = probe.record(ok)
            action = describe(probe.spec, c.ip)
            if first_failure and not changed:
                self.log(f"pod {c.name}: {probe.kind} probe {action} failed: {what}")
            if not changed:
                return
            if probe.kind == "startup":
                if ok:
                    # Readiness is probed at the next tick (its first due time has passed unless its
                    # initialDelaySeconds has not): the kubelet triggers it when a started container
                    # has no readiness result yet.
                    c.started = True
                    c.why = f"startup probe {action} succeeded" + ("" if c.readiness else "; no readiness probe")
                else:
                    self.log(f"pod {c.name}: startup probe {action} failed {probe.run} times: {what} "
                             f"(a kubelet would restart the container; the pod runner does not)")
            else:
                c.why = f"readiness probe {action} " + (
                    "succeeded" if ok else f"failed {probe.run} times in a row: {what}")
            self._transition(c)

    def _publish_job(self, c: Container, gen: int, ready: bool, started: bool):
        try:
            self._publish(c, gen, ready, started)
        except Exception as e:
            self.log(f"pod {c.name}: status patch failed: {e}")
        finally:
            with self.lock:
                c.patching = False

    def _publish(self, c: Container, gen: int, ready: bool, started: bool):
        """Writes (ready, started) of the container to the pod's status, as the kubelet does."""
        for _ in range(5):
            r = subprocess.run([*self.kubectl, "-n", c.ns, "get", "pod", c.name, "-o", "json"],
                               capture_output=True, text=True, timeout=30)
            if r.returncode != 0:
                if "NotFound" in r.stderr or "not found" in r.stderr:
                    return
                raise RuntimeError(r.stderr.strip())
            pod = json.loads(r.stdout)
            if pod["metadata"]["uid"] != c.uid:
                return  # the pod was replaced: its successor is another container's business
            patch = status_patch(pod, c.spec["name"], ready, started)
            if patch is None:
                break
            r = subprocess.run([*self.kubectl, "-n", c.ns, "patch", "pod", c.name, "--subresource=status",
                                "--type=strategic", "-p", json.dumps(patch)],
                               capture_output=True, text=True, timeout=30)
            if r.returncode == 0:
                break
            if "NotFound" in r.stderr or "not found" in r.stderr:
                return
            if "Conflict" not in r.stderr and "modified" not in r.stderr and "Precondition" not in r.stderr:
                raise RuntimeError(r.stderr.strip())
        else:
            raise RuntimeError("status patch kept conflicting")
        with self.lock:
            c.published = (ready, started)
            c.patched_at = time.monotonic()


def status_patch(pod: dict, container: str, ready: bool, started: bool) -> dict | None:
    """The strategic merge patch that makes `pod`'s status say the container is ready/started
    (None when it says so already)."""
    status = pod.get("status", {})
    statuses = [dict(s) for s in status.get("containerStatuses") or []]
    changed = False
    for s in statuses:
        if s.get("name") == container and (s.get("ready") is not ready or s.get("started") is not started):
            s["ready"], s["started"] = ready, started
            changed = True
    unready = sorted(s["name"] for s in statuses if not s.get("ready"))
    containers_ready = not unready if statuses else ready
    conds = {x.get("type"): x for x in status.get("conditions") or []}
    gates = [g["conditionType"] for g in pod["spec"].get("readinessGates") or []]
    gates_open = [g for g in gates if conds.get(g, {}).get("status") != "True"]
    pod_ready_now = containers_ready and not gates_open
    now = rfc3339()
    patch_conds = []
    for typ, value in (("ContainersReady", containers_ready), ("Ready", pod_ready_now)):
        old = conds.get(typ, {})
        want = "True" if value else "False"
        if value:
            reason, message = None, None
        elif unready:
            reason, message = "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]"
        else:
            reason = "ReadinessGatesNotReady"
            message = f"corresponding condition of pod readiness gate [{' '.join(gates_open)}] does not exist or is False"
        if old.get("status") == want and old.get("reason") == reason and old.get("message") == message:
            continue
        patch_conds.append({"type": typ, "status": want, "reason": reason, "message": message, "lastProbeTime": None,
                            "lastTransitionTime": old.get("lastTransitionTime") if old.get("status") == want
                            and old.get("lastTransitionTime") else now})
    if not changed and not patch_conds:
        return None
    out: dict = {"metadata": {"uid": pod["metadata"]["uid"], "resourceVersion": pod["metadata"]["resourceVersion"]},
                 "status": {}}
    if patch_conds:
        out["status"]["conditions"] = patch_conds
    if changed:
        out["status"]["containerStatuses"] = statuses
    return out
