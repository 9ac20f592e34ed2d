"""`GET /readyz`: a broker is ready only while it carries its share.

A Kubernetes readinessProbe (and the operator's rolls) use it, so it must
mean what it says: in session with the controller, not shutting down, and
back in the ISR of every partition it follows. Here, on a 3-broker local
cluster with `readiness.replica.lag.max.messages=0`:

- every broker answers 200 `ready` once the cluster is up;
- a broker paused while a load is written (it drops out of the ISRs and is
  fenced) answers 503 after it resumes (its frozen view says it is in sync:
  the silence of the controller and its fencing say otherwise), naming why,
  and 200 only once it is back in the ISR of every partition it follows
  (checked in the metadata at the first 200);
- a broker told to stop answers 503 "in controlled shutdown" while its
  leaderships move away.
"""

from __future__ import annotations

import signal
import threading
import time
import urllib.error
import urllib.request

import pytest

from brokers import LocalCluster
from conftest import CLUSTER3_OVERRIDES, TARGET
from util import wait_until

pytestmark = pytest.mark.skipif(TARGET != "skein", reason="Skein's own endpoint (Kafka has no /readyz)")

TOPIC = "readiness-t"


def readyz(cluster: LocalCluster, broker: int) -> tuple[int, str]:
    """(status, body) of broker `broker`'s /readyz; (0, error) when it does not answer."""
    url = f"http://127.0.0.1:{cluster.metrics_port + broker - 1}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


def isrs(admin, topic: str) -> list[list[int]]:
    md = admin.list_topics(topic, timeout=10).topics[topic]
    return [sorted(p.isrs) for _, p in sorted(md.partitions.items())]


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(tmp_path / "cluster", 3, {**CLUSTER3_OVERRIDES, "readiness.replica.lag.max.messages": "0"})
    c.start()
    yield c
    c.stop()


@pytest.mark.timeout(300)
def test_readyz_waits_for_the_session_and_every_followed_isr(cluster):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    for b in (1, 2, 3):
        wait_until(lambda b=b: readyz(cluster, b) == (200, "ready\n"), 60, f"broker {b} ready")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 6, 3)]).values():
        f.result(30)
    wait_until(lambda: all(len(i) == 3 for i in isrs(admin, TOPIC)), 60, "every partition in sync")

    # Broker 3 paused while a load is written: it leaves every ISR.
    cluster.signal_broker(3, signal.SIGSTOP)
    try:
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1", "linger.ms": 20,
                      "batch.size": 1 << 20})
        payload = b"x" * 1000
        for i in range(150_000):
            p.produce(TOPIC, payload, partition=i % 6)
            if i % 5000 == 0:
                p.poll(0)
        assert p.flush(120) == 0
        wait_until(lambda: all(3 not in i for i in isrs(admin, TOPIC)), 60, "broker 3 out of every ISR")
        # Fenced too (Metadata lists unfenced brokers only): its own view, frozen by the pause,
        # still says it is in sync, and it must not answer ready from it.
        wait_until(lambda: 3 not in admin.list_topics(timeout=10).brokers, 60, "broker 3 fenced")
    finally:
        cluster.signal_broker(3, signal.SIGCONT)

    # From the moment it runs again: 503 with a reason, then 200 only in every ISR.
    seen: list[tuple[float, int, str]] = []
    deadline = time.time() + 120
    while time.time() < deadline:
        status, body = readyz(cluster, 3)
        seen.append((time.time(), status, body))
        if status == 200:
            # Ready means back in the ISR of everything it follows (the bound is 0 records): the
            # metadata says so now, or within the moment the leader's ISR change takes to reach it.
            wait_until(lambda: all(3 in i for i in isrs(admin, TOPIC)), 10,
                       "broker 3 in every ISR when its /readyz said ready")
            break
        time.sleep(0.05)
    not_ready = [(s, b) for _, s, b in seen if s == 503]
    assert seen[-1][1] == 200, f"never ready again: {seen[-3:]}"
    assert not_ready, f"ready at once after a pause and a 150 MB load: {seen[:3]}"
    reasons = " | ".join(sorted({b.strip() for _, b in not_ready}))
    assert any(w in reasons for w in ("behind", "not fetched yet", "fenced", "broker epoch", "not registered")), reasons
    print(f"broker 3: {len(not_ready)} answers of 503 over {seen[-1][0] - seen[0][0]:.1f}s before ready; "
          f"reasons seen: {reasons[:600]}")


@pytest.mark.timeout(180)
def test_readyz_is_503_during_a_controlled_shutdown(cluster):
    from confluent_kafka.admin import AdminClient, NewTopic

    for b in (1, 2, 3):
        wait_until(lambda b=b: readyz(cluster, b)[0] == 200, 60, f"broker {b} ready")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # Many leaderships to move away: the controlled shutdown takes a while.
    for f in admin.create_topics([NewTopic(f"{TOPIC}-{i}", 50, 3) for i in range(4)]).values():
        f.result(60)
    wait_until(lambda: all(len(i) == 3 for t in range(4) for i in isrs(admin, f"{TOPIC}-{t}")), 90,
               "every partition in sync")
    answers: list[tuple[int, str]] = []
    stop = threading.Event()

    def poll():
        while not stop.is_set():
            answers.append(readyz(cluster, 2))
            time.sleep(0.005)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    time.sleep(0.2)
    cluster.signal_broker(2, signal.SIGTERM)
    # (The local platform starts it again at once: what matters is up to its first silence.)
    wait_until(lambda: any(s == 0 for s, _ in answers), 60, "broker 2 stopped")
    stop.set()
    t.join(5)
    assert answers[0][0] == 200, answers[:3]
    until_gone = answers[:next(i for i, (s, _) in enumerate(answers) if s == 0)]
    shutting = [b for s, b in until_gone if s == 503]
    assert any("in controlled shutdown" in b for b in shutting), \
        f"no 503 'in controlled shutdown' between ready and gone: {sorted(set(until_gone))[:5]}"
    print(f"broker 2 answered 503 'in controlled shutdown' {len(shutting)} times before it stopped")
