"""A fault-injection run against a 3-broker `skein-operator local` cluster (see README.md here).

The cluster: the controller (`skein-operator local`) in a network namespace of its own, each
broker in its own, the clients in a fifth; veths on one bridge. Each broker's data directory is
an ext4 filesystem on a loop device of its own (so it can be filled up), each broker in a blkio
cgroup of its own (so its disk can be throttled). Brokers are started through launch.sh, which
can hold a broker down (disk loss) and adopt a broker that outlived its controller.

Clients (workload.py, each its own process in the clients' namespace): idempotent acks=all
producers, consumer-group members that commit what they processed, a monitor polling metadata,
committed offsets and end offsets. The nemesis injects faults at random (seeded) until the
duration is over, heals everything, lets the clients finish, reads the topic back, and
checker.py judges the history. Exit code: 0 when every check passed, 1 on a violation, 2 when
the harness itself failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
E2E = HERE.parent
sys.path.insert(0, str(E2E / "tests"))

from brokers import LocalCluster  # noqa: E402
from run_clients import PY, Clients  # noqa: E402
from test_network_partition import Net, sh  # noqa: E402
from test_replication import OVERRIDES  # noqa: E402

import checker  # noqa: E402

ALL_FAULTS = ["kill", "pause", "partition", "partition-ctrl", "partition-asym", "partition-pair",
              "restart", "disk-full", "slow-disk", "controller", "clock-skew", "reassign", "end-txn",
              "disk-loss", "store-outage"]
# Only with --tiered (an object store to take away).
TIERED_FAULTS = ["store-outage"]
# Disk loss re-copies every replica of the wiped broker and waits for a full ISR before each
# wipe: left out of the short default run, in every long run (`--faults all`).
DEFAULT_FAULTS = [f for f in ALL_FAULTS if f != "disk-loss" and f not in TIERED_FAULTS]
# The end-txn fault's proxies (txn_proxy.py, in each broker's namespace): the brokers get a second
# listener, EXTERNAL, advertised at the proxy; the producers bootstrap there (everyone else on the
# first listener, which also carries replication).
PROXY_PORT, EXTERNAL_PORT = 19092, 19093
BROKERS = (1, 2, 3)
CGROOT = Path("/sys/fs/cgroup/blkio")
CHAOS_ROOT_MARK = "skein-chaos-"
# libfaketime (Debian's libfaketime, installed by e2e/setup.sh): every broker runs under it with
# its own offset file, "+0" but during a clock-skew fault; CLOCK_MONOTONIC is left alone.
FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------
# network

class ChaosNet(Net):
    """test_network_partition's Net (namespaces `<tag>-1..3` on a bridge) plus a namespace for
    the controller (`<tag>-k`, .253) and one for the clients (`<tag>-c`, .100). Faults other than
    a broker's link going down are policy-routing rules: `from ADDR blackhole` in the receiving
    namespace drops that sender's packets silently (forwarding is off in a new namespace, so no
    ICMP answers), one direction at a time. Tags start with "ch" and prefixes with 10.78 so that a
    concurrent network-partition test (sk*, 10.77) never collides with a chaos run."""

    NODES = {"k": 253, "c": 100}

    @property
    def tag(self):
        return self._tag

    @tag.setter
    def tag(self, v):
        self._tag = "ch" + v[2:]

    @property
    def prefix(self):
        return self._prefix

    @prefix.setter
    def prefix(self, v):
        self._prefix = v.replace("10.77.", "10.78.", 1)

    def __init__(self):
        super().__init__()
        for name, host in self.NODES.items():
            ns, h, peer = self.ns(name), f"{self.tag}h{name}", f"{self.tag}n{name}"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", h, "type", "veth", "peer", "name", peer)
            sh("ip", "link", "set", peer, "netns", ns)
            sh("ip", "link", "set", h, "master", self.bridge)
            sh("ip", "link", "set", h, "up")
            sh("ip", "-n", ns, "addr", "add", f"{self.prefix}.{host}/24", "dev", peer)
            sh("ip", "-n", ns, "link", "set", peer, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        for node in self.nodes():
            # our blackhole rules must come before the lookup of local addresses
            sh("ip", "-n", self.ns(node), "rule", "add", "pref", "100", "lookup", "local")
            sh("ip", "-n", self.ns(node), "rule", "del", "pref", "0")

    def nodes(self) -> list:
        return list(BROKERS) + list(self.NODES)

    def addr(self, node) -> str:
        return f"{self.prefix}.{self.NODES.get(node, node)}"

    def drop(self, src, at) -> None:
        """Packets from `src` no longer reach `at`."""
        sh("ip", "-n", self.ns(at), "rule", "add", "pref", "10", "from", self.addr(src), "blackhole")

    def clear_drops(self) -> None:
        for node in self.nodes():
            for _ in range(20):
                if sh("ip", "-n", self.ns(node), "rule", "del", "pref", "10", check=False).returncode:
                    break

    def remove(self):
        super().remove()
        for name in self.NODES:
            sh("ip", "netns", "del", self.ns(name), check=False)
            sh("ip", "link", "del", f"{self.tag}h{name}", check=False)


# ---------------------------------------------------------------------------------------------
# disks and cgroups

class Disks:
    """Each broker's data directory on its own ext4 filesystem (a sparse image on a loop device,
    no reserved blocks, so root fills it too) and each broker in a blkio cgroup of its own."""

    def __init__(self, workdir: Path, data_dir: Path, tag: str, size_mb: int):
        self.workdir, self.data_dir, self.tag, self.size_mb = workdir, data_dir, tag, size_mb
        self.loops: dict[int, str] = {}
        self.mounts: dict[int, Path] = {}
        self.cgroups: dict[int, Path] = {}
        self.devnum: dict[int, str] = {}

    def setup(self) -> None:
        for b in BROKERS:
            img = self.workdir / f"disk-{b}.img"
            with open(img, "wb") as f:
                f.truncate(self.size_mb << 20)
            loop = sh("losetup", "-f", "--show", str(img)).stdout.strip()
            self.loops[b] = loop
            sh("mkfs.ext4", "-q", "-m", "0", "-E", "lazy_itable_init=0,lazy_journal_init=0", loop)
            mnt = self.data_dir / f"broker-{b}"
            mnt.mkdir(parents=True, exist_ok=True)
            sh("mount", loop, str(mnt))
            self.mounts[b] = mnt
            self.devnum[b] = Path(f"/sys/block/{Path(loop).name}/dev").read_text().strip()
            if CGROOT.is_dir():
                cg = CGROOT / f"{CHAOS_ROOT_MARK}{self.tag}-{b}"
                cg.mkdir(exist_ok=True)
                self.cgroups[b] = cg

    def throttle(self, b: int, on: bool) -> None:
        cg, dev = self.cgroups[b], self.devnum[b]
        limits = {"write_bps": 262144, "read_bps": 1048576, "write_iops": 16, "read_iops": 64}
        for k, v in limits.items():
            (cg / f"blkio.throttle.{k}_device").write_text(f"{dev} {v if on else 0}\n")

    def filler(self, b: int) -> Path:
        return self.mounts[b] / "chaos-filler"

    def fill(self, b: int) -> int:
        """Fills broker b's filesystem; returns the bytes taken."""
        path = self.filler(b)
        st = os.statvfs(self.mounts[b])
        free = st.f_bavail * st.f_frsize
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            size = free
            for _ in range(64):  # fallocate what it allows, then write until ENOSPC
                try:
                    os.posix_fallocate(fd, 0, size)
                    break
                except OSError:
                    size = max(0, size - (1 << 20))
            os.lseek(fd, 0, os.SEEK_END)
            chunk = b"\0" * 65536
            for _ in range(4096):
                try:
                    if os.write(fd, chunk) <= 0:
                        break
                except OSError:
                    break
            for _ in range(64):
                try:
                    os.write(fd, b"\0" * 4096)
                except OSError:
                    break
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def unfill(self, b: int) -> None:
        try:
            self.filler(b).unlink()
        except FileNotFoundError:
            pass

    def wipe(self, b: int) -> int:
        n = 0
        for p in self.mounts[b].iterdir():
            if p.name == "lost+found":
                continue
            n += 1
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
        return n

    def teardown(self) -> None:
        for b, mnt in self.mounts.items():
            for _ in range(10):  # a broker process that just died may still hold it
                if sh("umount", str(mnt), check=False).returncode == 0:
                    break
                time.sleep(0.5)
            else:
                sh("umount", "-l", str(mnt), check=False)
        for loop in self.loops.values():
            for _ in range(10):
                sh("losetup", "-d", loop, check=False)
                if str(self.workdir) not in sh("losetup", loop, check=False).stdout:
                    break
                time.sleep(0.5)
        for cg in self.cgroups.values():
            for _ in range(3):
                try:
                    for pid in (cg / "cgroup.procs").read_text().split():
                        try:
                            (CGROOT / "cgroup.procs").write_text(pid)
                        except OSError:
                            pass
                    cg.rmdir()
                    break
                except OSError:
                    time.sleep(0.5)


def cleanup_stale(root: Path) -> None:
    """Leftovers of chaos runs whose harness died (SIGKILL): only runs under `root` whose owner
    process is gone."""
    for d in root.glob(f"{CHAOS_ROOT_MARK}*"):
        owner = d / "owner.json"
        if not owner.exists():
            continue
        try:
            o = json.loads(owner.read_text())
        except ValueError:
            continue
        if o.get("done") or Path(f"/proc/{o['pid']}").exists():
            continue
        log(f"cleaning up the leftovers of {d}")
        for pidf in (d / "state").glob("broker-*.pid"):
            try:
                os.kill(int(pidf.read_text()), signal.SIGKILL)
            except (ValueError, OSError):
                pass
        for b in BROKERS:
            mnt = d / "cluster" / "data" / f"broker-{b}"
            sh("umount", "-l", str(mnt), check=False)
        out = sh("losetup", "-a", check=False).stdout
        for ln in out.splitlines():
            if str(d) in ln:
                sh("losetup", "-d", ln.split(":")[0], check=False)
        tag = o.get("tag", "")
        if tag.startswith("ch"):
            for n in [*BROKERS, *ChaosNet.NODES]:
                sh("ip", "netns", "del", f"{tag}-{n}", check=False)
                sh("ip", "link", "del", f"{tag}h{n}", check=False)
            sh("ip", "link", "del", f"{tag}br", check=False)
            for cg in CGROOT.glob(f"{CHAOS_ROOT_MARK}{tag}-*"):
                try:
                    cg.rmdir()
                except OSError:
                    pass
        o["done"] = True
        owner.write_text(json.dumps(o))


# ---------------------------------------------------------------------------------------------
# the cluster

class ChaosCluster(LocalCluster):
    """LocalCluster whose controller runs in the controller's namespace, niced, and whose brokers
    start through launch.sh."""

    def __init__(self, workdir: Path, net: ChaosNet, state: Path, nice: int):
        super().__init__(workdir, 3, dict(OVERRIDES), host_template=f"{net.prefix}.{{id}}",
                         launcher=f"{HERE / 'launch.sh'} {{id}}")
        self.net, self.state, self.nice = net, state, nice
        self.controller_starts = 0

    def command(self) -> list[str]:
        return ["nice", "-n", str(self.nice), "ip", "netns", "exec", self.net.ns("k")] + super().command()

    def start(self, timeout: float = 90.0) -> None:
        self.controller_starts += 1
        super().start(timeout)

    def pid(self, b: int) -> int | None:
        """The pid of broker b's process (launch.sh writes it; exec keeps it), if it runs."""
        try:
            pid = int((self.state / f"broker-{b}.pid").read_text())
            if Path(f"/proc/{pid}/comm").read_text().strip() != "skein-broker":
                return None
            if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].split()[0] == "Z":
                return None
            return pid
        except (OSError, ValueError, IndexError):
            return None

    def signal(self, b: int, sig: int) -> int | None:
        pid = self.pid(b)
        if pid is not None:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return None
        return pid

    def wait_pid(self, b: int, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid = self.pid(b)
            if pid is not None:
                return pid
            time.sleep(0.1)
        return None

    def controller_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


# ---------------------------------------------------------------------------------------------
# the run

class Chaos:
    def __init__(self, a):
        self.a = a
        self.rnd = random.Random(a.seed)
        self.workdir: Path = a.workdir
        self.state = self.workdir / "state"
        self.logs = self.workdir / "logs"
        self.clients: Clients | None = None
        self.net: ChaosNet | None = None
        self.disks: Disks | None = None
        self.cluster: ChaosCluster | None = None
        self.store = None  # the SeaweedFS of --tiered
        self.faults_f = None
        self.meta: dict = {}
        self.harness_problems: list[str] = []
        self.nfaults = 0
        self.proxies = False

    # -- helpers ---------------------------------------------------------------------------
    def wait_whole(self, timeout: float, settled: float = 1.0) -> bool:
        """Whether the monitor sees every partition whole in a sample taken after the last fault
        ended (an older sample may show the cluster as it was before that fault took effect)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = self.clients.view()
            if v.get("whole") and v.get("t", 0) > getattr(self, "last_fault_end", 0.0) + settled:
                return True
            time.sleep(0.25)
        return False

    def record(self, kind: str, target, start: float, end: float | None = None, **detail) -> None:
        d = {"kind": kind, "target": target, "start": round(start, 3),
             "end": round(end if end is not None else time.time(), 3), **detail}
        self.faults_f.write(json.dumps(d) + "\n")
        self.faults_f.flush()
        self.last_fault_end = max(getattr(self, "last_fault_end", 0.0), d["end"])
        self.nfaults += 0 if d.get("skipped") else 1
        log(f"fault #{self.nfaults} {kind} {target} {detail if detail else ''}")

    def pick_broker(self) -> int:
        """Half the time the leader of a random partition, else any broker."""
        leaders = [v for v in self.clients.view().get("leaders", {}).values() if v in BROKERS]
        if leaders and self.rnd.random() < 0.5:
            return self.rnd.choice(leaders)
        return self.rnd.choice(BROKERS)

    # -- faults ------------------------------------------------------------------------------
    def f_kill(self):
        b = self.pick_broker()
        t = time.time()
        pid = self.cluster.signal(b, signal.SIGKILL)
        self.record("kill", b, t, pid=pid, skipped=pid is None)

    def f_pause(self):
        b = self.pick_broker()
        d = self.rnd.uniform(0.5, 6.0)
        t = time.time()
        pid = self.cluster.signal(b, signal.SIGSTOP)
        if pid is None:
            return self.record("pause", b, t, skipped=True)
        self.sleep(d)
        os.kill(pid, signal.SIGCONT) if Path(f"/proc/{pid}").exists() else None
        self.record("pause", b, t, seconds=round(d, 2))

    def f_restart(self):
        b = self.pick_broker()
        t = time.time()
        pid = self.cluster.signal(b, signal.SIGTERM)
        if pid is None:
            return self.record("restart", b, t, skipped=True)
        deadline = time.monotonic() + 70
        while Path(f"/proc/{pid}").exists() and self.cluster.pid(b) == pid and time.monotonic() < deadline:
            time.sleep(0.1)
        self.record("restart", b, t, stopped_after=round(time.time() - t, 1))

    def f_partition(self):
        b = self.pick_broker()
        d = self.rnd.uniform(1.0, 10.0)
        t = time.time()
        self.net.cut(b)
        try:
            self.sleep(d)
        finally:
            self.net.heal(b)
        self.record("partition", b, t, seconds=round(d, 2), what="link down: cut off from everything")

    def f_partition_ctrl(self):
        b = self.pick_broker()
        d = self.rnd.uniform(1.0, 12.0)
        t = time.time()
        self.net.drop("k", b)
        self.net.drop(b, "k")
        try:
            self.sleep(d)
        finally:
            self.net.clear_drops()
        self.record("partition-ctrl", b, t, seconds=round(d, 2), what="controller <-> broker")

    def f_partition_asym(self):
        b = self.pick_broker()
        d = self.rnd.uniform(1.0, 10.0)
        direction = self.rnd.choice(["out", "in"])
        t = time.time()
        for other in self.net.nodes():
            if other != b:
                if direction == "out":
                    self.net.drop(b, other)  # nobody hears b; b hears everyone
                else:
                    self.net.drop(other, b)  # b hears nobody; everyone hears b
        try:
            self.sleep(d)
        finally:
            self.net.clear_drops()
        self.record("partition-asym", b, t, seconds=round(d, 2),
                    what=f"broker {b}'s packets dropped" if direction == "out" else
                    f"packets to broker {b} dropped")

    def f_partition_pair(self):
        x, y = self.rnd.sample(BROKERS, 2)
        d = self.rnd.uniform(1.0, 10.0)
        t = time.time()
        self.net.drop(x, y)
        self.net.drop(y, x)
        try:
            self.sleep(d)
        finally:
            self.net.clear_drops()
        self.record("partition-pair", f"{x}-{y}", t, seconds=round(d, 2),
                    what="two brokers cannot reach each other; both reach the controller and clients")

    def f_disk_full(self):
        b = self.pick_broker()
        d = self.rnd.uniform(1.0, 8.0)
        t = time.time()
        taken = self.disks.fill(b)
        try:
            self.sleep(d)
        finally:
            self.disks.unfill(b)
        self.record("disk-full", b, t, seconds=round(d, 2), filler_mb=taken >> 20)

    def f_slow_disk(self):
        b = self.pick_broker()
        d = self.rnd.uniform(2.0, 10.0)
        t = time.time()
        self.disks.throttle(b, True)
        try:
            self.sleep(d)
        finally:
            self.disks.throttle(b, False)
        self.record("slow-disk", b, t, seconds=round(d, 2), what="blkio throttle 256 KiB/s, 16 IOPS write")

    def f_controller(self):
        t = time.time()
        pid = self.cluster.proc.pid if self.cluster.controller_alive() else None
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            self.cluster.proc.wait(10)
        d = self.rnd.uniform(0.0, 3.0)
        self.sleep(d)
        try:
            self.cluster.start(timeout=90)
        except Exception as e:  # noqa: BLE001
            self.harness_problems.append(f"controller restart at {t:.3f}: {e}"[:500])
        self.record("controller", "k", t, down_seconds=round(d, 2), pid=pid)

    def set_clock(self, b: int, seconds: float) -> None:
        f = self.state / f"clock-{b}"
        tmp = f.with_suffix(".tmp")
        tmp.write_text(f"{seconds:+.3f}\n")
        tmp.replace(f)

    def f_clock_skew(self):
        """Broker b's wall clock (CLOCK_REALTIME: record timestamps, time indexes, retention,
        transaction and producer-id expiry) jumps ahead or back by 128 ms to 262 s (as Jepsen's
        clock bumps) for 5-30 s, then back; its monotonic clock (timeouts, sessions) runs on."""
        b = self.pick_broker()
        skew = self.rnd.choice([-1, 1]) * 2 ** self.rnd.uniform(7, 18) / 1000
        d = self.rnd.uniform(5.0, 30.0)
        t = time.time()
        self.set_clock(b, skew)
        try:
            self.sleep(d)
        finally:
            self.set_clock(b, 0)
        time.sleep(1.2)  # libfaketime reads the file again within FAKETIME_CACHE_DURATION (1 s)
        self.record("clock-skew", b, t, skew_seconds=round(skew, 3), seconds=round(d, 2))

    def reassign(self, *args: str, timeout: float = 150) -> dict:
        p = self.clients.client(f"reassign-{self.nfaults}", "reassign", *self.clients.common(), *args,
                                "--max-seconds", str(timeout - 30))
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
        out = (self.logs / f"reassign-{self.nfaults}.out").read_text(errors="replace").strip()
        try:
            return json.loads(out.splitlines()[-1])
        except (ValueError, IndexError):
            return {"ok": False, "error": out[-300:]}

    def f_reassign(self):
        """A partition's replica is removed (AlterPartitionReassignments, waited for), the
        preferred leader elected, and the replica added back at a random place: the partition is
        copied to it again while the next faults happen."""
        part = self.rnd.randrange(self.a.partitions)
        t = time.time()
        r = self.reassign("--partition", str(part), "--id", str(self.rnd.randrange(1 << 30)))
        if not r.get("ok"):
            log(f"reassign of partition {part} did not finish: {r.get('error')}")
        self.record("reassign", f"p{part}", t, steps=[s["replicas"] for s in r.get("steps", [])],
                    ok=r.get("ok", False), **({"error": r["error"]} if "error" in r else {}))

    def producer_bootstrap(self) -> str:
        """The producers' bootstrap: through the end-txn fault's proxies when it is on."""
        if not self.proxies:
            return self.cluster.bootstrap
        return ",".join(f"{self.net.addr(b)}:{PROXY_PORT}" for b in BROKERS)

    def start_proxies(self) -> None:
        for b in BROKERS:
            cmd = ["ip", "netns", "exec", self.net.ns(b), PY, str(HERE / "txn_proxy.py"),
                   "--listen", f"{self.net.addr(b)}:{PROXY_PORT}", "--to", f"{self.net.addr(b)}:{EXTERNAL_PORT}",
                   "--control", str(self.state / "end-txn"), "--log", str(self.logs / f"end-txn-{b}.jsonl")]
            out = open(self.logs / f"proxy-{b}.out", "ab")
            self.clients.procs[f"proxy-{b}"] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                                         stdin=subprocess.DEVNULL, start_new_session=True)
            out.close()
        self.proxies = True

    def f_end_txn(self):
        """For 3-15 s, every EndTxn the producers send (through the proxies) is either held for
        0.5-14 s (the request timeout is 10 s: a longer hold makes the client retry, and the held
        request arrives after) or passed on and sent again 0-6 s later on a connection of its own
        (KAFKA-17754's late EndTxn). What each proxy did is in logs/end-txn-N.jsonl."""
        kind = self.rnd.choice(["delay", "dup"])
        secs = self.rnd.uniform(0.5, 14.0) if kind == "delay" else self.rnd.uniform(0.0, 6.0)
        d = self.rnd.uniform(3.0, 15.0)
        t = time.time()
        ctl = self.state / "end-txn"
        tmp = ctl.with_suffix(".tmp")
        tmp.write_text(f"{kind} {secs:.2f}\n")
        tmp.replace(ctl)
        try:
            self.sleep(d)
        finally:
            ctl.unlink(missing_ok=True)
        self.record("end-txn", "proxies", t, action=kind, request_seconds=round(secs, 2), seconds=round(d, 2))

    def f_store_outage(self):
        """The object store (SeaweedFS) is unreachable for 3-15 s: paused (requests hang until
        the client's timeout) or stopped (connections refused), then back on the same data.
        Copies, remote reads and follower restores fail meanwhile and are retried."""
        kind = self.rnd.choice(["pause", "stop"])
        d = self.rnd.uniform(3.0, 15.0)
        t = time.time()
        with self.store.outage(kind):
            self.sleep(d)
        self.record("store-outage", "store", t, action=kind, seconds=round(d, 2))

    def f_disk_loss(self):
        b = self.pick_broker()
        t = time.time()
        hold = self.state / f"hold-{b}"
        hold.touch()
        try:
            pid = self.cluster.signal(b, signal.SIGKILL)
            deadline = time.monotonic() + 20
            while pid and Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)
            n = self.disks.wipe(b)
            self.sleep(self.rnd.uniform(0.0, 2.0))
        finally:
            hold.unlink()
        self.record("disk-loss", b, t, wiped_entries=n, pid=pid)

    def sleep(self, d: float) -> None:
        time.sleep(max(0.0, d))

    def heal_all(self) -> None:
        self.net.clear_drops()
        for b in BROKERS:
            self.net.heal(b)
            self.cluster.signal(b, signal.SIGCONT)
            if b in self.disks.cgroups:
                self.disks.throttle(b, False)
            self.disks.unfill(b)
            (self.state / f"hold-{b}").unlink(missing_ok=True)
            (self.state / "end-txn").unlink(missing_ok=True)
            if "clock-skew" in self.a.faults:
                self.set_clock(b, 0)
        if not self.cluster.controller_alive():
            self.cluster.start(timeout=90)
        if self.store is not None and not self.store.running():
            self.store.start()
        if self.store is not None:
            self.store.resume()

    # -- phases ------------------------------------------------------------------------------
    def setup(self) -> None:
        a = self.a
        for d in (self.state, self.logs):
            d.mkdir(parents=True, exist_ok=True)
        self.net = ChaosNet()
        (self.workdir / "owner.json").write_text(json.dumps({"pid": os.getpid(), "tag": self.net.tag}))
        self.cluster = ChaosCluster(self.workdir / "cluster", self.net, self.state, a.nice)
        self.clients = Clients(self.logs, self.state, self.cluster.bootstrap, a, log=log,
                               wrap=["ip", "netns", "exec", self.net.ns("c"), "nice", "-n", str(a.nice)])
        self.disks = Disks(self.workdir, self.cluster.data_dir, self.net.tag, a.disk_mb)
        self.disks.setup()
        os.environ["CHAOS_STATE"] = str(self.state)
        if "clock-skew" in a.faults:
            if not FAKETIME_LIB.exists():
                raise RuntimeError(f"clock-skew needs {FAKETIME_LIB} (apt-get install libfaketime; "
                                   "e2e/setup.sh does)")
            for b in BROKERS:
                self.set_clock(b, 0)
            os.environ["CHAOS_FAKETIME"] = str(FAKETIME_LIB)
        if "end-txn" in a.faults:
            os.environ["CHAOS_PROXY_LISTENERS"] = f"{EXTERNAL_PORT}:{PROXY_PORT}"
            self.start_proxies()
            self.clients.producer_bootstrap = self.producer_bootstrap()
        os.environ["CHAOS_NS"] = f"{self.net.tag}-{{id}}"
        os.environ["CHAOS_CGROUP"] = (str(CGROOT / f"{CHAOS_ROOT_MARK}{self.net.tag}-{{id}}")
                                      if self.disks.cgroups else "")
        if a.tiered:
            # Tiered storage on a real S3 server, on the bridge's root-namespace address so every
            # broker's namespace reaches it; a topic whose closed segments are copied at once and
            # leave the brokers' disks two seconds later.
            from seaweedfs import SeaweedS3
            self.store = SeaweedS3(host=f"{self.net.prefix}.254")
            self.store.start(self.workdir / "seaweedfs")
            self.cluster.overrides.update({
                "remote.log.manager.task.interval.ms": "1000", "log.retention.check.interval.ms": "1000",
                "rsm.config.s3.access.key.id": self.store.access_key,
                "rsm.config.s3.secret.access.key": self.store.secret_key})
            self.cluster.extra_args = ["--tiered-storage", self.store.url,
                                       "--tiered-storage-endpoint", self.store.endpoint]
        log(f"starting the cluster: {self.cluster.bootstrap} (namespaces {self.net.tag}-*, data on "
            f"{', '.join(self.disks.loops.values())})")
        self.cluster.start(timeout=90)
        r = subprocess.run(["ip", "netns", "exec", self.net.ns("c"), PY, str(HERE / "workload.py"),
                            "create-topic", self.cluster.bootstrap, a.topic, str(a.partitions),
                            "min.insync.replicas=2", f"segment.bytes={a.segment_bytes}",
                            *(["remote.storage.enable=true", "local.retention.ms=2000"] if a.tiered else [])],
                           capture_output=True, text=True, timeout=150)
        if r.returncode != 0:
            raise RuntimeError(f"create topic failed: {r.stdout}{r.stderr}")
        log(r.stdout.strip())

    def start_clients(self) -> None:
        self.meta["workload_start"] = self.clients.start()

    def nemesis(self) -> None:
        a = self.a
        kinds = a.faults
        fns = {k: getattr(self, "f_" + k.replace("-", "_")) for k in kinds}
        t_end = time.monotonic() + a.duration
        self.nfaults = 0
        self.meta["nemesis_start"] = time.time()
        for _ in range(1_000_000):
            if time.monotonic() >= t_end or (a.max_faults and self.nfaults >= a.max_faults):
                break
            whole = self.wait_whole(a.settle_timeout)
            if not whole:
                log(f"cluster not whole after {a.settle_timeout:.0f} s; injecting anyway")
            self.sleep(self.rnd.uniform(0.0, a.quiet))
            kind = self.rnd.choice(kinds)
            # A disk is wiped only while the other two replicas hold everything, as seen in a
            # fresh sample after the quiet pause: wiping one while another is still copying back,
            # or right after a controller restart that fenced the others, could destroy the last
            # in-sync copy, which no RF 3 system survives (the third long run did exactly that).
            if kind == "disk-loss" and len(kinds) > 1 and not (whole and self.wait_whole(4.0, settled=3.0)):
                kind = self.rnd.choice([k for k in kinds if k != "disk-loss"])
            try:
                fns[kind]()
            except Exception as e:  # noqa: BLE001
                self.harness_problems.append(f"fault {kind} failed: {e!r}")
                log(f"fault {kind} failed: {traceback.format_exc()}")
                self.heal_all()
        self.meta["nemesis_seconds"] = time.time() - self.meta["nemesis_start"]
        self.meta["faults_injected"] = self.nfaults

    def finish(self) -> None:
        a = self.a
        log("nemesis done: healing everything")
        self.heal_all()
        if "reassign" in a.faults:
            r = self.reassign("--repair", timeout=a.recover_timeout + 30)
            if not r.get("ok"):
                self.harness_problems.append(f"partitions left with fewer replicas: {r.get('error')}")
        if not self.wait_whole(a.recover_timeout):
            self.harness_problems.append(
                f"the cluster was not whole (every partition led, ISR of 3, 3 brokers) within "
                f"{a.recover_timeout:.0f} s after the faults stopped: {self.clients.view()}")
            log(self.harness_problems[-1])
        self.clients.finish(a.recover_timeout, self.meta, self.harness_problems)

    def tiering_summary(self) -> None:
        """With --tiered: what the brokers copied to and read from the store (their /metrics,
        after the final read of the whole log, which reads the tiered part from the store). A run
        that tiered nothing proves nothing about tiering: a harness problem."""
        import urllib.request
        names = {"skein_remote_copy_segments_total": "copied_segments",
                 "skein_remote_read_requests_total": "remote_reads",
                 "skein_remote_follower_restores_total": "follower_restores",
                 "skein_remote_errors_total": "store_errors"}
        got = dict.fromkeys(names.values(), 0.0)
        for b in BROKERS:
            url = f"http://{self.net.addr(b)}:{self.cluster.metrics_port + b - 1}/metrics"
            try:
                text = urllib.request.urlopen(url, timeout=10).read().decode()
            except OSError as e:
                self.harness_problems.append(f"tiering summary: broker {b}'s metrics: {e}")
                continue
            for line in text.splitlines():
                name = line.split("{", 1)[0].split(" ", 1)[0]
                if name in names:
                    got[names[name]] += float(line.rsplit(" ", 1)[1])
        self.meta["tiering"] = {k: int(v) for k, v in got.items()}
        log(f"tiering: {self.meta['tiering']}")
        if got["copied_segments"] == 0:
            self.harness_problems.append("--tiered, but no segment was copied to the store")

    def git_rev(self) -> str:
        r = subprocess.run(["git", "-C", str(E2E.parent), "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True)
        return r.stdout.strip() or "?"

    def run(self) -> int:
        a = self.a
        t_start = time.time()
        self.meta.update(name=self.workdir.name, seed=a.seed, duration=a.duration, faults=a.faults,
                         topic=a.topic, partitions=a.partitions, producers=a.producers,
                         consumers=a.consumers, rate=a.rate, git=self.git_rev(),
                         producer_mode=a.producer_mode, producer_client=a.producer_client, consume=a.consume, abort_every=a.abort_every,
                         tiered=a.tiered,
                         broker_bin=str(self.cluster_bin()))
        self.setup()
        self.faults_f = open(self.logs / "faults.jsonl", "a")
        self.start_clients()
        if not self.clients.wait_first_writes(60):
            raise RuntimeError("no acknowledged write within 60 s of starting the producers")
        time.sleep(2)
        log(f"workload running; nemesis for {a.duration:.0f} s with {', '.join(a.faults)} (seed {a.seed})")
        self.nemesis()
        self.finish()
        if a.tiered:
            self.tiering_summary()
        code = self.cluster.stop(180)
        if code not in (0, None):
            log(f"skein-operator local exited with {code}")
        self.meta["total_seconds"] = time.time() - t_start
        self.meta["harness_problems"] = self.harness_problems
        (self.logs / "run.json").write_text(json.dumps(self.meta, indent=1))
        r = checker.check(self.logs)
        md = checker.markdown(r)
        report = a.report or (self.workdir / "report.md")
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(md)
        report.with_suffix(".json").write_text(json.dumps(r, indent=1))
        print(md)
        log(f"report: {report} (run directory {self.workdir})")
        return 0 if r["ok"] else 1

    def cluster_bin(self) -> str:
        return os.environ.get("SKEIN_BROKER_BIN", "")

    def teardown(self) -> None:
        if self.clients is not None:
            self.clients.kill_all()
        if self.cluster is not None:
            for b in BROKERS:
                self.cluster.signal(b, signal.SIGCONT)
            if self.cluster.controller_alive():
                try:
                    self.cluster.stop(60)
                except Exception:  # noqa: BLE001
                    pass
            for b in BROKERS:  # brokers adopted across controller restarts are not in its group
                self.cluster.signal(b, signal.SIGKILL)
            if self.cluster.proc is not None and self.cluster.proc.poll() is None:
                os.killpg(self.cluster.proc.pid, signal.SIGKILL)
            _wait(lambda: all(self.cluster.pid(b) is None for b in BROKERS), 15)
        time.sleep(0.5)
        if self.disks is not None:
            self.disks.teardown()
        if self.store is not None:
            self.store.stop()
        if self.net is not None:
            self.net.remove()
        owner = self.workdir / "owner.json"
        if owner.exists():
            o = json.loads(owner.read_text())
            o["done"] = True
            owner.write_text(json.dumps(o))


def _wait(pred, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return False


def parse(argv=None):
    ap = argparse.ArgumentParser(description="Fault injection against a 3-broker skein-operator local cluster")
    ap.add_argument("--duration", type=float, default=60, help="seconds of fault injection (default 60)")
    ap.add_argument("--faults", default=",".join(DEFAULT_FAULTS),
                    help=f"comma-separated fault kinds, or 'all' (default: all but disk-loss). Kinds: "
                         f"{', '.join(ALL_FAULTS)}")
    ap.add_argument("--seed", type=int, default=None, help="seed of the nemesis' choices (default: random)")
    ap.add_argument("--report", type=Path, default=None, help="report path (.md; .json beside it)")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="run directory (default: a new skein-chaos-* under $TMPDIR or /tmp)")
    ap.add_argument("--max-faults", type=int, default=0, help="stop after this many faults (0: no limit)")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--consumers", type=int, default=3)
    ap.add_argument("--rate", type=float, default=250, help="records/s per producer")
    ap.add_argument("--producer-mode", choices=["plain", "txn"], default="plain",
                    help="plain: idempotent producers, a record at a time (default); txn: transactional "
                         "producers, 2-6 records to random partitions per transaction, 1 in --abort-every aborted")
    ap.add_argument("--producer-client", choices=["librdkafka", "java"], default="librdkafka",
                    help="with --producer-mode txn: confluent-kafka (librdkafka 2.16: transaction version 1) "
                         "or the Java client (4.1: version 2, KIP-890)")
    ap.add_argument("--abort-every", type=int, default=5, help="with --producer-mode txn: abort 1 transaction in N")
    ap.add_argument("--consume", choices=["subscribe", "assign"], default="subscribe",
                    help="subscribe: the consumers are members of the group (default); assign: each assigns "
                         "itself a fixed share of the partitions and commits to the group's offsets")
    ap.add_argument("--segment-bytes", type=int, default=None,
                    help="the topic's segment.bytes (default 262144; 65536 with --tiered, so segments tier often)")
    ap.add_argument("--settle-timeout", type=float, default=10,
                    help="before each fault, wait at most this long for every partition to be whole")
    ap.add_argument("--quiet", type=float, default=1.5, help="up to this many seconds between faults")
    ap.add_argument("--recover-timeout", type=float, default=120)
    ap.add_argument("--disk-mb", type=int, default=4096, help="size of each broker's filesystem")
    ap.add_argument("--nice", type=int, default=5)
    ap.add_argument("--producer-debug", default="",
                    help="librdkafka debug contexts for the producers, logged to logs/producer-N.out (e.g. eos)")
    ap.add_argument("--consumer-debug", default="",
                    help="librdkafka debug contexts for the group members, logged to logs/consumer-N.out "
                         "(e.g. cgrp,topic,fetch)")
    ap.add_argument("--keep", action="store_true", help="keep the run directory (default: kept on failure)")
    ap.add_argument("--tiered", action="store_true",
                    help="tiered storage on SeaweedFS (an S3 server): the topic tiers, its local segments go "
                         "after 2 s, reads from the start come from the store; adds the store-outage fault")
    a = ap.parse_args(argv)
    named = a.faults != "all" and a.faults != ",".join(DEFAULT_FAULTS)
    a.faults = ALL_FAULTS if a.faults == "all" else [f.strip() for f in a.faults.split(",") if f.strip()]
    if not named and a.producer_client != "java" and "end-txn" in a.faults:
        # librdkafka's producers use transaction version 1, where a late EndTxn may end the next
        # transaction (KAFKA-17754): only when asked for by name
        a.faults = [f for f in a.faults if f != "end-txn"]
    if a.tiered and not named:
        a.faults = a.faults + [f for f in TIERED_FAULTS if f not in a.faults]
    if not a.tiered and any(f in TIERED_FAULTS for f in a.faults):
        if named:
            ap.error(f"{', '.join(TIERED_FAULTS)} needs --tiered")
        a.faults = [f for f in a.faults if f not in TIERED_FAULTS]
    bad = [f for f in a.faults if f not in ALL_FAULTS]
    if bad or not a.faults:
        ap.error(f"unknown fault kinds {bad}; known: {', '.join(ALL_FAULTS)}")
    if a.producer_mode != "txn":
        if a.producer_client != "librdkafka":
            ap.error("--producer-client java needs --producer-mode txn")
        if "end-txn" in a.faults and len(a.faults) > 1:
            a.faults = [f for f in a.faults if f != "end-txn"]  # plain producers send no EndTxn
        elif "end-txn" in a.faults:
            ap.error("the end-txn fault needs --producer-mode txn")
    if a.segment_bytes is None:
        a.segment_bytes = 65536 if a.tiered else 262144
    if a.seed is None:
        a.seed = random.randrange(1 << 31)
    a.topic = "chaos"
    a.group = "chaos-group"
    return a


def main(argv=None) -> int:
    a = parse(argv)
    if os.geteuid() != 0:
        print("chaos: needs root (network namespaces, loop devices, cgroups)", file=sys.stderr)
        return 2
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    cleanup_stale(tmp)
    if a.workdir is None:
        a.workdir = tmp / f"{CHAOS_ROOT_MARK}{time.strftime('%Y%m%dT%H%M%S')}-{a.seed}"
    a.workdir.mkdir(parents=True, exist_ok=True)
    if "slow-disk" in a.faults and not CGROOT.is_dir():
        print("chaos: no blkio cgroup (cgroup v1) here: slow-disk left out", file=sys.stderr)
        a.faults.remove("slow-disk")
    ch = Chaos(a)

    def on_signal(sig, frame):
        raise KeyboardInterrupt(f"signal {sig}")

    signal.signal(signal.SIGTERM, on_signal)
    code = 2
    try:
        code = ch.run()
    except KeyboardInterrupt as e:
        log(f"interrupted: {e}")
    except Exception:  # noqa: BLE001
        log("harness failure:\n" + traceback.format_exc())
        if ch.cluster is not None:
            log(ch.cluster.log_tail(30))
    finally:
        ch.teardown()
    if code == 0 and not a.keep:
        # keep the report and the small logs, drop the disk images and the cluster's data
        for b in BROKERS:
            (a.workdir / f"disk-{b}.img").unlink(missing_ok=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
