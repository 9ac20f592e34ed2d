"""A network partition with `ip netns`: each broker of a `skein-operator local` cluster runs in its
own network namespace, joined to the others, the controller and the test by a bridge. The test
cuts the leader of a partition off from everything (its link goes down), while an idempotent
acks=all producer writes.

What must hold: the cut-off leader can no longer acknowledge acks=all writes (a client inside its
namespace gets none); the controller elects a new leader from the ISR; writes continue there;
after healing, the old leader truncates whatever it took alone and follows; every acknowledged
record is read back exactly once at its acknowledged offset. Needs root (CI runs as root).
"""

from __future__ import annotations

import os
import random
import subprocess
import time

import pytest

import util
from brokers import LocalCluster
from conftest import TARGET, _active
from test_replication import (ConfluentWriter, admin_client, create_topic, consume_all, describe,
                              leader_of, verify_acked, wait_in_sync, OVERRIDES)

pytestmark = [
    pytest.mark.replication,
    pytest.mark.serial,
    pytest.mark.skipif(TARGET != "skein", reason="runs Skein's own local platform (skein-operator local)"),
]


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True)


class Net:
    """Three namespaces `<tag>-<id>` with 10.<a>.<b>.<id>/24 on veths to a bridge in the root
    namespace (10.<a>.<b>.254): loopback-like, nothing leaves the machine."""

    def __init__(self):
        assert os.geteuid() == 0, "the network-partition test needs root (ip netns)"
        self.tag = f"sk{random.randint(1000, 9999)}"
        a, b = 77, random.randint(1, 250)
        self.prefix = f"10.{a}.{b}"
        self.bridge = f"{self.tag}br"
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.prefix}.254/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i in (1, 2, 3):
            ns, host, peer = self.ns(i), f"{self.tag}h{i}", f"{self.tag}n{i}"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", host, "type", "veth", "peer", "name", peer)
            sh("ip", "link", "set", peer, "netns", ns)
            sh("ip", "link", "set", host, "master", self.bridge)
            sh("ip", "link", "set", host, "up")
            sh("ip", "-n", ns, "addr", "add", f"{self.prefix}.{i}/24", "dev", peer)
            sh("ip", "-n", ns, "link", "set", peer, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")

    def ns(self, i: int) -> str:
        return f"{self.tag}-{i}"

    def cut(self, i: int):
        sh("ip", "-n", self.ns(i), "link", "set", f"{self.tag}n{i}", "down")

    def heal(self, i: int):
        sh("ip", "-n", self.ns(i), "link", "set", f"{self.tag}n{i}", "up")

    def remove(self):
        for i in (1, 2, 3):
            sh("ip", "netns", "del", self.ns(i), check=False)
            sh("ip", "link", "del", f"{self.tag}h{i}", check=False)
        sh("ip", "link", "del", self.bridge, check=False)


@pytest.fixture
def net():
    n = Net()
    yield n
    n.remove()


@pytest.fixture
def ns_cluster(tmp_path, net):
    c = LocalCluster(tmp_path / "cluster", 3, OVERRIDES, host_template=f"{net.prefix}.{{id}}",
                     launcher=f"ip netns exec {net.tag}-{{id}}")
    _active.append(c)
    c.start()
    yield c
    code = c.stop()
    _active.remove(c)
    assert code == 0, f"skein-operator local exited with {code}:\n{c.log_tail(60)}"


ISOLATED_PRODUCER = r"""
import sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "acks": sys.argv[3], "retries": 0,
              "message.timeout.ms": 8000, "request.timeout.ms": 8000, "log_level": 0})
res = {}
p.produce(sys.argv[2], sys.argv[4].encode(), partition=0, on_delivery=lambda e, m: res.update(e=e, m=m))
p.flush(20)
e = res.get("e")
print("ACKED" if e is None and "m" in res else f"ERROR {e}")
"""


def produce_inside(net: Net, i: int, bootstrap: str, topic: str, acks: str, value: str) -> str:
    """Produce one record from inside broker i's namespace (where its leader is still reachable)."""
    out = subprocess.run(["ip", "netns", "exec", net.ns(i), str(util.E2E_DIR / ".venv" / "bin" / "python"),
                          "-c", ISOLATED_PRODUCER, bootstrap, topic, acks, value],
                         capture_output=True, text=True, timeout=60)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else f"ERROR {out.stderr[-500:]}"


def test_leader_cut_off_cannot_ack_new_leader_takes_over_old_one_truncates(net, ns_cluster, topic):
    c = ns_cluster
    create_topic(c, topic, 1)
    old = leader_of(c, topic, 0)
    others = [b for b in (1, 2, 3) if b != old]
    w = ConfluentWriter(c, topic, 1)
    w.start()
    util.wait_until(lambda: len(w.acked) > 300, 60, "first acknowledgements")

    cut_at = time.monotonic()
    net.cut(old)
    # inside the cut-off namespace the old leader still takes connections, but cannot reach its
    # followers or the controller: no acks=all acknowledgement
    r = produce_inside(net, old, c.addr(old), topic, "all", "isolated-acks-all")
    assert not r.startswith("ACKED"), f"the isolated leader acknowledged an acks=all write: {r}"
    # an acks=1 write it takes alone is not safe, and must be gone after healing
    r1 = produce_inside(net, old, c.addr(old), topic, "1", "isolated-acks-1")

    util.wait_until(lambda: describe(c, topic, others).get(0, {}).get("leader", -1) in others, 60,
                    "a new leader among the reachable replicas")
    new = describe(c, topic, others)[0]["leader"]
    elected_after = time.monotonic() - cut_at
    n_before = len(w.acked)
    util.wait_until(lambda: len(w.acked) > n_before + 300, 60, "writes acknowledged by the new leader")

    net.heal(old)
    # the old leader re-registers, truncates what it took alone and follows back into the ISR
    wait_in_sync(c, topic, timeout=120)
    assert old in describe(c, topic)[0]["isr"]
    time.sleep(1)
    w.halt.set()
    w.join(200)
    assert not w.is_alive()
    got = consume_all(c, topic, 1)
    values = [v for _, v in got[0]]
    assert b"isolated-acks-all" not in values
    assert b"isolated-acks-1" not in values, f"the old leader's lone write survived ({r1})"
    verify_acked(w.acked, got)
    # followers copy the leader's batches verbatim: once in sync, the three logs are the same bytes,
    # so the old leader dropped its lone write rather than keeping a divergent record
    def log_bytes(b: int) -> bytes:
        d = c.data_dir / f"broker-{b}" / f"{topic}-0"
        return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))
    util.wait_until(lambda: log_bytes(old) == log_bytes(new) == log_bytes(others[0] if others[0] != new
                                                                          else others[1]),
                    30, "identical logs on the three replicas")
    print(f"\nnetwork partition: broker {old} cut off, broker {new} leads {elected_after:.1f}s later; "
          f"{len(w.acked)} acknowledged records all read back once")

