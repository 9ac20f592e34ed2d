"""The benchmark's native-client rows: librdkafka's own `rdkafka_performance` (C), built from the
librdkafka source inside the rdkafka-sys crate by native/build-rdkafka-perf.sh.

Kafka's Java perf tools need 2-7 CPU seconds per GiB themselves, so on two cores the Java rows
measure the client more than the broker. A native client leaves the brokers most of the machine:
these rows show what each broker does with it, and every row reports the brokers' CPU seconds
per GiB moved (the figure a broker controls, whatever the client).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
GIB = 1 << 30

# "% 200000 messages produced (204800000 bytes), 200000 delivered (offset 0, 0 failed) in 1234ms:
#  162074 msgs/s and 165.96 MB/s, 0 produce failures, 0 in queue, no compression"
PRODUCED = re.compile(r"% (\d+) messages produced \((\d+) bytes\), (\d+) delivered \(offset \d+, (\d+) failed\) "
                      r"in (\d+)ms: (\d+) msgs/s and ([\d.]+) MB/s, (\d+) produce failures")
# "% 200000 messages (204800000 bytes) consumed in 1234ms: 162074 msgs/s (165.96 MB/s)"
CONSUMED = re.compile(r"% (\d+) messages \((\d+) bytes\) consumed in (\d+)ms: (\d+) msgs/s \(([\d.]+) MB/s\)")


def build_tool() -> Path:
    """Path of rdkafka_performance, built on first use (about a minute)."""
    out = subprocess.run([str(BENCH_DIR / "native" / "build-rdkafka-perf.sh")], check=True,
                         capture_output=True, text=True, timeout=1200)
    return Path(out.stdout.strip().splitlines()[-1])


def _run(tool: Path, args: list[str], log: Path, run_measured, timeout: float = 1800):
    cmd = [str(tool), *args]
    with open(log, "a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
    r, cpu = run_measured(cmd, timeout)
    with open(log, "a") as f:
        f.write(r.stdout[-4000:] + r.stderr[-4000:] + f"\n(client CPU {cpu:.1f} s)\n")
    if r.returncode != 0:
        raise RuntimeError(f"rdkafka_performance failed ({r.returncode}): {(r.stderr or r.stdout)[-2000:]}")
    return r.stdout + r.stderr, cpu


def produce(tool: Path, bootstrap: str, topic: str, n: int, size: int, acks: str, log: Path, run_measured,
            extra: tuple[str, ...] = ()) -> dict:
    """`n` records of `size` bytes to random partitions of `topic`; fails unless all are delivered."""
    out, cpu = _run(tool, ["-P", "-t", topic, "-b", bootstrap, "-s", str(size), "-c", str(n), "-a", acks,
                           "-q", "-X", "linger.ms=5", *extra], log, run_measured)
    m = None
    for m in PRODUCED.finditer(out):
        pass
    if m is None:
        raise RuntimeError("rdkafka_performance printed no producer summary:\n" + out[-2000:])
    # "produce failures" are the tool's calls refused by a full local queue (it waits and
    # retries them); "failed" are deliveries the broker did not acknowledge.
    delivered, failed = int(m.group(3)), int(m.group(4))
    if delivered < n or failed:
        raise RuntimeError(f"rdkafka_performance delivered {delivered} of {n}, {failed} failed")
    return {"records": delivered, "bytes": int(m.group(2)), "ms": int(m.group(5)),
            "records_per_s": float(m.group(6)), "mb_per_s": mib_per_s(int(m.group(2)), int(m.group(5))),
            "queue_full_retries": int(m.group(8)), "client_cpu_s": cpu}


def consume(tool: Path, bootstrap: str, topic: str, n: int, log: Path, run_measured,
            partitions: int | None = None, group: str | None = None, extra: tuple[str, ...] = ()) -> dict:
    """Reads `n` records of `topic` from the start: the given partitions assigned, or as one member
    of `group`."""
    where = ["-G", group] if group else [a for p in range(partitions or 1) for a in ("-p", str(p))]
    out, cpu = _run(tool, ["-C", "-t", topic, "-b", bootstrap, "-c", str(n), "-o", "beginning", "-q",
                           "-X", "auto.offset.reset=earliest", *where, *extra], log, run_measured)
    m = None
    for m in CONSUMED.finditer(out):
        pass
    if m is None:
        raise RuntimeError("rdkafka_performance printed no consumer summary:\n" + out[-2000:])
    got = int(m.group(1))
    if got < n:
        raise RuntimeError(f"rdkafka_performance consumed {got} of {n}")
    return {"records": got, "bytes": int(m.group(2)), "ms": int(m.group(3)),
            "mb_per_s": mib_per_s(int(m.group(2)), int(m.group(3))), "client_cpu_s": cpu}


def _own_client(tool: Path, name: str, args: list[str], log: Path, run_measured, timeout: float = 900) -> dict:
    """Runs one of our clients built beside rdkafka_performance (fixed_rate, group_read): its
    one JSON line, with the client's CPU seconds."""
    out, cpu = _run(tool.parent / name, args, log, run_measured, timeout)
    line = next((ln for ln in reversed(out.splitlines()) if ln.startswith("{")), None)
    if line is None:
        raise RuntimeError(f"{name} printed no result:\n" + out[-2000:])
    r = json.loads(line)
    r["client_cpu_s"] = cpu
    return r


def fixed_rate(tool: Path, bootstrap: str, topic: str, rate: float, seconds: float, size: int, log: Path,
               run_measured) -> dict:
    """acks=all records of `size` bytes at `rate` records/s for `seconds` (fixed_rate.c: latency from
    each record's due time to its acknowledgement; the first 10 % are a warm-up); fails unless
    every record is delivered."""
    n = max(1000, int(rate * seconds))
    # librdkafka's defaults otherwise (linger.ms 5): what an application gets. With linger.ms=0 and
    # its unbounded in-flight requests, tiny acks=all requests queue up on both systems.
    r = _own_client(tool, "fixed_rate", [bootstrap, topic, f"{rate:.0f}", str(n), str(size), "acks=all"],
                    log, run_measured)
    r["bytes"] = n * size
    return r


def group_read(tool: Path, bootstrap: str, topic: str, group: str, members: int, records: int, size: int,
               log: Path, run_measured) -> dict:
    """`members` consumers in one group read `records` records of `size` bytes to the end
    (group_read.c). Throughput is counted from the first record read to the last (joins and the
    rebalances of late members before the first record are the separate `first_record_ms`)."""
    r = _own_client(tool, "group_read", [bootstrap, topic, group, str(members), str(records)], log, run_measured)
    r["bytes"] = records * size
    reading_ms = max(r["ms"] - r["first_record_ms"], 1)
    r["mb_per_s"] = r["bytes"] * 1000 / reading_ms / (1 << 20)
    return r


def mib_per_s(nbytes: int, ms: int) -> float:
    return nbytes * 1000 / max(ms, 1) / (1 << 20)


def cpu_per_gib(m: dict, key: str) -> float:
    """The brokers' CPU seconds per GiB the workload `key` moved."""
    return m["cpu_s"][key]["broker"] / (m[key]["bytes"] / GIB)


def rows() -> list[tuple]:
    """Report rows (bench.ROWS format): throughput and the brokers' CPU per GiB of each workload."""
    out = [
        ("native_produce_p4", "native: produce 1 KiB, acks=1, RF=1, 4 partitions", "MiB/s", "higher",
         lambda m: m["native_produce_p4"]["mb_per_s"], 2.5),
        ("native_consume_p4", "native: consume from start (assign), 4 partitions", "MiB/s", "higher",
         lambda m: m["native_consume_p4"]["mb_per_s"], 1.5),
        ("native_produce_small", "native: produce 100 B, acks=1, RF=1, 8 partitions", "MiB/s", "higher",
         lambda m: m["native_produce_small"]["mb_per_s"], 2.5),
        ("native_produce_large", "native: produce 1 MiB records, acks=1, RF=1, 4 partitions", "MiB/s",
         "higher", lambda m: m["native_produce_large"]["mb_per_s"], 2.5),
        ("native_consume_large", "native: consume 1 MiB records (assign), 4 partitions", "MiB/s", "higher",
         lambda m: m["native_consume_large"]["mb_per_s"], 1.5),
        ("native_produce_p1000", "native: produce 1 KiB, acks=1, RF=1, 1000 partitions", "MiB/s", "higher",
         lambda m: m["native_produce_p1000"]["mb_per_s"], 2.5),
        ("native_consume_p1000", "native: consume from start (group), 1000 partitions", "MiB/s", "higher",
         lambda m: m["native_consume_p1000"]["mb_per_s"], 1.5),
        ("native_group16", "native: 16 consumers in one group, 32 partitions, from the first record", "MiB/s",
         "higher", lambda m: m["native_group16"]["mb_per_s"], 1.5),
        ("native_produce_rf3", "native: produce 1 KiB, acks=all, RF=3, min ISR 2, 8 partitions", "MiB/s",
         "higher", lambda m: m["native_produce_rf3"]["mb_per_s"], 2.5),
    ]
    for key, label, _, _, _, _ in list(out):
        target = 0.25 if key.startswith(("native_produce", "native_consume")) else None
        out.append((f"cpu_{key}", "broker CPU per GiB, " + label.split(": ", 1)[1], "CPU s/GiB", "lower",
                    (lambda k: lambda m: cpu_per_gib(m, k))(key), target))
    out.append(("native_group16_join", "native: 16 consumers in one group, subscribe to the first record", "ms",
                "lower", lambda m: m["native_group16"]["first_record_ms"], None))
    lat = "native: fixed rate at 50% of Kafka's native RF=3 peak, 1 KiB, acks=all, RF=3, min ISR 2"
    for q, name, target in (("p50_ms", "p50", None), ("p99_ms", "p99", 0.33), ("p999_ms", "p99.9", 0.5)):
        out.append((f"native_latency_rf3_{name}", f"{lat}: {name} latency", "ms", "lower",
                    (lambda k: lambda m: m["native_latency_rf3"][k])(q), target))
    return out


def run_single(tool: Path, bs: str, sizes, attempt, run_measured, log: Path) -> None:
    """The single-broker native rows, each through bench.run_single's `attempt` (which watches the
    broker and records its CPU seconds)."""
    n4, n_small, n_large, n1000 = sizes.native_p4, sizes.native_small, sizes.native_large, sizes.native_p1000
    attempt("native_produce_p4", lambda: produce(tool, bs, "n4", n4, 1024, "1", log, run_measured))
    attempt("native_consume_p4", lambda: consume(tool, bs, "n4", n4, log, run_measured, partitions=4))
    attempt("native_produce_small",
            lambda: produce(tool, bs, "nsmall", n_small, 100, "1", log, run_measured))
    big = ("-X", "message.max.bytes=2097152")
    attempt("native_produce_large",
            lambda: produce(tool, bs, "nlarge", n_large, 1 << 20, "1", log, run_measured, big))
    attempt("native_consume_large", lambda: consume(tool, bs, "nlarge", n_large, log, run_measured,
                                                    partitions=4, extra=("-X", "fetch.max.bytes=52428800")))
    attempt("native_produce_p1000", lambda: produce(tool, bs, "n1000", n1000, 1024, "1", log, run_measured))
    attempt("native_consume_p1000", lambda: consume(tool, bs, "n1000", n1000, log, run_measured,
                                                    group="native-1000"), needs_groups=True)
    n16 = sizes.native_group16
    attempt("native_group16_fill", lambda: produce(tool, bs, "n32", n16, 1024, "1", log, run_measured))
    attempt("native_group16", lambda: group_read(tool, bs, "n32", "native-16", 16, n16, 1024, log, run_measured),
            needs_groups=True)


TOPICS = [("n4", 4, 1, {}), ("nsmall", 8, 1, {}), ("nlarge", 4, 1, {"max.message.bytes": "2097152"}),
          ("n1000", 1000, 1, {}), ("n32", 32, 1, {})]
