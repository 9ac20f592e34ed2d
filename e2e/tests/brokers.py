"""Broker processes under test: Apache Kafka (reference, KRaft combined mode) and Skein.

Both expose the same small interface used by the tests:

    b.start()            start (or restart on the same data dir and ports), wait until ready
    b.stop()             SIGTERM, wait; returns the exit code (None when it had to be killed)
    b.kill9()            SIGKILL (crash), wait
    b.bootstrap          "127.0.0.1:PORT"
    b.log_path           file with the broker's stdout+stderr (all runs appended)
    b.log_tail(n)        last n lines of that file
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

E2E_DIR = Path(__file__).resolve().parents[1]
REPO_DIR = E2E_DIR.parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_accepts(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def kafka_cluster_id() -> str:
    """A random KRaft cluster id as Kafka's `Uuid.randomUuid()` makes one: 16 random bytes in
    URL-safe base64, never starting with '-' (`kafka-storage format -t -xyz` reads it as an option
    and fails, one run in 64)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def kafka_version() -> str:
    """The Apache Kafka the reference broker runs: kafka-dist/pom.xml's, or E2E_KAFKA_VERSION (its
    jars fetched into e2e/.cache/kafka-<version>/libs beforehand) to compare with another
    release."""
    if v := os.environ.get("E2E_KAFKA_VERSION"):
        return v
    pom = (E2E_DIR / "kafka-dist" / "pom.xml").read_text()
    return pom.split("<kafka.version>")[1].split("</kafka.version>")[0].strip()


def kafka_libs() -> Path:
    libs = E2E_DIR / ".cache" / f"kafka-{kafka_version()}" / "libs"
    if not libs.is_dir() or not any(libs.glob("kafka_2.13-*.jar")):
        raise RuntimeError(f"Apache Kafka jars missing in {libs}: run e2e/setup.sh first")
    return libs


def kafka_classpath() -> str:
    return str(kafka_libs()) + "/*"


def connect_classpath() -> str:
    """Kafka Connect's jars (e2e/connect-dist/pom.xml's release, fetched by setup.sh)."""
    pom = (E2E_DIR / "connect-dist" / "pom.xml").read_text()
    version = pom.split("<connect.version>")[1].split("</connect.version>")[0].strip()
    libs = E2E_DIR / ".cache" / f"connect-{version}" / "libs"
    if not any(libs.glob("connect-runtime-*.jar")):
        raise RuntimeError(f"Kafka Connect jars missing in {libs}: run e2e/setup.sh first")
    return str(libs) + "/*"


class Broker:
    name = "broker"
    start_timeout = 60.0

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.log_path = self.workdir / f"{self.name}.log"
        self.overrides = dict(overrides or {})
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client_conf(self) -> dict[str, str]:
        """confluent-kafka settings for this broker (plaintext)."""
        return {"bootstrap.servers": self.bootstrap}

    def listener_ports(self) -> list[int]:
        """The bootstrap port and every port of a `listeners` override on loopback: a broker
        binds them one after the other, so accepting on the first does not mean the others are
        bound yet (a test that connects to the second listener at once was refused in CI)."""
        ports = [self.port]
        for l in self.overrides.get("listeners", "").split(","):
            host_port = l.split("://", 1)[-1]
            if host_port.startswith("127.0.0.1:"):
                p = int(host_port.rsplit(":", 1)[1])
                if p not in ports:
                    ports.append(p)
        return ports

    # -- to implement -------------------------------------------------------------------------
    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """One-time preparation of the data dir (before the first start)."""

    def wait_ready_extra(self, deadline: float) -> None:
        """Extra readiness check after the port accepts."""

    # -----------------------------------------------------------------------------------------
    def _log_marker(self, text: str) -> None:
        with open(self.log_path, "a") as f:
            f.write(f"\n===== e2e: {text} at {time.strftime('%H:%M:%S')} =====\n")

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        if self.starts == 0:
            self.prepare()
        self.starts += 1
        cmd = self.command()
        self._log_marker(f"start #{self.starts}: {' '.join(cmd)}")
        logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir,
            start_new_session=True,
        )
        logf.close()
        deadline = time.monotonic() + self.start_timeout
        while not all(port_accepts(p) for p in self.listener_ports()):
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with code {self.proc.returncode} during startup; log tail:\n"
                    + self.log_tail(80))
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.name} did not accept connections on {self.bootstrap} within "
                    f"{self.start_timeout:.0f}s; log tail:\n" + self.log_tail(80))
            time.sleep(0.1)
        self.wait_ready_extra(deadline)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait. Returns the exit code, or None if it had to be SIGKILLed."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self._log_marker("SIGTERM")
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._log_marker(f"did not exit {timeout:.0f}s after SIGTERM: SIGKILL")
            self.proc.kill()
            self.proc.wait(10)
            return None

    def kill9(self) -> None:
        assert self.proc is not None and self.proc.poll() is None, "broker not running"
        self._log_marker("SIGKILL (crash)")
        self.proc.kill()
        self.proc.wait(10)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n: int = 100) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(lines[-n:])


class KafkaBroker(Broker):
    """Apache Kafka 4.x, KRaft combined mode (broker+controller), one node."""

    name = "kafka"
    start_timeout = 90.0

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None):
        super().__init__(workdir, overrides)
        self.controller_port = free_port()
        self.props_path = self.workdir / "server.properties"

    def properties(self) -> dict[str, str]:
        p = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            "delete.topic.enable": "true",
            "num.network.threads": "2",
            "num.io.threads": "2",
        }
        p.update(self.overrides)
        return p

    def _java(self) -> list[str]:
        cp = kafka_classpath()
        if any(str(v).startswith("skein.e2e.") for v in self.overrides.values()):
            # A plugin of the suite's own (e2e/java), e.g. the client telemetry exporter.
            cp += f":{E2E_DIR / 'java' / 'target' / 'e2e-java-client-1.jar'}"
        return ["java", "-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-cp", cp]

    def prepare(self) -> None:
        self.props_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        cluster_id = kafka_cluster_id()
        cmd = self._java() + ["kafka.tools.StorageTool", "format", "-t", cluster_id,
                              "-c", str(self.props_path)]
        self._log_marker("format: " + " ".join(cmd))
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        with open(self.log_path, "a") as f:
            f.write(r.stdout + r.stderr)
        if r.returncode != 0:
            raise RuntimeError(f"kafka StorageTool format failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")

    def command(self) -> list[str]:
        return self._java() + ["kafka.Kafka", str(self.props_path)]

    def wait_ready_extra(self, deadline: float) -> None:
        # The port accepts before the broker is unfenced: wait until metadata lists broker 1.
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({**self.client_conf(), "log_level": 3})
        last = None
        while time.monotonic() < deadline:
            try:
                md = admin.list_topics(timeout=5)
                if 1 in md.brokers:
                    return
            except Exception as e:  # noqa: BLE001
                last = e
            time.sleep(0.5)
        raise RuntimeError(f"kafka not ready (metadata) in time: {last}; log tail:\n" + self.log_tail(80))


class SkeinBroker(Broker):
    """skein-broker from $SKEIN_BROKER_BIN (default <repo>/target/release/skein-broker)."""

    name = "skein"
    start_timeout = 30.0

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None):
        super().__init__(workdir, overrides)
        self.metrics_port = free_port()
        self.binary = Path(os.environ.get("SKEIN_BROKER_BIN", REPO_DIR / "target" / "release" / "skein-broker"))
        # The skein.version a new broker's cluster starts at (--feature-level); None: the newest.
        self.feature_level: int | None = None

    def prepare(self) -> None:
        if not (self.binary.is_file() and os.access(self.binary, os.X_OK)):
            raise RuntimeError(
                f"skein-broker binary not found at {self.binary}. Build it with "
                f"'cargo build --release -p skein-broker' or set SKEIN_BROKER_BIN; "
                f"or run the suite against Apache Kafka with E2E_TARGET=kafka.")

    def command(self) -> list[str]:
        cmd = [str(self.binary), "--node-id", "1", "--data-dir", str(self.data_dir),
               "--listen", self.bootstrap, "--advertised", self.bootstrap,
               "--metrics-listen", f"127.0.0.1:{self.metrics_port}"]
        if self.feature_level is not None:
            cmd += ["--feature-level", str(self.feature_level)]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd


def make_broker(target: str, workdir: Path, overrides: dict[str, str] | None = None) -> Broker:
    if target == "kafka":
        return KafkaBroker(workdir, overrides)
    if target == "skein":
        return SkeinBroker(workdir, overrides)
    raise RuntimeError(f"E2E_TARGET must be 'skein' or 'kafka', not {target!r}")


def free_port_range(n: int, taken: set[int] | None = None) -> int:
    """A base port such that base..base+n-1 are all free on loopback and none is in `taken`
    (ports already handed out for other listeners that are not bound yet); they are added to it."""
    import random
    taken = taken if taken is not None else set()
    for _ in range(200):
        base = random.randint(20000, 60000 - n)
        ok = not any(p in taken for p in range(base, base + n))
        for p in range(base, base + n) if ok else ():
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    s.bind(("127.0.0.1", p))
            except OSError:
                ok = False
                break
        if ok:
            taken.update(range(base, base + n))
            return base
    raise RuntimeError(f"no {n} consecutive free ports")


class LocalCluster:
    """`skein-operator local --brokers N`: the controller plus N skein-broker processes.

    $SKEIN_OPERATOR_BIN (default <repo>/target/release/skein-operator) runs the brokers from
    $SKEIN_BROKER_BIN (default: next to the operator).
    """

    name = "skein-local"

    def __init__(self, workdir: Path, brokers: int = 3, overrides: dict[str, str] | None = None,
                 host_template: str | None = None, launcher: str | None = None, tls: bool = False,
                 client_conf: dict[str, str] | None = None):
        """`tls`: `skein-operator local --tls`; `client_conf`: the security settings clients need
        (with `tls`, the client settings the operator writes are added)."""
        self.tls = tls
        self.security = dict(client_conf or {})
        self.host_template = host_template
        self.launcher = launcher
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "operator.log"
        self.n = brokers
        self.overrides = dict(overrides or {})
        # Three ranges and a port, none bound until the cluster starts: they must not overlap
        # (a broker's metrics port on another's control port fails its start).
        taken: set[int] = set()
        self.kafka_port = free_port_range(brokers, taken)
        self.control_port = free_port_range(brokers, taken)
        self.metrics_port = free_port_range(brokers, taken)
        self.controller_metrics = free_port_range(1, taken)
        self.binary = Path(os.environ.get("SKEIN_OPERATOR_BIN", REPO_DIR / "target" / "release" / "skein-operator"))
        self.broker_bin = Path(os.environ.get("SKEIN_BROKER_BIN", self.binary.parent / "skein-broker"))
        self.proc: subprocess.Popen | None = None
        # More `skein-operator local` arguments (e.g. --tiered-storage DIR).
        self.extra_args: list[str] = []

    @property
    def ports(self) -> list[int]:
        return [self.kafka_port + i for i in range(self.n)]

    def host(self, broker_id: int) -> str:
        return self.host_template.replace("{id}", str(broker_id)) if self.host_template else "127.0.0.1"

    def addr(self, broker_id: int) -> str:
        return f"{self.host(broker_id)}:{self.kafka_port + broker_id - 1}"

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addr(i) for i in range(1, self.n + 1))

    def command(self) -> list[str]:
        cmd = [str(self.binary), "local", "--brokers", str(self.n), "--data-dir", str(self.data_dir),
               "--kafka-port", str(self.kafka_port), "--control-port", str(self.control_port),
               "--broker-metrics-port", str(self.metrics_port),
               "--metrics-listen", f"127.0.0.1:{self.controller_metrics}",
               "--broker-bin", str(self.broker_bin)]
        if self.host_template:
            cmd += ["--broker-host-template", self.host_template]
        if self.launcher:
            cmd += ["--launcher", self.launcher]
        if self.tls:
            cmd += ["--tls"]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd + self.extra_args

    def start(self, timeout: float = 60.0) -> None:
        for b in (self.binary, self.broker_bin):
            if not (b.is_file() and os.access(b, os.X_OK)):
                raise RuntimeError(f"{b} not found: build with 'cargo build --release -p skein-broker "
                                   f"-p skein-operator' or set SKEIN_OPERATOR_BIN / SKEIN_BROKER_BIN")
        logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.workdir, start_new_session=True)
        logf.close()
        deadline = time.monotonic() + timeout
        while not all(port_accepts(self.kafka_port + i - 1, self.host(i)) for i in range(1, self.n + 1)):
            if self.proc.poll() is not None:
                raise RuntimeError(f"skein-operator local exited with {self.proc.returncode}:\n"
                                   + self.log_tail(80))
            if time.monotonic() > deadline:
                raise RuntimeError("local cluster not listening in time:\n" + self.log_tail(80))
            time.sleep(0.1)
        # listening is not enough: every broker must have registered with the controller
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({**self.client_conf(), "log_level": 3})
        while len(admin.list_topics(timeout=10).brokers) < self.n:
            if time.monotonic() > deadline:
                raise RuntimeError("brokers not registered in time:\n" + self.log_tail(80))
            time.sleep(0.2)

    def stop(self, timeout: float = 120.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
            return None

    def client_conf(self) -> dict[str, str]:
        """confluent-kafka settings for this cluster: bootstrap and security."""
        conf = {"bootstrap.servers": self.bootstrap, **self.security}
        if self.tls:
            text = (self.data_dir / "tls" / "client-librdkafka.properties").read_text()
            conf.update(line.split("=", 1) for line in text.splitlines() if "=" in line)
        return conf

    def broker_pid(self, broker_id: int) -> int | None:
        """The pid of broker `broker_id`'s current process."""
        marker = str(self.data_dir / f"broker-{broker_id}")
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                args = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker.encode() in args and b"--control-listen" in args:
                try:
                    state = (d / "stat").read_text().split(") ", 1)[1].split()[0]
                except (OSError, IndexError):
                    continue
                if state != "Z":
                    return int(d.name)
        return None

    def signal_broker(self, broker_id: int, sig: int) -> int:
        pid = self.broker_pid(broker_id)
        assert pid is not None, f"broker {broker_id} is not running"
        os.kill(pid, sig)
        return pid

    def broker_log(self, broker_id: int) -> Path:
        return self.data_dir / f"broker-{broker_id}.log"

    def log_tail(self, n: int = 100) -> str:
        out = []
        for p in [self.log_path] + [self.broker_log(i) for i in range(1, self.n + 1)]:
            try:
                lines = p.read_text(errors="replace").splitlines()
            except FileNotFoundError:
                continue
            out.append(f"--- {p.name} ---\n" + "\n".join(lines[-n:]))
        return "\n".join(out)


class KafkaClusterNode(KafkaBroker):
    """One node of KafkaCluster: broker and controller (KRaft combined mode) of a static
    three-voter quorum, formatted with the cluster's id."""

    def __init__(self, workdir: Path, node_id: int, controller_ports: dict[int, int], cluster_id: str,
                 overrides: dict[str, str] | None = None):
        self.name = f"kafka-{node_id}"
        super().__init__(workdir, overrides)
        self.node_id = node_id
        self.controller_ports = controller_ports
        self.controller_port = controller_ports[node_id]
        self.cluster_id = cluster_id

    def properties(self) -> dict[str, str]:
        n = len(self.controller_ports)
        p = super().properties()
        p.update({
            "node.id": str(self.node_id),
            "controller.quorum.voters": ",".join(f"{i}@127.0.0.1:{port}"
                                                 for i, port in sorted(self.controller_ports.items())),
            "default.replication.factor": str(min(3, n)),
            "offsets.topic.replication.factor": str(min(3, n)),
            "transaction.state.log.replication.factor": str(min(3, n)),
            "transaction.state.log.min.isr": str(min(2, n)),
            "share.coordinator.state.topic.replication.factor": str(min(3, n)),
            "share.coordinator.state.topic.min.isr": str(min(2, n)),
        })
        p.update(self.overrides)
        return p

    def prepare(self) -> None:
        self.props_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        cmd = self._java() + ["kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                              "-c", str(self.props_path)]
        self._log_marker("format: " + " ".join(cmd))
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        with open(self.log_path, "a") as f:
            f.write(r.stdout + r.stderr)
        if r.returncode != 0:
            raise RuntimeError(f"kafka StorageTool format failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")

    def wait_ready_extra(self, deadline: float) -> None:
        """Until the quorum has a leader and this broker is registered (listed in metadata)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({**self.client_conf(), "log_level": 3})
        last = None
        while time.monotonic() < deadline:
            try:
                if self.node_id in admin.list_topics(timeout=5).brokers:
                    return
            except Exception as e:  # noqa: BLE001
                last = e
            time.sleep(0.5)
        raise RuntimeError(f"{self.name} not ready (metadata) in time: {last}; log tail:\n" + self.log_tail(80))


class KafkaCluster:
    """Apache Kafka, N nodes each broker and controller (KRaft combined mode, static quorum):
    the reference for tests that need a replicated cluster (E2E_TARGET=kafka). Unlike
    `skein-operator local` nothing restarts a broker that dies."""

    name = "kafka-cluster"

    def __init__(self, workdir: Path, brokers: int = 3, overrides: dict[str, str] | None = None):
        self.workdir = Path(workdir)
        self.n = brokers
        taken: set[int] = set()
        controllers = {i: free_port_range(1, taken) for i in range(1, brokers + 1)}
        cluster_id = kafka_cluster_id()
        self.nodes = [KafkaClusterNode(self.workdir / f"node-{i}", i, controllers, cluster_id, overrides)
                      for i in range(1, brokers + 1)]
        self.log_path = self.nodes[0].log_path

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def client_conf(self) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap}

    def start(self) -> None:
        """Starts every node at once (a node is ready only when a majority of the quorum is up)."""
        import threading
        errors: list[Exception] = []

        def start(node: KafkaClusterNode) -> None:
            try:
                node.start()
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=start, args=(n,)) for n in self.nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def stop(self, timeout: float = 60.0) -> None:
        for n in self.nodes:
            if n.running():
                n.proc.send_signal(signal.SIGTERM)
        for n in self.nodes:
            n.stop(timeout)

    def log_tail(self, n: int = 100) -> str:
        return "\n".join(f"--- {node.name} ({node.log_path}) ---\n{node.log_tail(n)}" for node in self.nodes)
