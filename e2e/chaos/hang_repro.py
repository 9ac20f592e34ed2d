"""Tries to reproduce the librdkafka consumer hang of the long runs (README, "What the hang most
likely is") on purpose, against three brokers of Skein (default) or Apache Kafka (--target kafka):

    e2e/.venv/bin/python e2e/chaos/hang_repro.py [--target kafka] [--cycles 60] [--partitions 24]

Each cycle elects every partition's preferred leader, so broker X (paused in the cycle before;
1, 2, 3 in turn, --per-broker cycles each) leads a third of them again and the consumer (librdkafka, assign(), every partition) validates its
position there with OffsetForLeaderEpoch; X is paused (SIGSTOP) at once, so those requests stay
unanswered until the controller fences X and the Metadata answer leaves it out, when librdkafka
decommissions its connection to X: the failed requests' handler and the decommissioning thread
then take the partition's lock and the handle's lock in opposite orders (librdkafka #5476). X
resumes and rejoins; next cycle. A producer writes all along.

The consumer runs in a process of its own and notes the time after every consume() (0.2 s). A
consume() that has not returned for --stuck seconds is the hang, and --stall-cycles cycles with
nothing consumed while the producer's writes are acknowledged a stall (the client's main thread
stuck while the application's consume() still returns): every native thread's stack of the
consumer (gdb) goes to WORKDIR/consumer.stacks, and the exit code is 1. Exit code 0: no hang
in the cycles. Needs the e2e venv and gdb (e2e/setup.sh); Skein binaries as e2e/run.sh finds
them."""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

TOPIC = "hang"


def consumer_main(bootstrap: str, partitions: int, beat: Path, debug: str) -> None:
    """The consumer process: assign() every partition from the start; consume() forever."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    conf = {"bootstrap.servers": bootstrap, "group.id": "hang-repro", "enable.auto.commit": False,
            "log_level": 0, "topic.metadata.refresh.interval.ms": 1000}
    if debug:
        conf.update(debug=debug, log_level=7)
    c = Consumer(conf)
    c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
    last = 0.0
    n = 0
    while True:
        n += len(c.consume(500, 0.2))
        now = time.time()
        if now - last >= 0.5:
            tmp = beat.with_suffix(".tmp")
            tmp.write_text(json.dumps({"t": now, "consumed": n}))
            tmp.replace(beat)
            last = now


class Target:
    """Three brokers, ids 1-3, each can be paused and resumed."""

    def __init__(self, kind: str, workdir: Path):
        from brokers import KafkaCluster, LocalCluster
        if kind == "kafka":
            self.cluster = KafkaCluster(workdir / "cluster", 3, {
                "broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
                "replica.lag.time.max.ms": "2000"})
        else:
            self.cluster = LocalCluster(workdir / "cluster", 3, {
                "replica.lag.time.max.ms": "2000", "broker.heartbeat.interval.ms": "500"})
        self.kind = kind

    def pid(self, broker: int) -> int:
        if self.kind == "kafka":
            return self.cluster.nodes[broker - 1].proc.pid
        return self.cluster.broker_pid(broker)

    def signal(self, broker: int, sig: int) -> None:
        os.kill(self.pid(broker), sig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", choices=["skein", "kafka"], default="skein")
    ap.add_argument("--cycles", type=int, default=60)
    ap.add_argument("--partitions", type=int, default=24)
    ap.add_argument("--per-broker", type=int, default=5, help="cycles in a row on one broker")
    ap.add_argument("--stuck", type=float, default=30.0, help="seconds without a consume() return")
    ap.add_argument("--stall-cycles", type=int, default=3,
                    help="cycles with nothing consumed while writes are acknowledged: a stall")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--debug", default="", help="librdkafka debug contexts of the consumer "
                    "(into WORKDIR/consumer.out), e.g. fetch,topic,broker")
    ap.add_argument("--consumer", nargs=4, metavar=("BOOTSTRAP", "PARTITIONS", "BEAT", "DEBUG"),
                    help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.consumer:
        consumer_main(a.consumer[0], int(a.consumer[1]), Path(a.consumer[2]), a.consumer[3])
        return 0

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaAdminClient
    from run_clients import native_stacks

    work = a.workdir or Path(tempfile.mkdtemp(prefix="hang-repro-"))
    work.mkdir(parents=True, exist_ok=True)
    t = Target(a.target, work)
    t.cluster.start()
    bootstrap = t.cluster.bootstrap
    say = lambda msg: print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)  # noqa: E731
    say(f"{a.target} at {bootstrap}; work in {work}")
    consumer = None
    stop = threading.Event()
    try:
        creator = AdminClient({"bootstrap.servers": bootstrap})
        creator.create_topics([NewTopic(TOPIC, a.partitions, 3)])[TOPIC].result(60)
        time.sleep(3)

        delivered = [0]

        def acked(err, _msg):
            if err is None:
                delivered[0] += 1

        def produce():
            p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "log_level": 0,
                          "message.timeout.ms": 10000})
            i = 0
            while not stop.is_set():
                try:
                    p.produce(TOPIC, value=str(i).encode(), partition=i % a.partitions, on_delivery=acked)
                except BufferError:
                    p.poll(0.1)
                i += 1
                p.poll(0)
                time.sleep(0.002)
            p.flush(5)

        threading.Thread(target=produce, daemon=True).start()
        beat = work / "consumer.beat"
        consumer = subprocess.Popen([sys.executable, __file__, "--consumer", bootstrap, str(a.partitions),
                                     str(beat), a.debug], stdout=open(work / "consumer.out", "wb"),
                                    stderr=subprocess.STDOUT, start_new_session=True)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=8000)

        def hung() -> bool:
            try:
                b = json.loads(beat.read_text())
            except (OSError, ValueError):
                return False
            return time.time() - b["t"] > a.stuck

        addrs = bootstrap.split(",")

        def brokers_listed(asked: int) -> set[int] | None:
            """The brokers in broker `asked`'s Metadata answer (v1, no topics); None when it
            does not answer."""
            import rawkafka as rk
            host, port = addrs[asked - 1].rsplit(":", 1)
            try:
                with rk.Connection(host, int(port), client_id="hang-repro", timeout=3) as conn:
                    r = conn.request(3, 1, rk.i32(0))
                    return {b[0] for b in r.array(lambda r: (r.i32(), r.string(), r.i32(), r.string()))}
            except (OSError, AssertionError):
                return None

        def stacks(why: str) -> int:
            say(why)
            native_stacks(consumer.pid, work / "consumer.stacks")
            say(f"stacks in {work / 'consumer.stacks'}")
            return 1

        # (consumed, delivered) at the end of recent cycles: a consumer that returns from
        # consume() but reads nothing while the producer's writes are acknowledged has stopped
        # fetching (its main thread stuck, e.g. on a lock) without its application thread noticing.
        progress: list[tuple[int, int]] = []
        time.sleep(5)
        for cycle in range(1, a.cycles + 1):
            # The same broker for --per-broker cycles: the one paused last is the one the
            # election gives its partitions back to, so the validations go to it.
            x = (cycle - 1) // a.per_broker % 3 + 1
            try:
                admin.elect_leaders(0, {TOPIC: list(range(a.partitions))}, raise_errors=False)
            except Exception as e:  # noqa: BLE001
                say(f"cycle {cycle}: election failed: {e}")
            time.sleep(random.uniform(0.0, 0.4))
            t.signal(x, signal.SIGSTOP)
            paused = time.monotonic()
            # Fenced, and out of the Metadata answer, within the session timeout (+ slack).
            other = x % 3 + 1
            while time.monotonic() - paused < 25 and x in (brokers_listed(other) or {x}):
                time.sleep(0.5)
            gone = time.monotonic() - paused
            time.sleep(random.uniform(0.5, 3.0))
            t.signal(x, signal.SIGCONT)
            back = time.monotonic()
            while time.monotonic() - back < 30 and x not in (brokers_listed(other) or set()):
                time.sleep(0.5)
            b = json.loads(beat.read_text()) if beat.exists() else {}
            say(f"cycle {cycle}: broker {x} paused, out of metadata after {gone:.1f} s, back after "
                f"{time.monotonic() - back:.1f} s; consumed {b.get('consumed')}, produced {delivered[0]}")
            progress.append((b.get("consumed", 0), delivered[0]))
            if len(progress) > a.stall_cycles:
                (c0, d0), (c1, d1) = progress[-1 - a.stall_cycles], progress[-1]
                if c1 == c0 and d1 - d0 > 1000:
                    return stacks(f"STALL: nothing consumed in {a.stall_cycles} cycles while {d1 - d0} "
                                  f"writes were acknowledged (cycle {cycle})")
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if hung():
                    break
                time.sleep(0.5)
            if consumer.poll() is not None:
                say(f"the consumer exited ({consumer.returncode}): {work / 'consumer.out'}")
                return 2
            if hung():
                return stacks(f"HANG: the consumer's consume() has not returned for {a.stuck} s "
                              f"(cycle {cycle})")
        say(f"no hang in {a.cycles} cycles")
        return 0
    finally:
        stop.set()
        if consumer is not None:
            os.killpg(consumer.pid, signal.SIGKILL)
        for x in (1, 2, 3):
            try:
                t.signal(x, signal.SIGCONT)
            except (OSError, TypeError):
                pass
        t.cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
