"""The workload's client processes and the end of a run, shared by the chaos harness (chaos.py,
clients in a network namespace of their own) and the Kubernetes tier's operations run
(e2e/k8s/test_operations_workload.py, clients beside the test). Not named clients.py: e2e/tests has one.

`Clients.start` runs workload.py's monitor, group members and producers (or the Java
transactional producer); `Clients.finish` stops the producers, waits for the group to reach the
end offsets, stops the members and the monitor and reads the topic back, so that
`checker.check(logs)` can judge the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
E2E = HERE.parent
sys.path.insert(0, str(E2E / "tests"))

from util import java_cmd  # noqa: E402

PY = str(E2E / ".venv" / "bin" / "python")


def native_stacks(pgid: int, out: Path) -> None:
    """Every thread's native stack (gdb) of each process in process group `pgid` into `out`: a
    client hung inside librdkafka shows which of its threads wait on which lock (librdkafka has
    open lock-order inversions around broker failures: #5476, #5490, PR #5304)."""
    pids = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout.split()
    with out.open("w") as f:
        for pid in pids:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(bytes(1), b" ").decode()
                f.write(f"=== pid {pid}: {cmd}\n")
                f.flush()
                subprocess.run(["gdb", "-p", pid, "-batch", "-nx", "-ex", "set pagination off",
                                "-ex", "thread apply all bt"],
                               stdout=f, stderr=subprocess.STDOUT, timeout=120)
            except (OSError, subprocess.TimeoutExpired) as e:
                f.write(f"gdb failed: {e}\n")


class Clients:
    """`wrap` prefixes every client's command line (e.g. `ip netns exec NS nice -n 5`)."""

    def __init__(self, logs: Path, state: Path, bootstrap: str, a, wrap: list[str],
                 producer_bootstrap: str | None = None, log=print):
        self.logs, self.state, self.bootstrap, self.a, self.wrap = logs, state, bootstrap, a, wrap
        self.producer_bootstrap = producer_bootstrap or bootstrap
        self.log = log
        self.procs: dict[str, subprocess.Popen] = {}

    def client(self, name: str, *args: str, java: bool = False) -> subprocess.Popen:
        prog = java_cmd(*args) if java else [PY, str(HERE / "workload.py"), *args]
        out = open(self.logs / f"{name}.out", "ab")
        p = subprocess.Popen([*self.wrap, *prog], stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        out.close()
        self.procs[name] = p
        return p

    def common(self) -> list[str]:
        return ["--bootstrap", self.bootstrap, "--topic", self.a.topic,
                "--partitions", str(self.a.partitions), "--dir", str(self.logs)]

    def view(self) -> dict:
        """The monitor's latest sample (leaders, ISR, committed and end offsets), if fresh."""
        try:
            st = json.loads((self.logs / "state.json").read_text())
        except (OSError, ValueError):
            return {}
        return st if time.time() - st.get("t", 0) < 5 else {}

    def start(self) -> float:
        """Starts every client; the time the workload started."""
        a = self.a
        self.client("monitor", "monitor", *self.common(), "--group", a.group,
                    "--stop", str(self.state / "stop-monitor"))
        for i in range(1, a.consumers + 1):
            self.client(f"consumer-{i}", "consumer", *self.common(), "--id", str(i), "--group", a.group,
                        "--consume", a.consume, "--members", str(a.consumers),
                        "--stop", str(self.state / "stop-consumers"),
                        *(["--debug", a.consumer_debug] if a.consumer_debug else []))
        for i in range(1, a.producers + 1):
            if a.producer_client == "java":
                self.client(f"producer-{i}", "chaos-txn", "--bootstrap", self.producer_bootstrap,
                            "--topic", a.topic, "--partitions", str(a.partitions), "--dir", str(self.logs),
                            "--id", str(i), "--rate", str(a.rate), "--abort-every", str(a.abort_every),
                            "--stop", str(self.state / "stop-producers"), java=True)
                continue
            self.client(f"producer-{i}", "producer", "--bootstrap", self.producer_bootstrap,
                        *self.common()[2:], "--id", str(i), "--rate", str(a.rate),
                        "--mode", a.producer_mode, "--abort-every", str(a.abort_every),
                        "--stop", str(self.state / "stop-producers"),
                        *(["--debug", a.producer_debug] if a.producer_debug else []))
        return time.time()

    def wait_first_writes(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any((self.logs / f"producer-{i}.log").exists() and (self.logs / f"producer-{i}.log").stat().st_size
                   for i in range(1, self.a.producers + 1)):
                return True
            time.sleep(0.5)
        return False

    def wait_procs(self, prefix: str, timeout: float) -> list[str]:
        """Waits for the client processes named prefix*; returns those that had to be killed."""
        deadline = time.monotonic() + timeout
        killed = []
        for name, p in self.procs.items():
            if not name.startswith(prefix):
                continue
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGUSR1)  # Python stacks into its .out file
                time.sleep(1)
                self.native_stacks(name, p.pid)
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
                killed.append(name)
        return killed

    def native_stacks(self, name: str, pgid: int) -> None:
        """Every native thread's stack of the stuck client into logs/NAME.stacks (see
        `native_stacks`)."""
        native_stacks(pgid, self.logs / f"{name}.stacks")

    def finish(self, recover_timeout: float, meta: dict, problems: list[str]) -> None:
        """Stops the producers, lets the group consume and commit everything, stops the members
        and the monitor, and reads the topic back (logs/dump.log). What went wrong is appended to
        `problems`; `meta` gets the time the producers stopped."""
        a = self.a
        (self.state / "stop-producers").touch()
        killed = self.wait_procs("producer", 150)
        meta["producers_stopped"] = time.time()
        if killed:
            problems.append(f"producers killed after not finishing: {killed}")
        self.log("producers stopped; waiting for the group to consume and commit everything")
        deadline = time.monotonic() + recover_timeout
        drained = False
        while time.monotonic() < deadline:
            v = self.view()
            hw, cm = v.get("hw", {}), v.get("committed", {})
            if len(hw) == a.partitions and all(cm.get(p) == o for p, o in hw.items()):
                drained = True
                break
            time.sleep(0.5)
        if not drained:
            self.log(f"the group did not reach the end offsets within {recover_timeout:.0f} s: {self.view()}")
        (self.state / "stop-consumers").touch()
        killed = self.wait_procs("consumer", 60)
        if killed:
            problems.append(f"consumers killed after not finishing: {killed}")
        time.sleep(2.5)  # a last poll of the committed offsets
        (self.logs / "final-offsets.json").write_text(json.dumps(self.view().get("committed", {})))
        (self.state / "stop-monitor").touch()
        self.wait_procs("monitor", 20)
        self.log("reading the topic back")
        d = self.client("dump", "dump", *self.common(), "--max-seconds", "600")
        try:
            d.wait(660)
        except subprocess.TimeoutExpired:
            os.killpg(d.pid, signal.SIGKILL)
            problems.append("the final read of the topic did not finish")

    def kill_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
