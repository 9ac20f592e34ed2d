"""Day-2 operations under the chaos workload, judged by the chaos checker (#43).

The workload of e2e/chaos (workload.py: 2 idempotent acks=all producers writing unique values to 6
partitions, 3 read_committed members of a group that log every record they get and commit every
second, a monitor of leaders, committed and end offsets) runs against a KafkaCluster of this
tier while the operator does, one after another and each to its end:

- a rolling restart (a spec.config change),
- a scale up from 3 brokers to 4 (the balancer moves replicas onto the new one),
- a scale down back to 3 (the leaving broker drained first),
- a storage growth (every claim grown online),
- a replacement of the cluster CA (its phases; every broker gets a new certificate), which the
  brokers replicate with (`listeners.replicationTls`: mutual TLS between brokers),
- an operator failover (the Lease holder deleted, the standby takes over).

SKEIN_OPS_ROUNDS (default 1) repeats the sequence. Then the producers stop, the group drains to
the end offsets, the topic is read back and `e2e/chaos/checker.py` judges the run as it judges a
chaos run: nothing acknowledged lost, duplicated, moved or reordered, every record consumed,
committed offsets never went back, and none of Jepsen's queue classes. The report (report.md) is
printed and kept in the test's directory with the clients' logs.

Not part of ./test.sh (a round takes several minutes): a long run,

    e2e/k8s/operator-e2e.sh e2e/k8s/test_operations_workload.py -k operations
    SKEIN_OPS_ROUNDS=5 e2e/k8s/operator-e2e.sh e2e/k8s/test_operations_workload.py -k operations
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "chaos"))

import checker  # noqa: E402
from run_clients import Clients  # noqa: E402
from test_operator import (CLUSTER, NS, OP_NS, all_in_sync, bootstrap, cluster_yaml, cond,  # noqa: E402
                           expandable_class, rolled_since, scale, topic_yaml, wait_until)  # noqa: F401

ROUNDS = int(os.environ.get("SKEIN_OPS_ROUNDS", "1"))


class Operations:
    def __init__(self, env, logs: Path):
        self.env = env
        self.f = open(logs / "faults.jsonl", "a", buffering=1)
        self.count = 0

    def kc(self) -> dict:
        return self.env.get("-n", NS, "get", "kafkacluster", CLUSTER)

    def patch(self, spec: dict) -> None:
        self.env.k("-n", NS, "patch", "kafkacluster", CLUSTER, "--type=merge", "-p", json.dumps({"spec": spec}))

    def settled(self, brokers: int, what: str, timeout: float = 300) -> None:
        """The cluster back to normal: Ready, every partition led and in sync, `brokers` brokers."""
        wait_until(lambda: cond(self.kc(), "Ready") == "True"
                   and len([b for b in self.kc().get("status", {}).get("brokers", []) if b["ready"]]) == brokers
                   and all_in_sync(self.env), timeout, f"the cluster settled after {what}")

    def run(self, kind: str, fn, **detail) -> None:
        t = time.time()
        print(f"[{time.strftime('%H:%M:%S')}] operation: {kind}", flush=True)
        more = fn() or {}
        self.f.write(json.dumps({"kind": kind, "target": CLUSTER, "start": round(t, 3),
                                 "end": round(time.time(), 3), **detail, **more}) + "\n")
        self.count += 1

    def rolling_restart(self, n: int) -> dict:
        first = self.env.get("-n", NS, "get", "statefulset", CLUSTER)["status"].get("updateRevision")
        self.patch({"config": {"min.insync.replicas": "2", "log.retention.ms": str(3_600_000 + n)}})
        wait_until(lambda: rolled_since(self.env, first), 600, "every broker pod on the new revision")
        self.settled(3, "the rolling restart")
        return {}

    def scale_up(self) -> dict:
        scale(self.env, 4)
        self.settled(4, "the scale up")
        wait_until(lambda: any(3 in p["replicas"] for p in
                               self.env.get("-n", NS, "get", "topic", "chaos")["status"]["partitions"]),
                   300, "replicas on broker 3")
        self.settled(4, "the moves onto broker 3")
        return {}

    def scale_down(self) -> dict:
        scale(self.env, 3)
        wait_until(lambda: self.env.get("-n", NS, "get", "statefulset", CLUSTER)["spec"]["replicas"] == 3, 600,
                   "the StatefulSet shrunk to 3")
        self.settled(3, "the scale down")
        return {}

    def grow_storage(self, gib: int) -> dict:
        self.patch({"storage": {"size": f"{gib}Gi"}})

        def grown():
            claims = self.env.get("-n", NS, "get", "pvc")["items"]
            mine = [c for c in claims if c["metadata"]["name"].endswith(tuple(f"{CLUSTER}-{i}" for i in range(3)))]
            return len(mine) >= 3 and all(c.get("status", {}).get("capacity", {}).get("storage") == f"{gib}Gi"
                                          for c in mine)
        wait_until(grown, 300, f"every claim at {gib}Gi")
        self.settled(3, "the storage growth")
        return {"size": f"{gib}Gi"}

    def replace_ca(self) -> dict:
        def phases() -> set[str]:
            return {c["phase"] for c in self.kc().get("status", {}).get("certificateAuthorities", [])}
        assert phases() == {"Steady"}, f"no steady cluster CA in the status: {phases()}"
        self.env.k("-n", NS, "annotate", "kafkacluster", CLUSTER, "--overwrite", "skein.dev/force-replace-ca=cluster")
        seen: set[str] = set()

        def steady():
            p = phases()
            seen.update(p)
            return "skein.dev/force-replace-ca" not in self.kc()["metadata"].get("annotations", {}) \
                and p == {"Steady"} and len(seen) > 1
        wait_until(steady, 900, "the cluster CA replaced and steady again")
        self.settled(3, "the CA replacement")
        return {"phases": sorted(seen)}

    def operator_failover(self) -> dict:
        env = self.env
        old = env.leader_pod()["metadata"]["name"]
        env.k("-n", OP_NS, "delete", "pod", old, "--wait=false")
        new = wait_until(lambda: (lambda p: p if p and p["metadata"]["name"] != old else None)(env.leader_pod()),
                         120, "another operator replica holding the Lease")
        self.settled(3, "the operator failover")
        return {"from": old, "to": new["metadata"]["name"]}


@pytest.mark.timeout(900 + 1200 * ROUNDS)
def test_operations_under_a_workload_lose_nothing(env, tmp_path):
    cls = expandable_class(env)
    assert cls, "the test tier's kwok-expandable StorageClass is missing (e2e/k8s/kwok/storage-class.yaml)"
    env.k("apply", "-f", "-", stdin=cluster_yaml(3, "1Gi", cls, replication_tls=True) + "---\n"
          + topic_yaml("chaos", 6, 3))
    ops = None
    logs, state = tmp_path / "logs", tmp_path / "state"
    logs.mkdir()
    state.mkdir()
    a = SimpleNamespace(topic="chaos", partitions=6, group="chaos-group", producers=2, consumers=3, rate=250.0,
                        producer_mode="plain", producer_client="librdkafka", abort_every=5, consume="subscribe",
                        producer_debug="", consumer_debug=os.environ.get("SKEIN_OPS_CONSUMER_DEBUG", ""))
    clients = Clients(logs, state, bootstrap(env), a, wrap=["nice", "-n", "5"])
    git = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    meta = {"name": "k8s-operations", "seed": None, "git": git.stdout.strip() or "?", "topic": a.topic, "partitions": a.partitions,
            "producers": a.producers, "consumers": a.consumers, "rate": a.rate, "producer_mode": a.producer_mode,
            "consume": a.consume, "faults": ["rolling-restart", "scale-up", "scale-down", "grow-storage",
                                             "replace-ca", "operator-failover"]}
    problems: list[str] = []
    try:
        ops = Operations(env, logs)
        ops.settled(3, "creation", timeout=240)
        t0 = time.time()
        meta["workload_start"] = clients.start()
        assert clients.wait_first_writes(90), "no acknowledged write within 90 s"
        meta["nemesis_start"] = time.time()
        for n in range(ROUNDS):
            ops.run("rolling-restart", lambda: ops.rolling_restart(n))
            ops.run("scale-up", ops.scale_up)
            ops.run("scale-down", ops.scale_down)
            ops.run("grow-storage", lambda: ops.grow_storage(2 + n))
            ops.run("replace-ca", ops.replace_ca)
            ops.run("operator-failover", ops.operator_failover)
        meta["nemesis_seconds"] = time.time() - meta["nemesis_start"]
        meta["duration"] = round(meta["nemesis_seconds"])
        clients.finish(180, meta, problems)
        meta["total_seconds"] = time.time() - t0
    finally:
        clients.kill_all()
    meta["harness_problems"] = problems
    (logs / "run.json").write_text(json.dumps(meta, indent=1))
    r = checker.check(logs)
    md = checker.markdown(r)
    (tmp_path / "report.md").write_text(md)
    print(md)
    print(f"report and logs: {tmp_path}")
    assert ops.count == 6 * ROUNDS
    assert r["counts"].get("acked", 0) > 1000, r["counts"]
    assert r["ok"], f"violations: {r['violations']}"
