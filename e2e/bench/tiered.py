#!/usr/bin/env python3
"""Tiered storage (KIP-405) rows of the benchmark (issue #44): Skein with its built-in store and
Apache Kafka 4.1.1 with `LocalTieredStorage` (the file-system RemoteStorageManager of Kafka's
`kafka-storage` test jar, from Maven Central), side by side, one broker each, on this machine.

    e2e/.venv/bin/python e2e/bench/tiered.py [--gib 5] [--systems kafka,skein] [--out DIR]
    e2e/.venv/bin/python e2e/bench/tiered.py --quick          # 0.25 GiB: a smoke run

Both stores are directories on the same disk as the logs (Kafka's LocalTieredStorage can only
do that), so the remote-read rows compare the two brokers' tiering paths, not an object store's
network. Per system, fresh each time, with Kafka's perf tools:

  1. produce --gib of 1 KiB records (acks=1, 1 partition) to a topic without tiering: MB/s;
  2. the same to a tiered topic (`remote.storage.enable=true`, `local.retention.bytes` 256 MiB,
     64 MiB segments; 64 and 16 MiB below 2 GiB) while the broker copies closed segments every
     second: MB/s (the cost);
  3. once the copies caught up and local retention ran: the tiered topic's bytes on the broker's
     disk against what was written (bounded by local retention while the total grows);
  4. a catch-up consumer (ConsumerPerformance, from offset 0) of each topic: MB/s from local
     disk, and from remote storage (everything below the local part).

A benchmark, not a test: it prints a table (and writes report.md/report.json to --out).
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench  # noqa: E402  (the main benchmark's launchers and tool wrappers)
from bench import GIB, MIB, BenchKafka, BenchSkein, consumer_perf, create_topics, producer_perf  # noqa: E402

KAFKA_VERSION = bench.kafka_version()
RECORD = 1024
TEST_JAR_DIR = bench.E2E_DIR / ".cache" / f"kafka-{KAFKA_VERSION}-tiered"


def local_tiered_storage_jar() -> Path:
    """Kafka's `kafka-storage` test jar (LocalTieredStorage), fetched once from Maven Central."""
    jar = TEST_JAR_DIR / f"kafka-storage-{KAFKA_VERSION}-test.jar"
    if not jar.exists():
        TEST_JAR_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mvn", "-B", "-q", "dependency:copy",
                        f"-Dartifact=org.apache.kafka:kafka-storage:{KAFKA_VERSION}:jar:test",
                        f"-DoutputDirectory={TEST_JAR_DIR}"], check=True, timeout=600)
    return jar


def tiered_settings(kind: str, store: Path) -> dict[str, str]:
    common = {"remote.log.storage.system.enable": "true",
              "remote.log.manager.task.interval.ms": "1000",
              "log.retention.check.interval.ms": "1000",
              "log.segment.delete.delay.ms": "0"}
    if kind == "skein":
        return {**common, "rsm.config.storage.url": str(store)}
    return {**common,
            "remote.log.storage.manager.class.name":
                "org.apache.kafka.server.log.remote.storage.LocalTieredStorage",
            "remote.log.storage.manager.class.path": str(local_tiered_storage_jar()),
            "rsm.config.dir": str(store), "rsm.config.delete.enable": "true",
            "remote.log.metadata.manager.listener.name": "PLAINTEXT",
            "rlmm.config.remote.log.metadata.topic.replication.factor": "1"}


def dir_bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) if d.exists() else 0


def shape(gib: float) -> tuple[int, int]:
    """(segment.bytes, local.retention.bytes): 64 MiB and 256 MiB, smaller for a small run so
    that most of the data still leaves the disk."""
    segment = 64 * MIB if gib >= 2 else 16 * MIB
    return segment, 4 * segment


def run_system(kind: str, work: Path, gib: float, log: Path) -> dict:
    SEGMENT, LOCAL_RETENTION = shape(gib)  # noqa: N806
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    store = work / "store"
    store.mkdir()
    b = BenchKafka(work / "broker") if kind == "kafka" else BenchSkein(work / "broker")
    b.overrides.update(tiered_settings(kind, store))
    n = int(gib * GIB / RECORD)
    out: dict = {"records": n, "bytes": n * RECORD}
    b.start()
    try:
        topic_cfg = {"segment.bytes": str(SEGMENT)}
        create_topics(b.bootstrap, [
            ("plain", 1, 1, topic_cfg),
            ("tiered", 1, 1, {**topic_cfg, "remote.storage.enable": "true",
                              "local.retention.bytes": str(LOCAL_RETENTION)})])
        out["produce_local"] = producer_perf(b.bootstrap, "plain", n, RECORD, "1", log)
        out["produce_tiered"] = producer_perf(b.bootstrap, "tiered", n, RECORD, "1", log)
        # Copies and local retention catch up: the local log shrinks to about local.retention.
        data = b.data_dir if hasattr(b, "data_dir") else work / "broker"
        local = lambda: sum(dir_bytes(d) for d in data.rglob("tiered-0") if d.is_dir())  # noqa: E731
        t0 = time.monotonic()
        while local() > LOCAL_RETENTION + 2 * SEGMENT and time.monotonic() - t0 < 600:
            time.sleep(1)
        out["tier_catch_up_s"] = round(time.monotonic() - t0, 1)
        out["disk_tiered_bytes"] = local()
        out["disk_plain_bytes"] = sum(dir_bytes(d) for d in data.rglob("plain-0") if d.is_dir())
        out["store_bytes"] = dir_bytes(store)
        out["consume_local"] = consumer_perf(b.bootstrap, "plain", n, log, timeout_ms=120000)
        out["consume_remote"] = consumer_perf(b.bootstrap, "tiered", n, log, timeout_ms=120000)
    finally:
        b.stop(120)
        shutil.rmtree(work, ignore_errors=True)  # GiBs: the next system needs the room
    return out


def render(results: dict, gib: float) -> str:
    systems = [s for s in ("kafka", "skein") if s in results]
    label = {"kafka": f"Kafka {KAFKA_VERSION} (LocalTieredStorage)", "skein": "Skein"}
    rows = [
        ("produce, no tiering (MB/s)", lambda r: r["produce_local"]["mb_per_s"]),
        ("produce while copying to the store (MB/s)", lambda r: r["produce_tiered"]["mb_per_s"]),
        ("catch-up read, local disk (MB/s)", lambda r: r["consume_local"]["mb_per_s"]),
        ("catch-up read, from the store (MB/s)", lambda r: r["consume_remote"]["mb_per_s"]),
        ("tiered topic on the broker's disk (MiB)", lambda r: r["disk_tiered_bytes"] / MIB),
        ("same topic without tiering (MiB)", lambda r: r["disk_plain_bytes"] / MIB),
        ("in the store (MiB)", lambda r: r["store_bytes"] / MIB),
        ("copies caught up after the produce (s)", lambda r: r["tier_catch_up_s"]),
    ]
    head = "| row | " + " | ".join(label[s] for s in systems) + (" | Skein / Kafka |" if len(systems) == 2 else " |")
    segment, local = shape(gib)
    out = [f"{gib:g} GiB of 1 KiB records, one partition, one broker; {segment // MIB} MiB segments; "
           f"local.retention.bytes {local // MIB} MiB; stores are directories on the logs' disk.", "",
           head, "|" + " --- |" * (len(systems) + 1 + (len(systems) == 2))]
    for name, fn in rows:
        vals = []
        for s in systems:
            try:
                vals.append(fn(results[s]))
            except (KeyError, TypeError):
                vals.append(None)
        cells = [f"{v:.1f}" if isinstance(v, float) else ("n/a" if v is None else str(v)) for v in vals]
        ratio = ""
        if len(systems) == 2:
            ratio = f" {vals[1] / vals[0]:.2f} |" if all(isinstance(v, (int, float)) and v for v in vals) else " |"
        out.append(f"| {name} | " + " | ".join(cells) + " |" + ratio)
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=5.0)
    ap.add_argument("--quick", action="store_true", help="0.25 GiB")
    ap.add_argument("--systems", default="kafka,skein")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    gib = 0.25 if a.quick else a.gib
    out = a.out or HERE / "results" / time.strftime("tiered-%Y%m%dT%H%M%SZ", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    log = out / "tools.log"
    results: dict = {}
    for kind in a.systems.split(","):
        print(f"== {kind}: {gib:g} GiB", flush=True)
        try:
            results[kind] = run_system(kind, bench.REPO_DIR / "e2e" / "bench" / ".work" / f"tiered-{kind}", gib, log)
        except Exception as e:  # noqa: BLE001 - reported in the table as n/a
            results[kind] = {"error": repr(e)}
            print(f"{kind} failed: {e!r}", flush=True)
    md = render(results, gib)
    (out / "report.md").write_text(md)
    (out / "report.json").write_text(json.dumps(results, indent=1))
    print(md)
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
