#!/usr/bin/env python3
"""Replication cost at many partitions (issue #16): idle broker CPU and acks=all latency of a
3-broker `skein-operator local` cluster (RF 3, topics of 200 partitions).

    e2e/.venv/bin/python e2e/bench/replication_latency.py --partitions 30000
    e2e/.venv/bin/python e2e/bench/replication_latency.py --partitions 3000,30000 --rates 50,300

A benchmark, not a test: it prints, it asserts nothing. Per size, a fresh cluster
($SKEIN_OPERATOR_BIN / $SKEIN_BROKER_BIN, default target/release) on loopback ports from
--port, data in a temporary directory under e2e/bench/.work/:

  1. The topics are created (confluent-kafka Admin, 5 per request) and the script waits until
     Metadata shows every partition led with a full ISR, then 30 s more.
  2. Idle CPU: each process's CPU seconds (/proc/PID/stat) over --idle-seconds, as % of a core.
  3. One record at a time (acks=1, then acks=all; 30 each, linger.ms 0): each delivery's
     latency, so the replication round trip without any queueing.
  4. Per --rates value: --rate-seconds of 100-byte records at that rate, acks=all, linger.ms
     100, spread over 12 partitions (4 of each of three topics), once with librdkafka's default
     of 5 requests in flight per connection and once with 1; delivered, failed, p50/p99/max.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[2]
PER_TOPIC = 200


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(operator: str, broker: str, port: int, data: Path) -> subprocess.Popen:
    cmd = [operator, "local", "--brokers", "3", "--data-dir", str(data), "--kafka-port", str(port),
           "--control-port", str(port + 101), "--broker-metrics-port", str(port + 108),
           "--metrics-listen", f"127.0.0.1:{port + 207}", "--broker-bin", broker]
    return subprocess.Popen(cmd, stdout=open(data / "operator.log", "w"), stderr=subprocess.STDOUT)


def wait_brokers(admin: AdminClient, timeout: float = 120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if len(admin.list_topics(timeout=5).brokers) == 3:
                time.sleep(5)  # every broker registered and unfenced, not only listening
                return
        except Exception:  # noqa: BLE001 - still starting
            pass
        time.sleep(1)
    raise SystemExit("the cluster did not start")


def create(admin: AdminClient, names: list[str]) -> float:
    t0 = time.time()
    for i in range(0, len(names), 5):
        for f in admin.create_topics([NewTopic(t, PER_TOPIC, 3) for t in names[i:i + 5]],
                                     request_timeout=120).values():
            f.result()
    want = len(names) * PER_TOPIC
    while True:
        md = admin.list_topics(timeout=60)
        full = sum(1 for t in names if t in md.topics for p in md.topics[t].partitions.values()
                   if p.leader >= 0 and len(p.isrs) == 3)
        if full == want:
            return time.time() - t0
        time.sleep(2)


def one_at_a_time(boot: str, topic: str, acks: str) -> list[int]:
    prod = Producer({"bootstrap.servers": boot, "acks": acks, "linger.ms": 0})
    out = []
    for k in range(30):
        t = time.time()
        prod.produce(topic, b"x", partition=k % 4)
        prod.flush(60)
        out.append(round(1000 * (time.time() - t)))
    return out


def at_rate(boot: str, topics: list[str], rate: int, seconds: int, in_flight: int) -> str:
    prod = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 100,
                     "message.timeout.ms": 60000, "max.in.flight.requests.per.connection": in_flight})
    lat: list[float] = []
    errs: list[str] = []
    end = time.time() + seconds
    k = 0
    while time.time() < end:
        sent = time.time()
        prod.produce(topics[k % 12 // 4], b"x" * 100, partition=k % 4,
                     on_delivery=lambda err, _m, s=sent: errs.append(err.name()) if err else lat.append(time.time() - s))
        k += 1
        prod.poll(0)
        time.sleep(1 / rate)
    prod.flush(90)
    lat.sort()
    if not lat:
        return f"0 delivered, {len(errs)} failed"
    pct = lambda q: round(1000 * lat[min(len(lat) - 1, int(len(lat) * q))])  # noqa: E731
    return f"{len(lat)} delivered, {len(errs)} failed; p50 {pct(0.5)} ms, p99 {pct(0.99)} ms, max {pct(1.0)} ms"


def run(args, partitions: int):
    work = ROOT / "e2e" / "bench" / ".work"
    work.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="replication-", dir=work))
    proc = start(args.operator, args.broker, args.port, data)
    boot = f"127.0.0.1:{args.port}"
    try:
        admin = AdminClient({"bootstrap.servers": boot})
        wait_brokers(admin)
        names = [f"t{i:04d}" for i in range(partitions // PER_TOPIC)]
        print(f"{partitions} partitions: created, every ISR full, in {create(admin, names):.1f} s", flush=True)
        time.sleep(30)
        pids = [int(x) for x in subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                                text=True).stdout.split()]
        before = {p: cpu_seconds(p) for p in [*pids, proc.pid]}
        t0 = time.time()
        time.sleep(args.idle_seconds)
        wall = time.time() - t0
        share = {p: round(100 * (cpu_seconds(p) - c) / wall, 1) for p, c in before.items()}
        print(f"  idle CPU, % of a core: brokers {[share[p] for p in pids]}, operator {share[proc.pid]}",
              flush=True)
        for acks in ("1", "all"):
            print(f"  one record at a time, acks={acks}, ms: {one_at_a_time(boot, names[0], acks)}", flush=True)
        topics = [names[0], names[min(7, len(names) - 1)], names[min(14, len(names) - 1)]]
        for rate in args.rates:
            for in_flight in (5, 1):
                print(f"  {rate} records/s, acks=all, {in_flight} in flight: "
                      f"{at_rate(boot, topics, rate, args.rate_seconds, in_flight)}", flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(240)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(data, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="30000", help="comma-separated sizes (multiples of 200)")
    ap.add_argument("--rates", default="50,300", help="comma-separated records/s")
    ap.add_argument("--rate-seconds", type=int, default=20)
    ap.add_argument("--idle-seconds", type=int, default=60)
    ap.add_argument("--port", type=int, default=39092)
    args = ap.parse_args()
    release = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release"
    args.operator = os.environ.get("SKEIN_OPERATOR_BIN", str(release / "skein-operator"))
    args.broker = os.environ.get("SKEIN_BROKER_BIN", str(Path(args.operator).parent / "skein-broker"))
    args.rates = [int(r) for r in args.rates.split(",")]
    for n in (int(x) for x in args.partitions.split(",")):
        run(args, n)


if __name__ == "__main__":
    sys.exit(main())
