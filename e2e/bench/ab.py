#!/usr/bin/env python3
"""Before/after comparison of two skein-broker binaries on the produce and consume workloads.

    e2e/.venv/bin/python e2e/bench/ab.py BEFORE_BIN AFTER_BIN [--reps 3] [--records 1000000]

Alternates the binaries (A B, B A, ...), each on a fresh data dir: produce 1 KiB records
into 8 partitions (ProducerPerformance, acks=1), then read them back (BenchClient consume).
Prints the median throughput and broker CPU seconds per GiB of each.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402


def one(binary: str, records: int, classes: Path, work: Path, log: Path) -> dict:
    os.environ["SKEIN_BROKER_BIN"] = binary
    shutil.rmtree(work, ignore_errors=True)
    s = bench.Single("skein", work)
    s.start()
    try:
        bench.create_topics(s.bootstrap, [("p8", 8, 1, {})])
        gib = records * 1024 / bench.GIB
        with bench.Watch(s.pids()) as w:
            p = bench.producer_perf(s.bootstrap, "p8", records, 1024, "1", log)
        prod_cpu = w.cpu / gib
        with bench.Watch(s.pids()) as w:
            c = bench.bench_client(classes, ["consume", s.bootstrap, "p8", str(records), "20000"], log)
        return {"produce_mib_s": p["mb_per_s"], "produce_cpu_s_gib": prod_cpu,
                "consume_mib_s": c["mb_per_s"], "consume_cpu_s_gib": w.cpu / gib,
                "peak_rss_mib": w.peak_rss / bench.MIB, "load": bench.load_avg()}
    finally:
        s.stop()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--records", type=int, default=1_000_000)
    args = ap.parse_args()
    work = bench.BENCH_DIR / ".work" / "ab"
    classes = bench.compile_bench_client(bench.BENCH_DIR / ".work")
    log = bench.BENCH_DIR / ".work" / "ab-tools.log"
    runs = {"before": [], "after": []}
    for rep in range(args.reps):
        order = ["before", "after"] if rep % 2 == 0 else ["after", "before"]
        for which in order:
            r = one(getattr(args, which), args.records, classes, work, log)
            runs[which].append(r)
            print(which, json.dumps(r), flush=True)
    print(f"\nmedian of {args.reps}, {args.records} x 1 KiB records, 8 partitions")
    print(f"{'metric':22} {'before':>10} {'after':>10} {'after/before':>13}")
    for k in ("produce_mib_s", "produce_cpu_s_gib", "consume_mib_s", "consume_cpu_s_gib", "peak_rss_mib"):
        b = statistics.median(r[k] for r in runs["before"])
        a = statistics.median(r[k] for r in runs["after"])
        print(f"{k:22} {b:10.2f} {a:10.2f} {a / b:12.2f}x")


if __name__ == "__main__":
    main()
