#!/usr/bin/env python3
"""Metadata scale (issue #16): topic creation, leader failover, controlled shutdown and memory with
many partitions, on Skein and on Apache Kafka, measured the same way on this machine.

    e2e/.venv/bin/python e2e/bench/metadata_scale.py                                  # 2000,10000; skein,kafka
    e2e/.venv/bin/python e2e/bench/metadata_scale.py --partitions 2000,10000,30000 --systems skein,kafka
    e2e/.venv/bin/python e2e/bench/metadata_scale.py --quick                          # 2000 only, 1 failover
    e2e/k8s/netns.sh e2e/.venv/bin/python e2e/bench/metadata_scale.py --systems skein-k8s --partitions 30000

A benchmark, not a test: it reports, it asserts nothing. For each size N and each system, fresh:

  1. A 3-broker cluster on loopback, data under e2e/bench/.work/ (removed afterwards).
       Skein: `skein-operator local --brokers 3` ($SKEIN_OPERATOR_BIN / $SKEIN_BROKER_BIN, default
              ~/.cache/skein/cargo-target/release/); the controller runs inside the operator process.
       Kafka: 4.1.1 from e2e/.cache (e2e/setup.sh), KRaft with a dedicated controller process
              (process.roles=controller, a 1-voter quorum) and three broker processes
              (process.roles=broker), each JVM with kafka-server-start.sh's flags (-Xmx1G -Xms1G, G1).
       skein-k8s: the Kubernetes tier (metadata_k8s.py; run under e2e/k8s/netns.sh, as root): the e2e/k8s
              control plane, charts/skein's operator (the controller in the active replica, its metadata
              log in ConfigMaps) and a KafkaCluster of 3 broker pods (ids 0-2) that e2e/k8s/pod_runner.py
              runs as local processes on their pod IPs; the broker data and the control plane's state
              under the work dir too.
     Both with bench.py's common broker settings and auto.leader.rebalance.enable=false: leaders
     are moved back to their preferred replicas explicitly (ElectLeaders) between the failovers.
  2. N partitions, RF 3, as topics of --topic-partitions (200) partitions each, created through the
     Admin API (confluent-kafka) with --topics-per-request (5) topics per CreateTopics request, one
     request at a time; timed until a raw Metadata request shows every partition with a leader, and
     until every broker has a log directory for every partition (Kafka's brokers create them in
     the background after Metadata shows the leaders).
  3. Failover, --failovers times (3): preferred leaders restored and every ISR full, then the
     broker leading the most partitions is SIGKILLed and a surviving broker is polled with raw
     Metadata v5 requests (one request per poll, back to back) until every partition has a leader
     that is neither -1 nor the killed broker. Reported: the time from the SIGKILL to the response
     that showed it, the partitions the killed broker led ("leaders moved"), when the first of them
     moved, and the CPU seconds each process spent meanwhile. The killed broker then comes back
     (Skein's local platform restarts a broker that dies by itself, within ~200 ms; Kafka's node is
     started again by this script; on skein-k8s pod_runner.py restarts it after its back-off), and
     the next sample waits until it is in every ISR again (if it is not within the bound, the
     remaining samples are skipped: the next kill could take out the only in-sync replica of some
     partitions).
     One Metadata call is timed on its own beforehand (round trip and parse) and reported.
  4. Controlled shutdown: a producer (acks=all, --produce-rate (300) records/s round robin over 4
     partitions led by each broker, spread over the topics, linger.ms 100; see LoadProducer for why
     not all partitions) runs; the broker leading the most partitions gets SIGTERM; reported:
     seconds until that process exited, the partitions it led, and produce failures (delivery
     errors) and the slowest delivery from the SIGTERM until 5 s after the exit.
  5. Memory and files: the controller's RSS after creation and after the failovers, each broker's
     RSS, open files (/proc/PID/fd) and memory maps (/proc/PID/maps lines) after creation. skein-k8s
     also: the standby operator's and the control plane's RSS and CPU, the metadata ConfigMaps, the
     Topic resources, etcd's database size and the operator Lease's transitions.

Machine limits: the soft RLIMIT_NOFILE is raised to the hard limit for the brokers (children
inherit it); run as root, vm.max_map_count is raised to 262144 for the run when it is lower (and
set back at the end). Both are in the report. A system that cannot reach a size (start, creation,
a failover or the shutdown fails or times out) is recorded as such in the report and the run
goes on.

Output: e2e/bench/results/metadata-<UTC date-time>/report.md and report.json (--out DIR), rewritten
after every system and size, so an interrupted run keeps what it measured; logs/ holds the first
and last lines of every process's log. `--render DIR` rewrites DIR/report.md from its report.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
E2E_DIR = BENCH_DIR.parent
REPO_DIR = E2E_DIR.parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(E2E_DIR / "tests"))

import bench  # noqa: E402  (COMMON_BROKER_SETTINGS, the Kafka JVM flags)
import brokers  # noqa: E402  (the e2e suite's launchers: Broker, LocalCluster)
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka import ElectionType, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

# metadata_k8s.py (the Kubernetes tier) imports this module by name: run as a script, it is __main__.
sys.modules.setdefault("metadata_scale", sys.modules[__name__])

MIB = 1 << 20
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
TOPIC_PREFIX = "ms-"
WANT_MAP_COUNT = 262144
CACHE_RELEASE = Path.home() / ".cache" / "skein" / "cargo-target" / "release"


def now() -> float:
    return time.monotonic()


def say(msg: str) -> None:
    print(f"[metadata {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load_avg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def head_commit() -> str:
    """HEAD's commit read from .git (no git command); the binaries may be built from a dirty tree."""
    try:
        git = REPO_DIR / ".git"
        if git.is_file():  # a worktree: "gitdir: …"
            git = Path(git.read_text().split(":", 1)[1].strip())
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head[:12]
        ref = head[5:]
        for g in (git, git.parent.parent if git.parent.name == "worktrees" else git):
            if (g / ref).is_file():
                return (g / ref).read_text().strip()[:12]
            if (g / "packed-refs").is_file():
                for line in (g / "packed-refs").read_text().splitlines():
                    if line.endswith(" " + ref):
                        return line.split()[0][:12]
    except (OSError, IndexError):
        pass
    return "?"


# --------------------------------------------------------------------------------------------
# /proc

def proc_alive(pid: int | None) -> bool:
    """Running and not a zombie (a child of the operator is a zombie until it reaps it)."""
    if not pid:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def proc_cpu(pid: int | None) -> float | None:
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / CLK_TCK
    except (OSError, IndexError, TypeError):
        return None


def proc_mem(pid: int | None) -> dict:
    """RSS, open files, memory maps and threads of a process (None where unreadable)."""
    out: dict = {"pid": pid}
    if not pid:
        return out
    try:
        out["rss_mib"] = round(int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / MIB, 1)
    except (OSError, IndexError):
        out["rss_mib"] = None
    try:
        out["open_files"] = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        out["open_files"] = None
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            out["maps"] = sum(1 for _ in f)
    except OSError:
        out["maps"] = None
    try:
        out["threads"] = len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        out["threads"] = None
    return out


# --------------------------------------------------------------------------------------------
# raw Metadata requests (v5: not flexible; Kafka 4 serves v4+, Skein v0-13)

class MetadataClient:
    """One connection to one broker; `fetch()` sends Metadata v5 for every topic and parses it."""

    VERSION = 5

    def __init__(self, host: str, port: int, timeout: float = 60.0):
        self.addr = (host, port)
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.corr = 0

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None

    def _connect(self):
        self.sock = socket.create_connection(self.addr, timeout=self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _recv_exact(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionError("connection closed by the broker")
            got += k
        return buf

    def raw(self) -> tuple[bytes, float, float]:
        """(response body after the correlation id, seconds from send to the last byte, now() at the last
        byte)."""
        if self.sock is None:
            self._connect()
        self.corr += 1
        client = b"metadata-scale"
        body = struct.pack(">hhih", 3, self.VERSION, self.corr, len(client)) + client + struct.pack(">ib", -1, 0)
        t0 = time.perf_counter()
        try:
            self.sock.sendall(struct.pack(">i", len(body)) + body)
            size, = struct.unpack(">i", self._recv_exact(4))
            data = self._recv_exact(size)
        except (OSError, ConnectionError):
            self.close()
            raise
        rtt = time.perf_counter() - t0
        arrived = now()
        corr, = struct.unpack_from(">i", data, 0)
        if corr != self.corr:
            self.close()
            raise ConnectionError(f"correlation id {corr} != {self.corr}")
        return bytes(data), rtt, arrived

    def fetch(self) -> "Meta":
        data, rtt, arrived = self.raw()
        t = time.perf_counter()
        m = parse_metadata_v5(data)
        m.rtt = rtt
        m.parse_s = time.perf_counter() - t
        m.nbytes = len(data)
        # When the response arrived, not when it was parsed (a 100,000-partition response takes
        # longer to parse in Python than to arrive).
        m.t_recv = arrived
        return m


class Meta:
    def __init__(self, brokers_: dict[int, tuple[str, int]], controller: int,
                 parts: list[tuple[str, int, int, tuple, tuple]], topic_errors: dict[str, int]):
        self.brokers = brokers_
        self.controller = controller
        self.parts = parts  # (topic, partition, leader, replicas, isr) of our topics
        self.topic_errors = topic_errors
        self.rtt = self.parse_s = 0.0
        self.nbytes = 0
        self.t_recv = 0.0

    def leaders(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for p in self.parts:
            out[p[2]] = out.get(p[2], 0) + 1
        return out


def parse_metadata_v5(buf: bytes) -> Meta:
    up = struct.unpack_from
    pos = 4  # correlation id
    pos += 4  # throttle_time_ms
    n, = up(">i", buf, pos)
    pos += 4
    bro = {}
    for _ in range(max(n, 0)):
        nid, hl = up(">ih", buf, pos)
        pos += 6
        host = buf[pos:pos + hl].decode()
        pos += hl
        port, rl = up(">ih", buf, pos)
        pos += 6 + max(rl, 0)
        bro[nid] = (host, port)
    cl, = up(">h", buf, pos)
    pos += 2 + max(cl, 0)
    controller, nt = up(">ii", buf, pos)
    pos += 8
    parts = []
    terr = {}
    for _ in range(max(nt, 0)):
        err, nl = up(">hh", buf, pos)
        pos += 4
        name = buf[pos:pos + nl].decode()
        pos += nl
        np_, = up(">i", buf, pos + 1)  # after is_internal
        pos += 5
        mine = name.startswith(TOPIC_PREFIX)
        if mine and err:
            terr[name] = err
        for _ in range(max(np_, 0)):
            _perr, idx, leader, nr = up(">hiii", buf, pos)
            pos += 14
            nr = max(nr, 0)
            reps = up(f">{nr}i", buf, pos)
            pos += 4 * nr
            ni, = up(">i", buf, pos)
            pos += 4
            ni = max(ni, 0)
            isr = up(f">{ni}i", buf, pos)
            pos += 4 * ni
            no, = up(">i", buf, pos)
            pos += 4 + 4 * max(no, 0)
            if mine:
                parts.append((name, idx, leader, reps, isr))
    return Meta(bro, controller, parts, terr)


# --------------------------------------------------------------------------------------------
# systems under test

class Unreachable(Exception):
    """A step that did not finish within its bound (recorded, not raised further)."""


def describe_binaries(operator_bin: Path, broker_bin: Path) -> dict:
    """The Skein binaries under test and when they were built (their mtime)."""
    d = {}
    for k, b in (("skein_operator_bin", operator_bin), ("skein_broker_bin", broker_bin)):
        d[k] = str(b)
        try:
            d[k + "_mtime_utc"] = dt.datetime.fromtimestamp(b.stat().st_mtime, dt.timezone.utc).isoformat(
                timespec="seconds")
        except OSError:
            d[k + "_mtime_utc"] = None
    return d


class SkeinSystem:
    """`skein-operator local --brokers 3`: the controller in the operator process, three brokers it
    supervises (and restarts when they die)."""

    kind = "skein"
    label = "Skein"
    controller_note = "the skein-operator process (controller core in-process; it also supervises the brokers)"

    def __init__(self, workdir: Path, overrides: dict[str, str], start_timeout: float):
        self.c = brokers.LocalCluster(workdir, 3, overrides)
        self.c.binary = Path(os.environ.get("SKEIN_OPERATOR_BIN", CACHE_RELEASE / "skein-operator"))
        self.c.broker_bin = Path(os.environ.get("SKEIN_BROKER_BIN", self.c.binary.parent / "skein-broker"))
        self.start_timeout = start_timeout
        self.ids = [1, 2, 3]

    def describe(self) -> dict:
        d = describe_binaries(self.c.binary, self.c.broker_bin)
        d["command"] = " ".join(self.c.command())
        return d

    def start(self):
        self.c.start(self.start_timeout)

    def stop(self):
        if self.c.proc is not None and self.c.proc.poll() is None:
            self.c.stop(240)

    @property
    def bootstrap(self) -> str:
        return self.c.bootstrap

    def addr(self, bid: int) -> tuple[str, int]:
        return "127.0.0.1", self.c.kafka_port + bid - 1

    def controller_pid(self) -> int | None:
        return self.c.proc.pid if self.c.proc and self.c.proc.poll() is None else None

    def broker_pid(self, bid: int) -> int | None:
        return self.c.broker_pid(bid)

    def kill9(self, bid: int) -> int:
        return self.c.signal_broker(bid, signal.SIGKILL)

    def sigterm(self, bid: int) -> int:
        return self.c.signal_broker(bid, signal.SIGTERM)

    def bring_back(self, bid: int, old_pid: int, timeout: float) -> dict:
        """The operator restarts the broker itself: wait for its new process and registration."""
        t0 = now()
        new = None
        while now() - t0 < timeout:
            p = self.c.broker_pid(bid)
            if p and p != old_pid:
                new = p
                break
            time.sleep(0.05)
        if new is None:
            raise Unreachable(f"the operator did not restart broker {bid} within {timeout:.0f} s")
        return {"restarted_by": "skein-operator (itself)", "new_process_after_s": round(now() - t0, 2)}

    def wait_exit(self, pid: int, timeout: float) -> bool:
        t0 = now()
        while now() - t0 < timeout:
            if not proc_alive(pid):
                return True
            time.sleep(0.02)
        return False

    def data_path(self, bid: int) -> Path:
        return self.c.data_dir / f"broker-{bid}"

    def logs(self) -> dict[str, Path]:
        d = {"controller": self.c.log_path}
        for i in self.ids:
            d[f"broker-{i}"] = self.c.broker_log(i)
        return d


class KafkaNode(brokers.Broker):
    """One Apache Kafka KRaft process: the dedicated controller or a broker."""

    start_timeout = 300.0

    def __init__(self, workdir: Path, node_id: int, role: str, cluster: "KafkaSystem"):
        self.name = f"kafka-{role}-{node_id}"
        super().__init__(workdir, {})
        self.node_id = node_id
        self.role = role
        self.cluster = cluster
        self.props_path = self.workdir / "server.properties"

    def properties(self) -> dict[str, str]:
        c = self.cluster
        p = {
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{c.controller.node_id}@127.0.0.1:{c.controller.port}",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(self.data_dir),
            # set on every node; the controller acts on the first two
            "auto.leader.rebalance.enable": "false",
            "broker.session.timeout.ms": str(c.session_timeout_ms),
        }
        if self.role == "controller":
            p.update({"process.roles": "controller",
                      "listeners": f"CONTROLLER://127.0.0.1:{self.port}",
                      "listener.security.protocol.map": "CONTROLLER:PLAINTEXT"})
        else:
            p.update({"process.roles": "broker",
                      "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                      "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                      "inter.broker.listener.name": "PLAINTEXT",
                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                      "default.replication.factor": "3",
                      "offsets.topic.replication.factor": "3",
                      "transaction.state.log.replication.factor": "3",
                      "transaction.state.log.min.isr": "2",
                      "share.coordinator.state.topic.replication.factor": "3",
                      "share.coordinator.state.topic.min.isr": "2",
                      "group.initial.rebalance.delay.ms": "0"})
            p.update(bench.COMMON_BROKER_SETTINGS)
        p.update(c.extra)
        return p

    def _java(self) -> list[str]:
        return ["java", *self.cluster.heap, *bench.KAFKA_JVM_PERF,
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ",
                "-cp", brokers.kafka_classpath()]

    def prepare(self) -> None:
        self.props_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        cmd = self._java() + ["kafka.tools.StorageTool", "format", "-t", self.cluster.cluster_id,
                              "-c", str(self.props_path)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        with open(self.log_path, "a") as f:
            f.write(r.stdout + r.stderr)
        if r.returncode != 0:
            raise RuntimeError(f"StorageTool format failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")

    def command(self) -> list[str]:
        return self._java() + ["kafka.Kafka", str(self.props_path)]

    def wait_ready_extra(self, deadline: float) -> None:
        if self.role == "controller":
            return
        # registered and unfenced: listed in the metadata of its own listener
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; log tail:\n" + self.log_tail(40))
            mc = MetadataClient("127.0.0.1", self.port, timeout=30)
            try:
                if self.node_id in mc.fetch().brokers:
                    return
            except Exception as e:  # noqa: BLE001
                last = e
            finally:
                mc.close()
            time.sleep(0.3)
        raise RuntimeError(f"{self.name} not registered in time ({last}); log tail:\n" + self.log_tail(40))


class KafkaSystem:
    """Apache Kafka 4.1 KRaft: one dedicated controller process (a 1-voter quorum) and three
    broker processes."""

    kind = "kafka"
    label = "Kafka"
    controller_note = "the dedicated KRaft controller JVM (process.roles=controller)"

    def __init__(self, workdir: Path, heap: list[str], session_timeout_ms: int, start_timeout: float):
        self.cluster_id = brokers.kafka_cluster_id()
        self.heap = heap
        self.session_timeout_ms = session_timeout_ms
        self.extra: dict[str, str] = {}
        self.controller = KafkaNode(workdir / "controller", 100, "controller", self)
        self.nodes = {i: KafkaNode(workdir / f"broker-{i}", i, "broker", self) for i in (1, 2, 3)}
        for n in [self.controller, *self.nodes.values()]:
            n.start_timeout = start_timeout
        self.ids = [1, 2, 3]

    def describe(self) -> dict:
        return {"kafka_version": brokers.kafka_version(), "jvm": self.heap + bench.KAFKA_JVM_PERF,
                "java": subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0],
                "layout": "1 dedicated KRaft controller (node 100) + 3 brokers (nodes 1-3)",
                "broker.session.timeout.ms": self.session_timeout_ms,
                "controller_properties": self.controller.properties(),
                "broker_properties": self.nodes[1].properties()}

    def start(self):
        self.controller.start()
        errors = []

        def go(n):
            try:
                n.start()
            except Exception as e:  # noqa: BLE001
                errors.append(e)
        ts = [threading.Thread(target=go, args=(n,)) for n in self.nodes.values()]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if errors:
            raise errors[0]

    def stop(self):
        for n in self.nodes.values():
            if n.running():
                n.proc.send_signal(signal.SIGTERM)
        for n in self.nodes.values():
            n.stop(240)
        self.controller.stop(60)

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values())

    def addr(self, bid: int) -> tuple[str, int]:
        return "127.0.0.1", self.nodes[bid].port

    def controller_pid(self) -> int | None:
        return self.controller.proc.pid if self.controller.running() else None

    def broker_pid(self, bid: int) -> int | None:
        n = self.nodes[bid]
        return n.proc.pid if n.running() else None

    def kill9(self, bid: int) -> int:
        pid = self.nodes[bid].proc.pid
        self.nodes[bid].kill9()
        return pid

    def sigterm(self, bid: int) -> int:
        n = self.nodes[bid]
        n._log_marker("SIGTERM (controlled shutdown)")
        n.proc.send_signal(signal.SIGTERM)
        return n.proc.pid

    def bring_back(self, bid: int, old_pid: int, timeout: float) -> dict:
        t0 = now()
        n = self.nodes[bid]
        n.start_timeout = timeout
        n.start()  # waits until it is registered (listed in metadata)
        return {"restarted_by": "this script", "registered_after_s": round(now() - t0, 2)}

    def wait_exit(self, pid: int, timeout: float) -> bool:
        for n in self.nodes.values():
            if n.proc is not None and n.proc.pid == pid:
                try:
                    n.proc.wait(timeout)
                    return True
                except subprocess.TimeoutExpired:
                    return False
        return not proc_alive(pid)

    def data_path(self, bid: int) -> Path:
        return self.nodes[bid].data_dir

    def logs(self) -> dict[str, Path]:
        d = {"controller": self.controller.log_path}
        for i, n in self.nodes.items():
            d[f"broker-{i}"] = n.log_path
        return d


# --------------------------------------------------------------------------------------------
# steps

def topic_plan(n: int, per_topic: int) -> list[tuple[str, int]]:
    plan = []
    left, i = n, 0
    while left > 0:
        k = min(per_topic, left)
        plan.append((f"{TOPIC_PREFIX}{i:05d}", k))
        left -= k
        i += 1
    return plan


def meta_client(system, bid: int) -> MetadataClient:
    h, p = system.addr(bid)
    return MetadataClient(h, p)


def fetch_retry(mc: MetadataClient, deadline: float) -> Meta:
    last = None
    while now() < deadline:
        try:
            return mc.fetch()
        except Exception as e:  # noqa: BLE001
            last = e
            time.sleep(0.2)
    raise Unreachable(f"no Metadata answer from {mc.addr}: {last}")


def wait_until(mc: MetadataClient, cond, timeout: float, what: str, interval: float = 0.0) -> tuple[Meta, float]:
    """Polls Metadata until cond(meta) holds; returns (that meta, seconds)."""
    t0 = now()
    deadline = t0 + timeout
    last = None
    while True:
        if now() > deadline:
            raise Unreachable(f"{what}: not within {timeout:.0f} s"
                              + (f" (last Metadata: {describe_meta(last)})" if last else ""))
        m = fetch_retry(mc, deadline)
        last = m
        if cond(m):
            return m, m.t_recv - t0
        if interval:
            time.sleep(interval)


def describe_meta(m: Meta) -> str:
    no_leader = sum(1 for p in m.parts if p[2] < 0)
    short_isr = sum(1 for p in m.parts if len(p[4]) < len(p[3]))
    return (f"{len(m.parts)} partitions, {no_leader} without a leader, {short_isr} with a short ISR, "
            f"leaders per broker {dict(sorted(m.leaders().items()))}, brokers {sorted(m.brokers)}")


def create_topics(system, n: int, per_topic: int, per_request: int, timeout: float) -> dict:
    plan = topic_plan(n, per_topic)
    admin = AdminClient({"bootstrap.servers": system.bootstrap, "log_level": 3})
    mc = meta_client(system, 1)
    out = {"topics": len(plan), "partitions_per_topic": per_topic, "topics_per_request": per_request,
           "requests": 0, "errors": []}
    t0 = now()
    deadline = t0 + timeout
    req_times = []
    try:
        for i in range(0, len(plan), per_request):
            batch = [NewTopic(name, num_partitions=k, replication_factor=3) for name, k in plan[i:i + per_request]]
            for attempt in range(3):
                if now() > deadline:
                    raise Unreachable(f"CreateTopics not done within {timeout:.0f} s "
                                      f"({i} of {len(plan)} topics requested)")
                tr = now()
                futs = admin.create_topics(batch, operation_timeout=60, request_timeout=min(3000, max(30, deadline - now())))
                failed = []
                for name, f in futs.items():
                    try:
                        f.result()
                    except Exception as e:  # noqa: BLE001
                        msg = str(e)
                        if "TOPIC_ALREADY_EXISTS" in msg or "already exists" in msg:
                            continue
                        failed.append((name, msg))
                out["requests"] += 1
                req_times.append(now() - tr)
                if not failed:
                    break
                out["errors"].append({"attempt": attempt + 1, "failed": failed[:5], "count": len(failed)})
                names = {x[0] for x in failed}
                batch = [t for t in batch if t.topic in names]
            else:
                raise Unreachable(f"CreateTopics kept failing: {out['errors'][-1]}")
            done = min(i + per_request, len(plan))
            if done % (per_request * 10) == 0 or done == len(plan):
                say(f"    {sum(k for _, k in plan[:done])} partitions requested, {now() - t0:.1f} s")
        out["create_topics_s"] = round(now() - t0, 2)
        out["request_s_median"] = round(statistics.median(req_times), 3) if req_times else None
        out["request_s_max"] = round(max(req_times), 3) if req_times else None

        def all_led(m: Meta):
            return len(m.parts) >= n and all(p[2] >= 0 for p in m.parts)
        m, _ = wait_until(mc, all_led, max(10.0, deadline - now()), "every partition with a leader", interval=0.2)
        out["create_s"] = round(m.t_recv - t0, 2)
        out["partitions_seen"] = len(m.parts)
        out["leaders_per_broker"] = {str(k): v for k, v in sorted(m.leaders().items())}
        # Metadata shows the controller's assignment; the brokers may still be creating the
        # replicas (Kafka applies them in the background): also wait until every broker has a
        # log directory for every partition.
        counts = {}
        while True:
            counts = {b: replica_dirs(system.data_path(b)) for b in system.ids}
            if all(c >= n for c in counts.values()):
                out["on_disk_s"] = round(now() - t0, 2)
                break
            if now() > deadline:
                out["on_disk_error"] = f"replica directories per broker {counts} of {n} after {timeout:.0f} s"
                break
            time.sleep(0.25)
        out["replica_dirs"] = {str(b): c for b, c in counts.items()}
        return out
    finally:
        mc.close()


def replica_dirs(path: Path) -> int:
    try:
        return sum(1 for e in os.scandir(path) if e.name.startswith(TOPIC_PREFIX) and e.is_dir())
    except OSError:
        return 0


def metadata_cost(system, bid: int, n_calls: int = 5) -> dict:
    mc = meta_client(system, bid)
    try:
        rtts, parses, sizes = [], [], []
        for _ in range(n_calls):
            m = mc.fetch()
            rtts.append(m.rtt)
            parses.append(m.parse_s)
            sizes.append(m.nbytes)
        return {"broker": bid, "calls": n_calls, "round_trip_ms_median": round(statistics.median(rtts) * 1000, 1),
                "round_trip_ms_max": round(max(rtts) * 1000, 1),
                "parse_ms_median": round(statistics.median(parses) * 1000, 1),
                "response_kib": round(statistics.median(sizes) / 1024, 1)}
    finally:
        mc.close()


def full_and_balanced(system, n: int, timeout: float) -> dict:
    """Waits until every ISR is full, then moves leadership back to preferred replicas
    (ElectLeaders for the partitions led elsewhere) and waits for it."""
    out = {}
    mc = meta_client(system, 1)
    try:
        t0 = now()

        def isr_full(m: Meta):
            return (len(m.parts) >= n and all(len(p[4]) >= len(p[3]) for p in m.parts)
                    and all(p[2] >= 0 for p in m.parts) and len(m.brokers) >= 3)
        m, s = wait_until(mc, isr_full, timeout, "every ISR full again", interval=0.5)
        out["isr_full_s"] = round(s, 2)
        off = [(p[0], p[1]) for p in m.parts if p[3] and p[2] != p[3][0]]
        out["not_preferred"] = len(off)
        if off:
            t1 = now()
            # confluent-kafka 2.16's elect_leaders takes no timeout arguments (its C binding rejects
            # them): the request timeout is socket.timeout.ms
            admin = AdminClient({"bootstrap.servers": system.bootstrap, "log_level": 3,
                                 "socket.timeout.ms": int(min(300.0, max(60.0, timeout)) * 1000)})
            errs = {}
            for i in range(0, len(off), 2000):
                try:
                    res = admin.elect_leaders(ElectionType.PREFERRED,
                                              [TopicPartition(t, p) for t, p in off[i:i + 2000]]).result()
                    for _tp, e in res.items():
                        if e is not None:
                            errs[str(e)[:120]] = errs.get(str(e)[:120], 0) + 1
                except Exception as e:  # noqa: BLE001
                    k = f"request: {str(e)[:200]}"
                    errs[k] = errs.get(k, 0) + 1
            out["elect_leaders_request_s"] = round(now() - t1, 2)
            if errs:
                out["elect_leaders_errors"] = errs

            def balanced(mm: Meta):
                return all(p[2] == p[3][0] for p in mm.parts if p[3])
            try:
                _, _ = wait_until(mc, balanced, max(30.0, min(timeout - (now() - t0), 60 + n / 100)),
                                  "preferred leaders", interval=0.5)
                out["preferred_leaders_s"] = round(now() - t1, 2)
            except Unreachable as e:
                out["preferred_leaders_error"] = str(e)[:500]
        m = fetch_retry(mc, now() + 60)
        out["leaders_per_broker"] = {str(k): v for k, v in sorted(m.leaders().items())}
        return out
    finally:
        mc.close()


class LogWindow:
    """The lines a set of log files gained between mark() and take()."""

    def __init__(self, paths: dict[str, Path]):
        self.paths = paths
        self.pos: dict[str, int] = {}

    def mark(self):
        for k, p in self.paths.items():
            try:
                self.pos[k] = p.stat().st_size
            except OSError:
                self.pos[k] = 0

    def take(self, head: int = 25, tail: int = 15) -> dict:
        out = {}
        for k, p in self.paths.items():
            try:
                with open(p, "rb") as f:
                    f.seek(self.pos.get(k, 0))
                    data = f.read(64 * MIB)
            except OSError:
                continue
            lines = [ln[:300] for ln in data.decode(errors="replace").splitlines() if ln.strip()]
            if len(lines) > head + tail:
                lines = lines[:head] + [f"... ({len(lines) - head - tail} lines) ..."] + lines[-tail:]
            out[k] = {"lines": lines}
        return out


def failover(system, n: int, timeout: float, recover_timeout: float) -> dict:
    """One SIGKILL failover sample, then the killed broker back and every ISR full again."""
    pre = fetch_retry(meta_client(system, 1), now() + 60)
    led = pre.leaders()
    victim = max(system.ids, key=lambda b: (led.get(b, 0), -b))
    moved = led.get(victim, 0)
    survivor = min(b for b in system.ids if b != victim)
    mc = meta_client(system, survivor)
    fetch_retry(mc, now() + 30)  # connected and warm
    pids = {"controller": system.controller_pid(), **{f"broker-{b}": system.broker_pid(b) for b in system.ids},
            **other_pids(system)}
    cpu0 = {k: proc_cpu(p) for k, p in pids.items()}
    logs = LogWindow(system.logs())
    logs.mark()
    out = {"killed_broker": victim, "leaders_moved": moved, "polled_broker": survivor,
           "leaders_before": {str(k): v for k, v in sorted(led.items())}}
    t0 = now()
    out["killed_at_utc"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")
    old_pid = system.kill9(victim)
    timeline = []  # (s since kill, partitions still led by the victim or leaderless, poll round trip ms)
    try:
        deadline = t0 + timeout
        first_move = None
        done = None
        polls = 0
        while now() < deadline:
            try:
                m = mc.fetch()
            except Exception:  # noqa: BLE001
                time.sleep(0.05)
                continue
            polls += 1
            bad = sum(1 for p in m.parts if p[2] < 0 or p[2] == victim)
            t = m.t_recv - t0
            timeline.append((round(t, 3), bad, round(m.rtt * 1000, 1)))
            if first_move is None and bad < moved:
                first_move = t
            if bad == 0 and len(m.parts) >= n:
                done = t
                break
        out["polls"] = polls
        out["poll_ms_median"] = round(statistics.median(x[2] for x in timeline), 1) if timeline else None
        out["first_leader_moved_s"] = round(first_move, 3) if first_move is not None else None
        if done is None:
            out["error"] = f"leaders not all moved within {timeout:.0f} s (last poll: {timeline[-1] if timeline else None})"
        else:
            out["failover_s"] = round(done, 3)
        out["cpu_s_during"] = {k: (round(proc_cpu(p) - cpu0[k], 2) if proc_cpu(p) is not None and cpu0[k] is not None
                                   else None) for k, p in pids.items() if k != f"broker-{victim}"}
        step = max(1, len(timeline) // 60)
        out["timeline"] = timeline[::step] + ([timeline[-1]] if timeline and (len(timeline) - 1) % step else [])
        out["logs"] = logs.take()
    finally:
        mc.close()
    # bring it back, wait for every ISR
    t1 = now()
    try:
        out["back"] = system.bring_back(victim, old_pid, recover_timeout)
        t2 = now()
        out["recovery"] = full_and_balanced(system, n, max(30.0, recover_timeout - (now() - t1)))
        # from the end of the failover sample until the killed broker is in every ISR again
        out["back_in_every_isr_s"] = round(t2 - t1 + out["recovery"]["isr_full_s"], 2)
        out["recovery"]["total_s"] = round(now() - t1, 2)
    except Exception as e:  # noqa: BLE001
        out["recovery_error"] = str(e)[:1500]
    return out


class LoadProducer(threading.Thread):
    """acks=all records at a fixed rate, round robin over a set of partitions.

    Not random partitions of all topics: librdkafka sends one partition per ProduceRequest
    (confluentinc/librdkafka#1700) and a broker answers one connection's requests in order, so
    acks=all records spread over thousands of partitions queue behind each other's replication
    (in a trial at 2000 partitions and 300 records/s the delivery p50 was 8 s on Skein and 27 s
    on Kafka before anything was stopped). A few partitions with linger.ms make batches."""

    def __init__(self, bootstrap: str, targets: list[tuple[str, int]], rate: float, linger_ms: int):
        super().__init__(name="producer", daemon=True)
        self.targets = targets
        self.rate = rate
        self.conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": linger_ms,
                     "message.timeout.ms": 60000, "log_level": 3}
        self.p = Producer(self.conf)
        self.records: list[tuple[float, float, str | None]] = []  # (sent, done, error)
        self.sent = 0
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.left = None

    def run(self):
        try:
            interval = 1.0 / self.rate
            nxt = now()
            while not self.stop_event.is_set():
                t = now()
                if t < nxt:
                    self.p.poll(min(nxt - t, 0.05))
                    continue
                nxt += interval
                if t - nxt > 1:
                    nxt = t
                topic, part = self.targets[self.sent % len(self.targets)]
                t_send = now()

                def cb(err, _msg, t_send=t_send):
                    self.records.append((t_send, now(), str(err) if err else None))
                try:
                    self.p.produce(topic, b"x" * 100, partition=part, on_delivery=cb)
                    self.sent += 1
                except BufferError as e:
                    self.records.append((t_send, now(), f"BufferError: {e}"))
                self.p.poll(0)
            self.left = self.p.flush(90)
        except BaseException as e:  # noqa: BLE001
            self.error = e


def controlled_shutdown(system, n: int, rate: float, per_broker: int, linger_ms: int, timeout: float) -> dict:
    mc0 = meta_client(system, 1)
    pre = fetch_retry(mc0, now() + 60)
    mc0.close()
    led = pre.leaders()
    victim = max(system.ids, key=lambda b: (led.get(b, 0), -b))
    survivor = min(b for b in system.ids if b != victim)
    # per_broker partitions led by each broker, evenly spaced over the topics
    targets = []
    for b in system.ids:
        mine = sorted((p[0], p[1]) for p in pre.parts if p[2] == b)
        for i in range(min(per_broker, len(mine))):
            targets.append(mine[(2 * i + 1) * len(mine) // (2 * per_broker)])
    out = {"broker": victim, "partitions_led": led.get(victim, 0), "produce_rate": rate,
           "produce_partitions": targets, "producer_linger_ms": linger_ms,
           "produce_partitions_led_by_stopped_broker": sum(1 for t in targets if (t, victim) in
                                                          {((p[0], p[1]), p[2]) for p in pre.parts})}
    prod = LoadProducer(system.bootstrap, targets, rate, linger_ms)
    prod.start()
    logs = LogWindow(system.logs())
    mc = meta_client(system, survivor)
    try:
        time.sleep(10)  # warm-up: the producer has metadata for every topic and a steady rate
        logs.mark()
        fetch_retry(mc, now() + 30)
        pid = system.broker_pid(victim)
        t0 = now()
        system.sigterm(victim)
        exited = None
        leaders_gone = None
        deadline = t0 + timeout
        while now() < deadline:
            if exited is None and not proc_alive(pid):
                exited = now() - t0
            if leaders_gone is None:
                try:
                    m = mc.fetch()
                    if all(p[2] != victim for p in m.parts):
                        leaders_gone = m.t_recv - t0
                except Exception:  # noqa: BLE001
                    pass
            if exited is not None and leaders_gone is not None:
                break
            time.sleep(0.02 if leaders_gone is not None else 0)
        if exited is None:
            out["error"] = f"broker {victim} still running {timeout:.0f} s after SIGTERM"
            exited_at = now() - t0
        else:
            out["exit_s"] = round(exited, 2)
            exited_at = exited
        out["leaders_moved_away_s"] = round(leaders_gone, 2) if leaders_gone is not None else None
        time.sleep(5)
        t_end = now()
        prod.stop_event.set()
        prod.join(120)
        recs = [r for r in prod.records if t0 <= r[0] <= t_end]
        fails = [r for r in prod.records if r[2]]
        out["records_sent_total"] = prod.sent
        out["records_in_window"] = len(recs)
        out["produce_failures"] = len(fails)
        out["produce_failures_in_window"] = sum(1 for r in recs if r[2])
        out["failure_examples"] = sorted({r[2] for r in fails})[:5]
        out["undelivered_at_end"] = prod.left
        lat = sorted(r[1] - r[0] for r in recs if not r[2])
        out["max_delivery_ms_in_window"] = round(lat[-1] * 1000, 1) if lat else None
        out["p99_delivery_ms_in_window"] = round(lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000, 1) if lat else None
        base = sorted(r[1] - r[0] for r in prod.records if r[0] < t0 and not r[2])
        out["p99_delivery_ms_before"] = round(base[min(len(base) - 1, int(len(base) * 0.99))] * 1000, 1) if base else None
        out["p50_delivery_ms_before"] = round(base[len(base) // 2] * 1000, 1) if base else None
        out["p50_delivery_ms_in_window"] = round(lat[len(lat) // 2] * 1000, 1) if lat else None
        out["window_s"] = round(t_end - t0, 2)
        out["exit_window_note"] = f"window: SIGTERM to 5 s after the exit ({exited_at:.1f} s + 5 s)"
        out["logs"] = logs.take()
        if system.kind == "kafka":
            rc = system.nodes[victim].proc.poll()
            out["exit_code"] = rc
        return out
    finally:
        mc.close()
        if prod.is_alive():
            prod.stop_event.set()
            prod.join(30)


def other_pids(system) -> dict[str, int | None]:
    """Processes besides the controller and the brokers a system has (skein-k8s: the standby operator
    replica and the Kubernetes control plane)."""
    return system.other_pids() if hasattr(system, "other_pids") else {}


def memory(system) -> dict:
    out = {"controller": proc_mem(system.controller_pid()),
           "brokers": {str(b): proc_mem(system.broker_pid(b)) for b in system.ids}}
    others = other_pids(system)
    if others:
        out["others"] = {k: proc_mem(p) for k, p in others.items()}
    return out


def platform_state(system, res: dict, key: str):
    """skein-k8s: the state's cost on Kubernetes (metadata ConfigMaps, Topic resources, etcd, Lease)."""
    if hasattr(system, "platform"):
        try:
            res.setdefault("platform", {})[key] = system.platform()
        except Exception as e:  # noqa: BLE001
            res.setdefault("platform", {})[key] = {"error": str(e)[:500]}


SYSTEMS = ("skein", "kafka", "skein-k8s")
LABELS = {"skein": "Skein", "kafka": "Kafka 4.1", "skein-k8s": "Skein on Kubernetes"}


def make_system(kind: str, wdir: Path, overrides: dict[str, str], args, start_timeout: float):
    if kind == "skein":
        return SkeinSystem(wdir, overrides, start_timeout)
    if kind == "skein-k8s":
        import metadata_k8s  # imports e2e/k8s/test_operator.py (pytest): only when asked for
        return metadata_k8s.SkeinK8sSystem(wdir, overrides, start_timeout)
    return KafkaSystem(wdir, args.kafka_heap.split(), args.kafka_session_timeout_ms, start_timeout)


def data_size(path: Path) -> dict:
    files = 0
    total = 0
    for root, _dirs, fs in os.walk(path):
        for f in fs:
            try:
                st = os.stat(os.path.join(root, f))
            except OSError:
                continue
            files += 1
            total += st.st_blocks * 512
    return {"files": files, "disk_mib": round(total / MIB, 1)}


# --------------------------------------------------------------------------------------------

def run_one(kind: str, n: int, args, work: Path) -> dict:
    res: dict = {"system": kind, "partitions": n, "started_utc": dt.datetime.now(dt.timezone.utc).isoformat(
        timespec="seconds"), "load_start": load_avg()}
    start_timeout = 120 + n / 100
    create_timeout = 120 + n / 25
    failover_timeout = 60 + n / 100
    recover_timeout = 120 + n / 50
    shutdown_timeout = 120 + n / 50
    res["timeouts_s"] = {"start": start_timeout, "create": create_timeout, "failover": failover_timeout,
                         "recover": recover_timeout, "shutdown": shutdown_timeout}
    overrides = dict(bench.COMMON_BROKER_SETTINGS)
    overrides["auto.leader.rebalance.enable"] = "false"
    wdir = work / f"{kind}-{n}"
    shutil.rmtree(wdir, ignore_errors=True)
    system = make_system(kind, wdir, overrides, args, start_timeout)
    res["setup"] = system.describe()
    step = "start"
    try:
        say(f"{kind} {n}: starting")
        t = now()
        system.start()
        res["start_s"] = round(now() - t, 2)
        res["memory_idle"] = memory(system)
        platform_state(system, res, "after_start")

        step = "create"
        say(f"{kind} {n}: creating {n} partitions")
        res["create"] = create_topics(system, n, args.topic_partitions, args.topics_per_request, create_timeout)
        say(f"{kind} {n}: created in {res['create']['create_s']} s "
            f"(CreateTopics {res['create']['create_topics_s']} s, every replica on disk "
            f"{res['create'].get('on_disk_s', res['create'].get('on_disk_error'))} s)")
        time.sleep(5)
        res["memory_after_create"] = memory(system)
        res["data_after_create"] = data_size(getattr(system, "data_root", wdir))
        platform_state(system, res, "after_create")
        step = "metadata cost"
        res["metadata_call"] = metadata_cost(system, 1)
        say(f"{kind} {n}: one Metadata call {res['metadata_call']}")

        step = "failover"
        res["failovers"] = []
        for i in range(args.failovers):
            step = f"failover {i + 1}"
            say(f"{kind} {n}: failover {i + 1}/{args.failovers}")
            f = failover(system, n, failover_timeout, recover_timeout)
            res["failovers"].append(f)
            say(f"{kind} {n}: failover {i + 1}: killed {f['killed_broker']} ({f['leaders_moved']} leaders): "
                + (f"{f['failover_s']} s" if "failover_s" in f else f.get("error", "?"))
                + f"; first move {f.get('first_leader_moved_s')} s, {f.get('polls')} polls; "
                + (f"recovery {f['recovery']}" if "recovery" in f else f"recovery error {f.get('recovery_error')}"))
            if "error" in f:
                raise Unreachable(f"failover {i + 1}: {f['error']}")
            if "recovery_error" in f:
                # Killing another broker now could take out the only in-sync replica of some
                # partitions: the remaining samples are skipped, the controlled shutdown still runs.
                res.setdefault("recovery_errors", []).append(f"failover {i + 1}: {f['recovery_error'][:800]}")
                if i + 1 < args.failovers:
                    res["failovers_skipped"] = (f"{args.failovers - i - 1} failover(s) not run: the broker killed in "
                                                f"failover {i + 1} was not back in every ISR within the bound")
                    say(f"{kind} {n}: {res['failovers_skipped']}")
                break
        res["memory_after_failovers"] = memory(system)
        platform_state(system, res, "after_failovers")

        step = "controlled shutdown"
        say(f"{kind} {n}: controlled shutdown under {args.produce_rate} records/s")
        res["controlled_shutdown"] = controlled_shutdown(
            system, n, args.produce_rate, args.produce_partitions_per_broker, args.producer_linger_ms,
            shutdown_timeout)
        cs = res["controlled_shutdown"]
        say(f"{kind} {n}: controlled shutdown of {cs['broker']} ({cs['partitions_led']} leaders): "
            f"exit {cs.get('exit_s', cs.get('error'))} s, leaders away {cs['leaders_moved_away_s']} s, "
            f"{cs['produce_failures']} produce failures, max delivery {cs['max_delivery_ms_in_window']} ms")
    except Exception as e:  # noqa: BLE001
        res["failed_step"] = step
        res["error"] = f"{type(e).__name__}: {e}"[:4000]
        if not isinstance(e, Unreachable):
            res["traceback"] = traceback.format_exc()[-3000:]
        say(f"{kind} {n}: FAILED at {step}: {str(e)[:500]}")
        try:
            res.setdefault("memory_at_failure", memory(system))
        except Exception:  # noqa: BLE001
            pass
    finally:
        if res.get("error"):
            platform_state(system, res, "at_failure")
        t = now()
        try:
            system.stop()
        except Exception as e:  # noqa: BLE001
            res["stop_error"] = str(e)[:500]
        res["stop_s"] = round(now() - t, 2)
        res["load_end"] = load_avg()
        logdir = args.out / "logs"
        logdir.mkdir(parents=True, exist_ok=True)
        for name, p in system.logs().items():
            try:
                lines = p.read_text(errors="replace").splitlines()
            except OSError:
                continue
            keep = lines if len(lines) <= 400 else lines[:150] + [f"... ({len(lines) - 350} lines) ..."] + lines[-200:]
            (logdir / f"{kind}-{n}-{name}.log").write_text("\n".join(keep) + "\n")
        if not args.keep_work:
            shutil.rmtree(wdir, ignore_errors=True)
    return res


# --------------------------------------------------------------------------------------------
# report

def fmt(v, nd=1):
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def row(r: dict) -> list[str]:
    label = LABELS[r["system"]]
    c = r.get("create") or {}
    fos = [f["failover_s"] for f in r.get("failovers", []) if "failover_s" in f]
    fo = (f"**{statistics.median(fos):.2f}** (" + ", ".join(f"{x:.2f}" for x in fos) + ")") if fos else "–"
    moved = ", ".join(str(f["leaders_moved"]) for f in r.get("failovers", [])) or "–"
    cs = r.get("controlled_shutdown") or {}
    if cs:
        css = (f"{cs['exit_s']:.1f}" if "exit_s" in cs else "no exit") + f" / {cs['produce_failures_in_window']}"
        if cs["produce_failures"] != cs["produce_failures_in_window"]:
            css += f" ({cs['produce_failures']} in all)"
    else:
        css = "–"
    m1 = (r.get("memory_after_create") or {})
    m2 = (r.get("memory_after_failovers") or {})
    ctl = fmt((m1.get("controller") or {}).get("rss_mib"), 0)
    if m2:
        ctl += " → " + fmt((m2.get("controller") or {}).get("rss_mib"), 0)
    elif (r.get("memory_at_failure") or {}).get("controller", {}).get("rss_mib") is not None:
        ctl += " → " + fmt(r["memory_at_failure"]["controller"]["rss_mib"], 0) + " (at the failure)"
    bro = list((m1.get("brokers") or {}).values())
    rss = max((b.get("rss_mib") or 0 for b in bro), default=None)
    fds = max((b.get("open_files") or 0 for b in bro), default=None)
    create = fmt(c.get("create_s"), 1) + (f" / {fmt(c.get('on_disk_s'), 1)}" if c.get("on_disk_s") is not None
                                          else " / not all on disk" if c.get("on_disk_error") else "")
    cells = [label, f"{r['partitions']:,}", create, fo, moved, css, ctl,
             fmt(rss, 0) if bro else "–", fmt(fds) if bro else "–"]
    if r.get("error"):
        cells[-1] += f" — **failed at {r['failed_step']}**"
    return cells


def render(results: dict) -> str:
    env = results["environment"]
    L = [f"# Metadata scale (issue #16) — {results['stamp']}", "",
         "Benchmark `e2e/bench/metadata_scale.py` " + " ".join(results["argv"]) + "; nothing is asserted. "
         "Per system and size a fresh 3-broker cluster, RF 3, topics of "
         f"{results['settings']['topic_partitions']} partitions.", "",
         "| system | partitions | create s (Metadata / every replica on disk) | failover median s (samples) | leaders moved | "
         "controlled shutdown s / produce failures | controller RSS MiB (created → after failovers) | "
         "broker RSS MiB (max) | broker open files (max) |",
         "| --- | ---: | ---: | --- | --- | --- | --- | ---: | ---: |"]
    for r in results["runs"]:
        L.append("| " + " | ".join(row(r)) + " |")
    L += ["", "Details:", "",
          "| system | partitions | CreateTopics s | one Metadata call ms (round trip / parse, KiB) | "
          "first leader moved s (per failover) | back in every ISR s (per failover) | "
          "shutdown: leaders away s; delivery ms p50 before / p50, max during | broker maps (max) | broker threads (max) | data on disk |",
          "| --- | ---: | ---: | --- | --- | --- | --- | ---: | ---: | --- |"]
    for r in results["runs"]:
        c = r.get("create") or {}
        mcall = r.get("metadata_call") or {}
        mc = (f"{mcall['round_trip_ms_median']} / {mcall['parse_ms_median']} ({mcall['response_kib']:,.0f})"
              if mcall else "–")
        fos = r.get("failovers", [])
        first = ", ".join(fmt(f.get("first_leader_moved_s"), 2) for f in fos) or "–"
        back = ", ".join(fmt(f.get("back_in_every_isr_s"), 1) if "recovery" in f else "err"
                         for f in fos) or "–"
        cs = r.get("controlled_shutdown") or {}
        css = (f"{fmt(cs.get('leaders_moved_away_s'), 2)}; {fmt(cs.get('p50_delivery_ms_before'), 0)} / "
               f"{fmt(cs.get('p50_delivery_ms_in_window'), 0)}, {fmt(cs.get('max_delivery_ms_in_window'), 0)}") if cs else "–"
        bro = list(((r.get("memory_after_create") or {}).get("brokers") or {}).values())
        maps = max((b.get("maps") or 0 for b in bro), default=None)
        thr = max((b.get("threads") or 0 for b in bro), default=None)
        d = r.get("data_after_create") or {}
        L.append(f"| {r['system']} | {r['partitions']:,} | {fmt(c.get('create_topics_s'), 1)} | {mc} | {first} | "
                 f"{back} | {css} | {fmt(maps) if bro else '–'} | {fmt(thr) if bro else '–'} | "
                 + (f"{d['files']:,} files, {d['disk_mib']:,.0f} MiB" if d else "–") + " |")
    k8s_runs = [r for r in results["runs"] if r.get("platform")]
    if k8s_runs:
        L += render_platform(k8s_runs)
    fails = [r for r in results["runs"] if r.get("error")]
    notes = [r for r in results["runs"] if r.get("recovery_errors")]
    if notes:
        L += ["", "Recovery after a failover that did not finish (the killed broker not back in every ISR in time):", ""]
        for r in notes:
            L.append(f"- **{r['system']} {r['partitions']:,}**: " + "; ".join(e[:400] for e in r["recovery_errors"])
                     + (f". {r['failovers_skipped']}." if r.get("failovers_skipped") else ""))
    if fails:
        L += ["", "Failures (a size the system did not reach; details in report.json):", ""]
        for r in fails:
            L.append(f"- **{r['system']} {r['partitions']:,}** at *{r['failed_step']}*: "
                     + r["error"].splitlines()[0][:600])
    if results.get("notes"):
        L += ["", "Notes:", ""] + [f"- {x}" for x in results["notes"]]
    L += ["", "How it is measured:", "",
          "- **create s**: from the first CreateTopics request (confluent-kafka Admin, "
          f"{results['settings']['topics_per_request']} topics per request, one request at a time) until a "
          "Metadata response from broker 1 shows every partition with a leader, and until every broker has a log "
          "directory for every partition (Metadata shows the controller's assignment; Kafka's brokers create the "
          "replicas in the background after it).",
          "- **failover**: the broker leading the most partitions (after preferred leaders are restored) is "
          "SIGKILLed; a surviving broker is polled with raw Metadata v5 requests back to back; the sample is the "
          "time from the SIGKILL to the response in which no partition is leaderless or led by the killed broker "
          "(resolution: one poll, see the Metadata call cost). **leaders moved**: partitions the killed broker led. "
          "Then the broker comes back (Skein: the operator restarts it by itself; Kafka: the script starts the "
          "process again), every ISR must be full again and the preferred leaders are elected (ElectLeaders) "
          "before the next sample. Both systems run with auto.leader.rebalance.enable=false.",
          f"- **Kafka detects a SIGKILLed broker by its session timing out** (broker.session.timeout.ms "
          f"{results['settings']['kafka_session_timeout_ms']} ms, Kafka's default 9000), so its failover includes "
          "that wait (see *first leader moved*); Skein's controller sees the broker's control session (a TCP "
          "connection to the dead process) break and elects at once.",
          f"- **controlled shutdown**: while a producer sends {results['settings']['produce_rate']} records/s "
          f"(acks=all, 100 B, round robin over {results['settings']['produce_partitions_per_broker']} partitions led "
          f"by each broker, linger.ms {results['settings']['producer_linger_ms']}, message.timeout.ms 60 s; not all "
          "partitions: librdkafka sends one partition per ProduceRequest, librdkafka#1700, and acks=all requests "
          "spread over thousands of partitions queue up on one connection — delivery p50 of seconds on both "
          "systems before anything was stopped), the broker leading the most "
          "partitions gets SIGTERM; seconds until its process exited / delivery errors of the records sent from "
          "the SIGTERM until 5 s after the exit (in brackets: all of the producer's errors, also of records sent "
          "before; the producer retries NOT_LEADER by itself, an error is a record that failed for good, here "
          "always message.timeout.ms expiring). *leaders away*: until a surviving "
          "broker's Metadata shows none led by it.",
          "- **memory**: RSS (/proc/PID/statm) 5 s after creation, and the controller's again after the failovers; "
          "open files = entries in /proc/PID/fd; maps = lines of /proc/PID/maps. Controller: "
          "Skein — " + SkeinSystem.controller_note + "; Kafka — " + KafkaSystem.controller_note
          + "".join(f"; {LABELS[k]} — {n}" for k, n in sorted({r["system"]: (r.get("setup") or {}).get(
              "controller_note") for r in results["runs"] if r["system"] == "skein-k8s"}.items()) if n) + "."]
    if k8s_runs:
        L += ["- **Skein on Kubernetes** (`skein-k8s`, `e2e/bench/metadata_k8s.py`, under `e2e/k8s/netns.sh`): the "
              "e2e/k8s control plane (etcd, kube-apiserver, controller-manager, scheduler; kwok nodes), charts/skein "
              "installed with helm (2 operator replicas, Lease), a KafkaCluster of 3 brokers (ids 0-2, pod ordinals) "
              "whose spec.config holds the same broker settings; e2e/k8s/pod_runner.py runs every pod as a local "
              "process (brokers bound to their pod IPs, clients reach them by their advertised pod DNS names through "
              "netns.sh's private hosts file). The controller runs in the active operator replica, keeps its metadata "
              "log in ConfigMaps and mirrors partition state into Topic status (a Topic resource per topic). A killed "
              "or stopped broker is restarted by pod_runner.py (the kubelet's stand-in) with a back-off of 1, 2, 4 … "
              "10 s, not by the operator. *Kubernetes* table: ConfigMaps `<cluster>-controller*` (count, data KiB, "
              "largest), Topic resources (with partition status / all; status KiB; not Ready), etcd's db file, "
              "the Lease holder's transitions, and the RSS and CPU of the standby operator and the control plane."]
    L += [""]
    lim = results["limits"]
    L += [f"Machine: {env['cpus']} CPUs, {env['mem_gib']:.0f} GiB RAM, kernel {env['kernel']}; load average "
          f"{results['load_start']} at start, {results.get('load_end', '?')} at end. "
          f"Open files limit for the brokers: soft {lim['nofile_soft_before']} → {lim['nofile_soft']} "
          f"(hard {lim['nofile_hard']}{'; the hard limit could not be raised (no CAP_SYS_RESOURCE)' if lim.get('nofile_hard_raise_error') else ''}). "
          f"vm.max_map_count: {lim['max_map_count_note']}.",
          f"Skein: {env.get('skein_operator_bin')} (built {env.get('skein_operator_bin_mtime_utc')}), "
          f"{env.get('skein_broker_bin')} (built {env.get('skein_broker_bin_mtime_utc')}); repository HEAD "
          f"{env['repo_head']} (the working tree may differ). Kafka {env.get('kafka_version')}: "
          f"{' '.join(results['settings']['kafka_heap'].split())} + kafka-server-start.sh's G1 flags, "
          "1 dedicated controller + 3 brokers. Common broker settings (bench.py): "
          + ", ".join(f"`{k}={v}`" for k, v in results["settings"]["common"].items()) + ".", "",
          "Each failover's timeline (partitions still led by the killed broker per poll), the CPU seconds each "
          "process used during it, the log lines it produced, and all timeouts are in report.json; the first and "
          "last lines of every log are in logs/.", ""]
    return "\n".join(L)


def render_platform(runs: list[dict]) -> list[str]:
    """The Kubernetes tier's own table (skein-k8s runs)."""
    L = ["", "Kubernetes (skein-k8s):", "",
         "| partitions | start s (control plane / operator / brokers) | metadata ConfigMaps: count, KiB, largest KiB "
         "(after create → after failovers) | Topic resources (with status / all), status KiB, not Ready | "
         "etcd db MiB | Lease transitions, active replicas seen | kube-apiserver RSS MiB, CPU s per failover | "
         "etcd CPU s per failover | standby operator RSS MiB |",
         "| ---: | --- | --- | --- | ---: | --- | --- | --- | ---: |"]
    for r in runs:
        pl = r["platform"]
        st = (pl.get("after_start") or {}).get("start") or {}
        start = " / ".join(fmt(st.get(k), 1) for k in ("control_plane_s", "operator_s", "brokers_s"))
        a, b = pl.get("after_create") or pl.get("at_failure") or {}, pl.get("after_failovers") or {}

        def cms(x):
            return (f"{fmt(x.get('metadata_configmaps'))}, {fmt(x.get('metadata_kib'), 0)}, "
                    f"{fmt(x.get('metadata_largest_kib'), 0)}") if "metadata_configmaps" in x else "–"
        meta = cms(a) + (f" → {cms(b)}" if b else "")
        last = b or a
        topics = (f"{fmt(last.get('topic_resources_with_partitions'))} / {fmt(last.get('topic_resources'))}, "
                  f"{fmt(last.get('topic_status_kib'), 0)}, {fmt(last.get('topics_not_ready'))}"
                  if "topic_resources" in last else "–")
        lease = last.get("lease") or {}
        seen = last.get("operator_replicas_seen_active") or []
        others = ((r.get("memory_after_create") or {}).get("others") or {})
        api_rss = (others.get("kube-apiserver") or {}).get("rss_mib")
        fos = r.get("failovers", [])
        api_cpu = ", ".join(fmt((f.get("cpu_s_during") or {}).get("kube-apiserver"), 1) for f in fos) or "–"
        etcd_cpu = ", ".join(fmt((f.get("cpu_s_during") or {}).get("etcd"), 1) for f in fos) or "–"
        standby = [v.get("rss_mib") for k, v in others.items() if k.startswith("operator-standby")]
        L.append(f"| {r['partitions']:,} | {start} | {meta} | {topics} | {fmt(last.get('etcd_db_mib'), 1)} | "
                 f"{fmt(lease.get('transitions'))}, {len(seen)} | {fmt(api_rss, 0)}; {api_cpu} | {etcd_cpu} | "
                 f"{fmt(standby[0], 0) if standby else '–'} |")
    return L


def write(results: dict, out: Path):
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    (out / "report.md").write_text(render(results))


# --------------------------------------------------------------------------------------------

def raise_limits() -> dict:
    lim = {}
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lim["nofile_soft_before"], lim["nofile_hard_before"] = soft, hard
    want = 1 << 20
    try:
        nr_open = int(Path("/proc/sys/fs/nr_open").read_text())
        want = min(want, nr_open)
    except (OSError, ValueError):
        pass
    if hard != resource.RLIM_INFINITY and hard < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
        except (ValueError, OSError) as e:
            lim["nofile_hard_raise_error"] = str(e)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    lim["nofile_soft"], lim["nofile_hard"] = resource.getrlimit(resource.RLIMIT_NOFILE)
    p = Path("/proc/sys/vm/max_map_count")
    try:
        cur = int(p.read_text())
    except (OSError, ValueError):
        cur = None
    lim["max_map_count_before"] = cur
    if cur is not None and cur < WANT_MAP_COUNT:
        if os.geteuid() == 0:
            r = subprocess.run(["sysctl", "-w", f"vm.max_map_count={WANT_MAP_COUNT}"], capture_output=True, text=True)
            if r.returncode != 0:
                try:
                    p.write_text(str(WANT_MAP_COUNT))
                except OSError as e:
                    lim["max_map_count_error"] = f"{r.stderr.strip()} / {e}"
            lim["max_map_count"] = int(p.read_text())
            lim["max_map_count_restore"] = cur if lim["max_map_count"] != cur else None
            lim["max_map_count_note"] = (f"raised from {cur} to {lim['max_map_count']} for the run (sysctl, as root), "
                                         f"set back to {cur} at the end" if lim["max_map_count"] != cur
                                         else f"{cur} (raising it failed: {lim.get('max_map_count_error')})")
        else:
            lim["max_map_count"] = cur
            lim["max_map_count_note"] = f"{cur} (not root: left as it is; Kafka needs ~2 maps per partition replica)"
    else:
        lim["max_map_count"] = cur
        lim["max_map_count_note"] = f"{cur} (high enough, unchanged)"
    return lim


def restore_limits(lim: dict):
    if lim.get("max_map_count_restore"):
        subprocess.run(["sysctl", "-w", f"vm.max_map_count={lim['max_map_count_restore']}"], capture_output=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="2000,10000", help="comma list of sizes (default 2000,10000)")
    ap.add_argument("--systems", default="skein,kafka",
                    help="comma list: skein, kafka, skein-k8s (default skein,kafka; skein-k8s: the operator on the "
                         "e2e/k8s control plane, run under e2e/k8s/netns.sh, see metadata_k8s.py)")
    ap.add_argument("--out", type=Path, help="results directory (default e2e/bench/results/metadata-<date>)")
    ap.add_argument("--quick", action="store_true", help="2000 partitions only, 1 failover")
    ap.add_argument("--failovers", type=int, help="SIGKILL failover samples per size (default 3, quick 1)")
    ap.add_argument("--topic-partitions", type=int, default=200, help="partitions per topic (default 200)")
    ap.add_argument("--topics-per-request", type=int, default=5, help="topics per CreateTopics request (default 5)")
    ap.add_argument("--produce-rate", type=float, default=300, help="records/s during the controlled shutdown")
    ap.add_argument("--produce-partitions-per-broker", type=int, default=4,
                    help="the producer writes round robin to this many partitions led by each broker (default 4)")
    ap.add_argument("--producer-linger-ms", type=int, default=100, help="the producer's linger.ms (default 100)")
    ap.add_argument("--kafka-heap", default=" ".join(bench.KAFKA_HEAP), help="JVM heap flags of every Kafka node")
    ap.add_argument("--kafka-session-timeout-ms", type=int, default=9000,
                    help="Kafka's broker.session.timeout.ms (default 9000, Kafka's default)")
    ap.add_argument("--keep-work", action="store_true", help="keep the data dirs under e2e/bench/.work/")
    ap.add_argument("--render", type=Path, metavar="DIR", help="only rewrite DIR/report.md from DIR/report.json")
    args = ap.parse_args()
    if args.render:
        write(json.loads((args.render / "report.json").read_text()), args.render)
        print((args.render / "report.md").read_text())
        return 0
    sizes = [2000] if args.quick else [int(x) for x in args.partitions.split(",") if x.strip()]
    if args.failovers is None:
        args.failovers = 1 if args.quick else 3
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    for s in systems:
        if s not in SYSTEMS:
            ap.error(f"unknown system {s!r}")
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    args.out = (args.out or BENCH_DIR / "results" / f"metadata-{stamp}").resolve()
    work = BENCH_DIR / ".work" / f"metadata-{stamp}"
    work.mkdir(parents=True, exist_ok=True)

    def on_term(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)

    lim = raise_limits()
    skein_env = SkeinSystem(work / "probe", {}, 60).describe()
    shutil.rmtree(work / "probe", ignore_errors=True)
    skein_env.pop("command", None)
    results = {
        "benchmark": "metadata_scale", "issue": "#16", "stamp": stamp, "argv": sys.argv[1:],
        "load_start": load_avg(), "limits": lim,
        "settings": {"partitions": sizes, "systems": systems, "failovers": args.failovers,
                     "topic_partitions": args.topic_partitions, "topics_per_request": args.topics_per_request,
                     "produce_rate": args.produce_rate, "kafka_heap": args.kafka_heap,
                     "produce_partitions_per_broker": args.produce_partitions_per_broker,
                     "producer_linger_ms": args.producer_linger_ms,
                     "kafka_session_timeout_ms": args.kafka_session_timeout_ms,
                     "common": bench.COMMON_BROKER_SETTINGS, "work": str(work)},
        "environment": {"cpus": os.cpu_count(), "mem_gib": os.sysconf("SC_PHYS_PAGES") * PAGE / (1 << 30),
                        "kernel": platform.release(), "python": platform.python_version(),
                        "confluent_kafka": __import__("confluent_kafka").version()[0],
                        "librdkafka": __import__("confluent_kafka").libversion()[0],
                        "repo_head": head_commit(), **skein_env},
        "runs": [],
    }
    try:
        results["environment"]["kafka_version"] = brokers.kafka_version()
    except Exception:  # noqa: BLE001
        pass
    say(f"sizes {sizes}, systems {systems}, {args.failovers} failover(s); limits {lim}; out {args.out}")
    try:
        for n in sizes:
            for kind in systems:
                r = run_one(kind, n, args, work)
                results["runs"].append(r)
                results["load_end"] = load_avg()
                write(results, args.out)
    except KeyboardInterrupt as e:
        results["interrupted"] = str(e)
        say(f"interrupted: {e}")
    finally:
        restore_limits(lim)
        results["load_end"] = load_avg()
        write(results, args.out)
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print((args.out / "report.md").read_text())
    print(f"report: {args.out}/report.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
