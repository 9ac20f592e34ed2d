#!/usr/bin/env python3
"""Profiles skein-broker (or Kafka) under one benchmark workload with `perf`.

    e2e/.venv/bin/python e2e/bench/profile.py produce|consume [--records N] [--size BYTES]
        [--system skein|kafka] [--native]

Starts a fresh broker, creates an 8-partition topic, (for consume: fills it first), then runs
the workload (Kafka's Java perf tools, or librdkafka's rdkafka_performance with --native) while `perf record -e cpu-clock --call-graph dwarf` samples the broker process.
Writes perf.data, a flat profile (perf-flat.txt) and a caller profile (perf-children.txt)
into e2e/bench/results/profile-<workload>-<time>/. Software cpu-clock sampling works where
hardware counters are not exposed (VMs).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402
import native  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=["produce", "consume"])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=1024, help="record size in bytes")
    ap.add_argument("--native", action="store_true", help="librdkafka's rdkafka_performance as the client")
    ap.add_argument("--system", default="skein", choices=["skein", "kafka"])
    ap.add_argument("--callgraph", default="dwarf,16384", help="perf --call-graph mode ('' for flat)")
    args = ap.parse_args()

    out = bench.BENCH_DIR / "results" / f"profile-{args.workload}-{time.strftime('%Y%m%dT%H%M%S')}"
    out.mkdir(parents=True)
    work = bench.BENCH_DIR / ".work" / "profile"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log = out / "tools.log"
    tool = native.build_tool() if args.native else None
    classes = None if args.native else bench.compile_bench_client(bench.BENCH_DIR / ".work")
    big = {"max.message.bytes": str(2 * args.size)} if args.size > 500_000 else {}
    big_client = ("-X", f"message.max.bytes={2 * args.size}", "-X", "fetch.max.bytes=52428800") if big else ()

    def produce():
        if tool:
            return native.produce(tool, s.bootstrap, "p8", args.records, args.size, "1", log, bench.run_measured,
                                  big_client[:2])
        return bench.producer_perf(s.bootstrap, "p8", args.records, args.size, "1", log)

    def consume():
        if tool:
            return native.consume(tool, s.bootstrap, "p8", args.records, log, bench.run_measured, partitions=8,
                                  extra=big_client[2:])
        return bench.bench_client(classes, ["consume", s.bootstrap, "p8", str(args.records), "20000"], log)

    s = bench.Single(args.system, work / args.system)
    s.start()
    try:
        bench.create_topics(s.bootstrap, [("p8", 8, 1, big)])
        if args.workload == "consume":
            produce()
        perf = ["perf", "record", "-e", "cpu-clock", "-F", "499", "-o", str(out / "perf.data"),
                "-p", str(s.pids()[0])]
        if args.callgraph:
            perf[2:2] = ["--call-graph", args.callgraph]
        rec = subprocess.Popen(perf, stdout=subprocess.DEVNULL, stderr=open(out / "perf.log", "w"))
        time.sleep(1)
        with bench.Watch(s.pids()) as w:
            r = produce() if args.workload == "produce" else consume()
        rec.send_signal(signal.SIGINT)
        rec.wait(120)
        gib = args.records * args.size / bench.GIB
        summary = f"{args.system} {args.workload}: {r}; broker CPU {w.cpu:.1f} s = {w.cpu / gib:.1f} s/GiB; load {bench.load_avg()}"
        print(summary)
        (out / "summary.txt").write_text(summary + "\n")
    finally:
        s.stop()
    report = ["perf", "report", "-i", str(out / "perf.data"), "--stdio", "--percent-limit", "0.7"]
    with open(out / "perf-flat.txt", "w") as f:
        subprocess.run(report + ["--no-children", "--sort", "symbol", "-g", "none"], stdout=f,
                       stderr=subprocess.DEVNULL)
    if args.callgraph:
        with open(out / "perf-children.txt", "w") as f:
            subprocess.run(report + ["--children", "--sort", "symbol", "-g", "none"], stdout=f,
                           stderr=subprocess.DEVNULL)
        flame_graph(out)
    shutil.rmtree(work, ignore_errors=True)
    print(f"profile: {out}")


def flame_graph(out: Path) -> None:
    """flame.svg from perf.data with inferno (`cargo install inferno`: its collapse-perf and
    flamegraph), when those are on PATH; the text profiles are written either way."""
    collapse, render = shutil.which("inferno-collapse-perf"), shutil.which("inferno-flamegraph")
    if not (collapse and render):
        print("no flame graph: `cargo install inferno` puts inferno-collapse-perf and inferno-flamegraph on PATH")
        return
    script = subprocess.run(["perf", "script", "-i", str(out / "perf.data")], capture_output=True, check=True)
    folded = subprocess.run([collapse], input=script.stdout, capture_output=True, check=True).stdout
    (out / "perf.folded").write_bytes(folded)
    svg = subprocess.run([render, "--title", out.name], input=folded, capture_output=True, check=True).stdout
    (out / "flame.svg").write_bytes(svg)


if __name__ == "__main__":
    main()
