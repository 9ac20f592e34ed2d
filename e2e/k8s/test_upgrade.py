"""A rolling upgrade from the previous release, and back, under load.

The previous release is the commit in upgrade-from.env, built by
build-previous.sh (SKEIN_PREV_DIR: its binaries and its Helm chart). The pod
runner picks a pod's binary by its image: `skein-broker:<previous version>`
runs the previous release's broker, any other `skein-broker` image the
current one (the same for the operator).

One KafkaCluster on this machine's control plane (its own, as in
test_operator.py's local mode), an idempotent acks=all producer and a
committing consumer group running throughout:

1. the previous release's chart and operator; brokers pinned to the previous
   image (`spec.image`);
2. brokers rolled to the current image by the previous operator (brokers N+1,
   controller N);
3. the operator upgraded (CRDs applied, `helm upgrade`): controller N+1 takes
   over the metadata log N wrote, and moves the control plane to mutual TLS
   (a roll; it talks plaintext to the pods not rolled yet);
   then an image whose broker cannot start: the roll holds at the first
   pod, and setting the image back restarts that pod alone;
4. brokers rolled back to the previous image by the current operator
   (brokers N, controller N+1; the previous broker reads the data the current
   one wrote);
5. the operator back to the previous release (controller N reads the
   metadata log N+1 wrote; `controlPlaneTls: true` set first keeps it on the
   mutual TLS N+1 set up) and a topic created by it;
6. everything upgraded again, then `spec.featureLevel: 2` finalized (and
   refused lower);
7. a roll back to the previous broker image: its broker is refused at
   registration, the roll holds at that pod while the others serve, and the
   image set back brings it in;
then no delivery failed and every acknowledged record is read back once.

Local mode only (operator-e2e.sh runs it after test_operator.py); on another
cluster it needs two image versions of each, which cluster-e2e.sh does not
take."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_operator import MODE, NS, ROOT, LocalCluster, all_in_sync, cond, running  # noqa: E402
from util import wait_until  # noqa: E402

NAME, TOPIC = "upg", "upg-orders"
REPO = "ghcr.io/skein-dev/skein-broker"
# An image tag the pod runner runs as /bin/false: a broker that exits at once, every time.
BROKEN = "does-not-start"


def chart_version(chart: Path) -> str:
    return re.search(r'^appVersion:\s*"?([^"\n]+)"?', (chart / "Chart.yaml").read_text(), re.M).group(1)


PREV_DIR = Path(os.environ.get("SKEIN_PREV_DIR", "/nonexistent"))


class UpgradeCluster(LocalCluster):
    """The local platform with the previous release's chart installed, and pod
    runners that know both releases' binaries."""

    def binaries(self) -> dict[str, str]:
        prev = chart_version(PREV_DIR / "chart")
        return {f"skein-operator:{prev}": str(PREV_DIR / "bin/skein-operator"),
                f"skein-broker:{prev}": str(PREV_DIR / "bin/skein-broker"),
                f"skein-broker:{BROKEN}": "/bin/false",
                **super().binaries()}

    def setup(self):
        self.start_platform()
        self.helm_install(chart=PREV_DIR / "chart")
        self.k("create", "namespace", NS)


@pytest.fixture(scope="module")
def env(tmp_path_factory, request):
    if MODE != "local":
        pytest.fail("the upgrade test runs on the local platform only (e2e/k8s/operator-e2e.sh)")
    if not (PREV_DIR / "chart/Chart.yaml").is_file():
        pytest.fail("SKEIN_PREV_DIR must name the previous release built by e2e/k8s/build-previous.sh")
    yield from running(UpgradeCluster(tmp_path_factory.mktemp("upgrade")), request)


def broker_pods(env) -> list[dict]:
    return [p for p in env.get("-n", NS, "get", "pods", "-l", f"app.kubernetes.io/instance={NAME}")["items"]
            if not p["metadata"].get("deletionTimestamp")]


def versions(env) -> list[str | None]:
    brokers = env.get("-n", NS, "get", "kafkacluster", NAME).get("status", {}).get("brokers", [])
    return [b.get("version") for b in sorted(brokers, key=lambda b: b["id"])]


def feature_level(env) -> int | None:
    return env.get("-n", NS, "get", "kafkacluster", NAME).get("status", {}).get("featureLevel")


def on_update_revision(env) -> bool:
    rev = env.get("-n", NS, "get", "statefulset", NAME).get("status", {}).get("updateRevision")
    pods = broker_pods(env)
    return len(pods) == 3 and all(p["metadata"]["labels"].get("controller-revision-hash") == rev for p in pods)


def roll_to(env, image: str, who: str):
    """Set spec.image and wait for the roll: one pod at a time, highest ordinal
    first, each new pod on `image`; then Ready and every partition in sync."""
    first = {p["metadata"]["name"]: p["metadata"]["uid"] for p in broker_pods(env)}
    env.k("-n", NS, "patch", "kafkacluster", NAME, "--type=merge", "-p", json.dumps({"spec": {"image": image}}))

    def rolled():
        pods = broker_pods(env)
        return len(pods) == 3 and all(p["spec"]["containers"][0]["image"] == image
                                      and p["metadata"]["uid"] != first.get(p["metadata"]["name"]) for p in pods)
    wait_until(rolled, 360, f"every broker pod recreated on {image} ({who})")
    wait_until(lambda: cond(env.get("-n", NS, "get", "kafkacluster", NAME), "Ready") == "True", 180,
               f"KafkaCluster Ready after the roll to {image}")
    wait_until(lambda: all_in_sync(env), 180, f"every partition in sync after the roll to {image}")
    # Highest ordinal first. Timestamps have whole seconds and an idle roll of small brokers
    # takes about one per pod, so two in one second count as in order (the roll's one-at-a-time
    # gate itself is test_operator.py's roll test).
    recreated = sorted((p["metadata"]["creationTimestamp"], -int(p["metadata"]["name"].rsplit("-", 1)[1]))
                       for p in broker_pods(env))
    assert [-o for _, o in recreated] == [2, 1, 0], recreated


@pytest.mark.timeout(1500)
def test_rolling_upgrade_from_the_previous_release_and_back_under_acks_all_load(env):
    from confluent_kafka import Consumer, Producer, TopicPartition

    prev = chart_version(PREV_DIR / "chart")
    cur = chart_version(ROOT / "charts/skein")
    assert prev != cur, f"the previous release ({prev}) and this tree ({cur}) carry the same version"
    prev_image, cur_image = f"{REPO}:{prev}", f"{REPO}:{cur}"
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: KafkaCluster
metadata: {{name: {NAME}, namespace: {NS}}}
spec:
  replicas: 3
  image: {prev_image}
  storage: {{size: 1Gi}}
  config: {{min.insync.replicas: "2"}}
---
apiVersion: skein.dev/v1alpha1
kind: Topic
metadata: {{name: {TOPIC}, namespace: {NS}}}
spec:
  clusterRef: {{name: {NAME}}}
  partitions: 6
  replicationFactor: 3
  config: {{min.insync.replicas: "2"}}
""")
    wait_until(lambda: cond(env.get("-n", NS, "get", "kafkacluster", NAME), "Ready") == "True", 240,
               f"KafkaCluster {NAME} Ready on the previous release")
    wait_until(lambda: cond(env.get("-n", NS, "get", "topic", TOPIC), "Ready") == "True", 120, f"Topic {TOPIC} Ready")
    boot = f"{NAME}-0.{NAME}-brokers.{NS}.svc:9092,{NAME}-1.{NAME}-brokers.{NS}.svc:9092"

    errors: list[str] = []
    acked: list[bytes] = []
    consumed = [0]
    stop = threading.Event()
    group = f"upg-{uuid.uuid4().hex[:6]}"

    def produce():
        p = Producer({"bootstrap.servers": boot, "acks": "all", "enable.idempotence": True,
                      "message.timeout.ms": 180000, "linger.ms": 5})

        def cb(err, msg):
            if err:
                errors.append(str(err))
            else:
                acked.append(msg.value())
        i = 0
        while not stop.is_set():
            p.produce(TOPIC, f"upg-{i}".encode(), on_delivery=cb)
            p.poll(0.02)
            i += 1
        p.flush(180)

    def consume():
        # A group that commits as it goes: its offsets live in __consumer_offsets, written and read by
        # whichever release leads that partition at the time.
        c = Consumer({"bootstrap.servers": boot, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": True, "auto.commit.interval.ms": 1000})
        c.subscribe([TOPIC])
        while not stop.is_set():
            m = c.poll(0.5)
            if m is not None and not m.error():
                consumed[0] += 1
        c.close()

    threads = [threading.Thread(target=produce, daemon=True), threading.Thread(target=consume, daemon=True)]
    for t in threads:
        t.start()
    wait_until(lambda: len(acked) > 200 and consumed[0] > 0, 60, "the load running on the previous release")

    # 2. Brokers N+1 under controller N.
    roll_to(env, cur_image, "by the previous operator")
    n_after_up = len(acked)

    # 3. The operator: CRDs first (helm never upgrades a chart's crds/), then the release.
    old_leader = env.leader_pod()["metadata"]["name"]
    placement = [p["replicas"] for p in env.get("-n", NS, "get", "topic", TOPIC)["status"]["partitions"]]
    env.k("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "charts/skein/crds"))
    env.helm_install(verb="upgrade")

    def current_operator():
        p = env.leader_pod()
        return p if p and p["metadata"]["name"] != old_leader and \
            p["spec"]["containers"][0]["image"].endswith(f"skein-operator:{cur}") else None
    wait_until(current_operator, 180, "the current operator holding the Lease")
    # Should the new operator build another pod template, it rolls the brokers once more: let it end.
    wait_until(lambda: on_update_revision(env), 360, "every broker pod on the StatefulSet's current revision")
    wait_until(lambda: cond(env.get("-n", NS, "get", "kafkacluster", NAME), "Ready") == "True", 180,
               "KafkaCluster Ready under the current operator")
    wait_until(lambda: all_in_sync(env), 180, "every partition in sync under the current operator")
    status = env.get("-n", NS, "get", "topic", TOPIC)["status"]
    assert [p["replicas"] for p in status["partitions"]] == placement, "the placement survived the operator upgrade"
    n_after_op = len(acked)

    # The current controller hears each broker's release as it registers with it (0.1.0 brokers do
    # not say theirs): status.brokers[].version shows which binary runs where.
    wait_until(lambda: versions(env) == [cur] * 3, 60, f"status.brokers[].version {cur} on all three")

    # 3b. An image whose broker cannot start: the roll stops at the first pod while the other two
    # serve, and setting the image back restarts that pod at once (its broker never registers, so
    # waiting for it would hold the roll for good).
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in broker_pods(env)}
    env.k("-n", NS, "patch", "kafkacluster", NAME, "--type=merge", "-p",
          json.dumps({"spec": {"image": f"{REPO}:{BROKEN}"}}))
    wait_until(lambda: any(p["metadata"]["name"] == f"{NAME}-2" and p["spec"]["containers"][0]["image"].endswith(BROKEN)
                           for p in broker_pods(env)), 120, f"{NAME}-2 recreated on the broken image")
    n_broken = len(acked)
    wait_until(lambda: len(acked) > n_broken + 200, 60, "acks=all writes going on with two brokers in sync")
    reconciling = [c for c in env.get("-n", NS, "get", "kafkacluster", NAME)["status"]["conditions"]
                   if c["type"] == "Reconciling"]
    assert reconciling and f"{NAME}-2" in reconciling[0]["message"], reconciling
    still = {p["metadata"]["name"]: p["metadata"]["uid"] for p in broker_pods(env)}
    assert [still[f"{NAME}-{i}"] for i in (0, 1)] == [uids[f"{NAME}-{i}"] for i in (0, 1)], \
        "the roll went past the pod whose broker cannot start"
    env.k("-n", NS, "patch", "kafkacluster", NAME, "--type=merge", "-p", json.dumps({"spec": {"image": cur_image}}))
    wait_until(lambda: any(p["metadata"]["name"] == f"{NAME}-2" and p["spec"]["containers"][0]["image"] == cur_image
                           for p in broker_pods(env)), 120, f"{NAME}-2 restarted on {cur_image} again")
    wait_until(lambda: versions(env) == [cur] * 3, 120, f"broker 2 registered again on {cur}")
    wait_until(lambda: all_in_sync(env), 180, "every partition in sync after the broken image was undone")
    still = {p["metadata"]["name"]: p["metadata"]["uid"] for p in broker_pods(env)}
    assert [still[f"{NAME}-{i}"] for i in (0, 1)] == [uids[f"{NAME}-{i}"] for i in (0, 1)], \
        "brokers 0 and 1 were restarted to undo a change they never got"

    # 4. Brokers N under controller N+1: a downgrade, reading what N+1 wrote.
    roll_to(env, prev_image, "by the current operator")
    wait_until(lambda: versions(env) == [None] * 3, 60, "no version reported: 0.1.0 brokers on all three")
    wait_until(lambda: len(acked) > n_after_op + 200, 60, "records acked on the previous release again")

    # 5. The operator back to the previous release: controller N reads the metadata log N+1 wrote
    # (fields it does not know are ignored), with the newer CRDs left in place. The control plane
    # is mutual TLS since N+1; N does that only with spec.listeners.controlPlaneTls (ignored by
    # N+1), so it is set first, as docs/kubernetes.md says: N then keeps the Secrets N+1 made.
    env.k("-n", NS, "patch", "kafkacluster", NAME, "--type=merge", "-p",
          json.dumps({"spec": {"listeners": {"controlPlaneTls": True}}}))
    new_leader = env.leader_pod()["metadata"]["name"]
    env.helm_install(chart=PREV_DIR / "chart", verb="upgrade")

    def previous_operator():
        p = env.leader_pod()
        return p if p and p["metadata"]["name"] != new_leader and \
            p["spec"]["containers"][0]["image"].endswith(f"skein-operator:{prev}") else None
    wait_until(previous_operator, 180, "the previous operator holding the Lease again")
    n_before_op_down = len(acked)
    env.k("apply", "-f", "-", stdin=f"""apiVersion: skein.dev/v1alpha1
kind: Topic
metadata: {{name: upg-after, namespace: {NS}}}
spec: {{clusterRef: {{name: {NAME}}}, partitions: 2, replicationFactor: 3}}
""")
    wait_until(lambda: cond(env.get("-n", NS, "get", "topic", "upg-after"), "Ready") == "True", 120,
               "a topic created by the previous operator after the downgrade")
    wait_until(lambda: all_in_sync(env), 180, "every partition in sync under the previous operator")
    status = env.get("-n", NS, "get", "topic", TOPIC)["status"]
    assert [p["replicas"] for p in status["partitions"]] == placement, "the placement survived the downgrade"
    wait_until(lambda: len(acked) > n_before_op_down + 200, 60, "records acked with everything on the previous release")

    # 6. Upgrade again, all the way: operator, brokers, then the feature level (the one-way door).
    prev_leader = env.leader_pod()["metadata"]["name"]
    env.helm_install(verb="upgrade")
    wait_until(lambda: (lambda p: p if p and p["metadata"]["name"] != prev_leader and
                        p["spec"]["containers"][0]["image"].endswith(f"skein-operator:{cur}") else None)(
        env.leader_pod()), 180, "the current operator holding the Lease again")
    wait_until(lambda: feature_level(env) == 1, 60, "status.featureLevel 1: never finalized")
    roll_to(env, cur_image, "by the current operator, again")
    env.k("-n", NS, "patch", "kafkacluster", NAME, "--type=merge", "-p", json.dumps({"spec": {"featureLevel": 2}}))
    wait_until(lambda: feature_level(env) == 2, 60, "status.featureLevel 2")
    lowered = env.k_run("-n", NS, "patch", "kafkacluster", NAME, "--type=merge", "-p",
                        json.dumps({"spec": {"featureLevel": 1}}))
    assert lowered.returncode != 0 and "never lowered" in lowered.stderr, lowered.stderr

    # 7. A downgrade past the finalized level is refused: the previous release's broker cannot
    # register, the roll holds at its pod while the others serve, and the image set back brings it in.
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in broker_pods(env)}
    env.k("-n", NS, "patch", "kafkacluster", NAME, "--type=merge", "-p", json.dumps({"spec": {"image": prev_image}}))
    wait_until(lambda: any(p["metadata"]["name"] == f"{NAME}-2" and p["spec"]["containers"][0]["image"] == prev_image
                           for p in broker_pods(env)), 120, f"{NAME}-2 recreated on {prev_image}")
    n_refused = len(acked)
    wait_until(lambda: len(acked) > n_refused + 200, 60, "acks=all writes going on while broker 2 is refused")
    brokers = {b["id"]: b for b in env.get("-n", NS, "get", "kafkacluster", NAME)["status"]["brokers"]}
    assert not brokers[2]["ready"], f"a {prev} broker registered at skein.version 2: {brokers[2]}"

    def reconciling_message() -> str:
        conds = env.get("-n", NS, "get", "kafkacluster", NAME)["status"]["conditions"]
        return next((c["message"] for c in conds if c["type"] == "Reconciling"), "")
    # The condition says why the roll holds, not only that it waits.
    held = wait_until(lambda: (lambda m: m if "refused at registration" in m else None)(reconciling_message()),
                      60, "the Reconciling condition naming the refused registration")
    assert f"{NAME}-2" in held and "skein.version 2" in held, held
    still = {p["metadata"]["name"]: p["metadata"]["uid"] for p in broker_pods(env)}
    assert [still[f"{NAME}-{i}"] for i in (0, 1)] == [uids[f"{NAME}-{i}"] for i in (0, 1)], \
        "the roll went past the refused broker"
    env.k("-n", NS, "patch", "kafkacluster", NAME, "--type=merge", "-p", json.dumps({"spec": {"image": cur_image}}))
    wait_until(lambda: versions(env) == [cur] * 3, 120, f"broker 2 back on {cur}")
    wait_until(lambda: all_in_sync(env), 180, "every partition in sync at skein.version 2")

    stop.set()
    for t in threads:
        t.join(200)
    assert not errors, f"{len(errors)} failed deliveries: {errors[:5]}"
    assert len(acked) > n_after_op > n_after_up > 0

    c = Consumer({"bootstrap.servers": boot, "group.id": f"upg-check-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([TOPIC])
    got: list[bytes] = []
    deadline = time.monotonic() + 120
    want = set(acked)
    while not want <= set(got) and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    missing = want - set(got)
    assert not missing, f"{len(missing)} of {len(want)} acknowledged records not read back: {sorted(missing)[:5]}"
    dupes = len(got) - len(set(got))
    assert dupes == 0, f"{dupes} records read twice (the idempotent producer's retries were not deduplicated)"

    g = Consumer({"bootstrap.servers": boot, "group.id": group, "enable.auto.commit": False})
    committed = g.committed([TopicPartition(TOPIC, i) for i in range(6)], timeout=30)
    g.close()
    total = sum(tp.offset for tp in committed if tp.offset >= 0)
    assert total > 0, f"the group's committed offsets were lost: {committed}"
    print(f"upgrade {prev} -> brokers {cur} -> operator {cur} -> brokers {prev} -> operator {prev} -> all {cur} at "
          f"skein.version 2, {prev} broker refused: {len(acked)} records acked "
          f"(acks=all), 0 failed, all read back once; group {group} committed {total}")
    subprocess.run([env.kubectl, "--kubeconfig", env.kubeconfig, "-n", NS, "delete", "kafkacluster", NAME,
                    "--wait=false"], capture_output=True, timeout=60)
