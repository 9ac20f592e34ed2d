"""Datasets, verification and client drivers shared by the e2e tests.

A record read back by any client is normalised to a dict
    {"p": partition, "o": offset, "k": key hex|None, "v": value hex|None,
     "h": [[name, value hex], ...], "ts": timestamp ms}
and compared with the dataset that was produced.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer

from brokers import E2E_DIR, kafka_classpath

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
KAFKAJS_CODECS = ["none", "gzip", "snappy", "lz4"]  # zstd: @kafkajs/zstd (cppzst) does not compile on Node 20
N_RECORDS = 10_000
PARTITIONS = 3


# ------------------------------------------------------------------------------------------
# datasets


@dataclass
class Rec:
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    ts: int | None = None


def dataset(n: int = N_RECORDS, *, seed: int = 1, ascii_only: bool = False, headers: bool = True,
            ts_base: int | None = None, ts_step: int = 1, tag: str = "") -> list[Rec]:
    """Deterministic keyed records. Keys repeat (n/10 distinct keys) so key->partition stickiness
    is checked; values are unique (they start with the record index) and mix compressible text
    with pseudo-random bytes (binary unless ascii_only)."""
    rnd = random.Random(seed)
    letters = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:"
    nkeys = max(1, n // 10)
    out = []
    for i in range(n):
        key = f"key-{tag}{i % nkeys:05d}".encode()
        body_len = rnd.randrange(0, 300)
        if ascii_only:
            noise = bytes(rnd.choice(letters) for _ in range(body_len // 3))
        else:
            noise = bytes(rnd.randrange(256) for _ in range(body_len // 3))
        value = f"v{i:07d}|".encode() + b"the quick brown fox " * (body_len // 40) + noise
        hdrs = []
        if headers:
            hdrs = [("idx", str(i).encode()), ("src", b"e2e" if ascii_only else bytes([0, 255, i % 256]))]
        ts = None if ts_base is None else ts_base + i * ts_step
        out.append(Rec(key, value, hdrs, ts))
    return out


def write_tsv(recs: list[Rec], path: Path) -> Path:
    """Input file for the Java and kafkajs drivers: keyHex \\t valueHex \\t name=hex;... \\t ts."""
    with open(path, "w") as f:
        for r in recs:
            h = ";".join(f"{k}={v.hex()}" for k, v in r.headers) or "-"
            f.write(f"{r.key.hex()}\t{r.value.hex()}\t{h}\t{r.ts if r.ts is not None else '-'}\n")
    return path


def index_of_value(v_hex: str) -> int:
    v = bytes.fromhex(v_hex)
    assert v[:1] == b"v" and v[8:9] == b"|", f"unexpected value {v[:40]!r}"
    return int(v[1:8])


# ------------------------------------------------------------------------------------------
# verification


def verify(recs: list[Rec], got: list[dict], *, partitions: int = PARTITIONS, check_headers: bool = True,
           expect_headers: list[tuple[str, bytes]] | None = None, check_ts: bool = True,
           acked: dict[int, tuple[int, int]] | None = None, what: str = "") -> None:
    """Byte-identical keys/values (+headers, +timestamps) for every produced record, exactly once,
    in produce order per partition, contiguous offsets from 0, keys sticky to one partition."""
    pfx = f"[{what}] " if what else ""
    problems: list[str] = []
    seen: dict[int, dict] = {}
    for g in got:
        i = index_of_value(g["v"])
        if i in seen:
            problems.append(f"record {i} consumed twice: {seen[i]['p']}/{seen[i]['o']} and {g['p']}/{g['o']}")
        seen[i] = g
    missing = [i for i in range(len(recs)) if i not in seen]
    if missing:
        problems.append(f"{len(missing)} of {len(recs)} records missing, e.g. indexes {missing[:10]}")
    extra = [i for i in seen if i >= len(recs)]
    if extra:
        problems.append(f"unexpected records {extra[:10]}")
    key_part: dict[bytes, int] = {}
    for i, g in sorted(seen.items()):
        if i >= len(recs):
            continue
        r = recs[i]
        if g["k"] != r.key.hex():
            problems.append(f"record {i}: key {g['k']} != {r.key.hex()}")
        if g["v"] != r.value.hex():
            problems.append(f"record {i}: value differs (got {len(g['v']) // 2} bytes, want {len(r.value)})")
        if not 0 <= g["p"] < partitions:
            problems.append(f"record {i}: partition {g['p']} out of range")
        kp = key_part.setdefault(r.key, g["p"])
        if kp != g["p"]:
            problems.append(f"key {r.key!r} in partitions {kp} and {g['p']}")
        want_h = expect_headers if expect_headers is not None else r.headers
        if check_headers:
            got_h = [(h[0], bytes.fromhex(h[1]) if h[1] is not None else None) for h in g["h"]]
            if got_h != list(want_h):
                problems.append(f"record {i}: headers {got_h} != {want_h}")
        if check_ts and r.ts is not None and g["ts"] != r.ts:
            problems.append(f"record {i}: timestamp {g['ts']} != {r.ts}")
        if acked is not None and i in acked and acked[i] != (g["p"], g["o"]):
            problems.append(f"record {i}: acknowledged at {acked[i]} but read at {(g['p'], g['o'])}")
    by_part: dict[int, list[dict]] = {}
    for g in got:
        by_part.setdefault(g["p"], []).append(g)
    for p, lst in by_part.items():
        offs = [g["o"] for g in lst]
        if offs != list(range(len(lst))):
            bad = next(k for k, o in enumerate(offs) if o != k)
            problems.append(f"partition {p}: offsets not contiguous from 0 (position {bad} has offset "
                            f"{offs[bad]}; first offsets {offs[:5]})")
        idx = [index_of_value(g["v"]) for g in lst]
        if idx != sorted(idx):
            bad = next(k for k in range(1, len(idx)) if idx[k] < idx[k - 1])
            problems.append(f"partition {p}: produce order broken at offset {lst[bad]['o']} "
                            f"(record {idx[bad]} after {idx[bad - 1]})")
    if problems:
        raise AssertionError(pfx + f"{len(problems)} problem(s) with {len(got)} consumed records:\n  "
                             + "\n  ".join(problems[:25]))


def high_watermark(consumer, topic: str, partition: int, timeout: float = 30.0) -> int:
    """The partition's high watermark, asked again while the answer is retriable: a newly elected
    leader whose high watermark still lags the start of its epoch answers OFFSET_NOT_AVAILABLE
    until its followers have fetched (as Kafka does), which librdkafka raises without retrying (and
    without marking any error of this call retriable)."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition
    RETRIABLE_OFFSET_ERRORS = (KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.LEADER_NOT_AVAILABLE,
                               KafkaError.NOT_LEADER_FOR_PARTITION)
    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
        except KafkaException as e:
            if e.args[0].code() not in RETRIABLE_OFFSET_ERRORS or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def wait_until(pred, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            v = pred()
            if v:
                return v
        except Exception as e:  # noqa: BLE001
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}" + (f" (last error: {last!r})" if last else ""))


# ------------------------------------------------------------------------------------------
# subprocesses


def run(cmd: list[str], *, timeout: float = 120, input: bytes | None = None, check: bool = True,
        what: str = "") -> subprocess.CompletedProcess:
    """Run a client subprocess with a hard timeout; on failure raise with its stderr/stdout."""
    try:
        r = subprocess.run(cmd, input=input, capture_output=True, timeout=timeout, stdin=None if input is not None
                           else subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(
            f"{what or cmd[0]}: timed out after {timeout}s: {' '.join(map(str, cmd))}\n"
            f"--- stdout ---\n{_tail(e.stdout)}\n--- stderr ---\n{_tail(e.stderr)}") from None
    if check and r.returncode != 0:
        raise AssertionError(
            f"{what or cmd[0]}: exit code {r.returncode}: {' '.join(map(str, cmd))}\n"
            f"--- stdout ---\n{_tail(r.stdout)}\n--- stderr ---\n{_tail(r.stderr)}")
    return r


def _tail(b, n: int = 60) -> str:
    if b is None:
        return ""
    s = b.decode(errors="replace") if isinstance(b, bytes) else b
    return "\n".join(s.splitlines()[-n:])


def last_json(r: subprocess.CompletedProcess) -> dict:
    lines = [ln for ln in r.stdout.decode(errors="replace").splitlines() if ln.startswith("{")]
    assert lines, f"no JSON on stdout: {r.stdout[-2000:]!r} stderr: {r.stderr[-2000:]!r}"
    return json.loads(lines[-1])


def read_jsonl(path: Path) -> list[dict]:
    with open(path) as f:
        return [json.loads(ln) for ln in f if ln.strip()]


# ------------------------------------------------------------------------------------------
# Java kafka-clients driver (e2e/java)


def java_cmd(*args: str) -> list[str]:
    cp_file = E2E_DIR / "java" / "target" / "classpath.txt"
    jar = E2E_DIR / "java" / "target" / "e2e-java-client-1.jar"
    if not cp_file.exists() or not jar.exists():
        raise AssertionError("Java driver not built: run e2e/setup.sh")
    cp = f"{jar}:{cp_file.read_text().strip()}"
    return ["java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, "skein.e2e.Client", *args]


def java(cmd: str, bootstrap: str, timeout: float = 180, **opts) -> dict:
    args = [cmd, "--bootstrap", bootstrap]
    for k, v in opts.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    return last_json(run(java_cmd(*args), timeout=timeout, what=f"java {cmd}"))


# ------------------------------------------------------------------------------------------
# franz-go driver (e2e/go, built by e2e/setup.sh)


def franz(cmd: str, bootstrap: str, timeout: float = 180, **opts) -> dict:
    args = [str(E2E_DIR / "go" / "bin" / "franz"), cmd, "--bootstrap", bootstrap]
    for k, v in opts.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    return last_json(run(args, timeout=timeout, what=f"franz-go {cmd}"))


# ------------------------------------------------------------------------------------------
# kafkajs driver (e2e/js)


def js(cmd: str, bootstrap: str, timeout: float = 180, **opts) -> dict:
    script = E2E_DIR / "js" / "client.js"
    if not (E2E_DIR / "js" / "node_modules" / "kafkajs").is_dir():
        raise AssertionError("kafkajs not installed: run e2e/setup.sh")
    args = ["node", str(script), cmd, "--bootstrap", bootstrap]
    for k, v in opts.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    return last_json(run(args, timeout=timeout, what=f"kafkajs {cmd}"))


# ------------------------------------------------------------------------------------------
# Apache Kafka CLI tools (org.apache.kafka.tools.*)


def kafka_tool(cls: str, *args: str, timeout: float = 120, input: bytes | None = None,
               check: bool = True, jvm_args: list[str] | None = None) -> subprocess.CompletedProcess:
    cmd = ["java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
           "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", *(jvm_args or []), "-cp", kafka_classpath(), cls, *args]
    return run(cmd, timeout=timeout, input=input, check=check, what=cls.rsplit(".", 1)[-1])


# ------------------------------------------------------------------------------------------
# kcat


KCAT_FMT = "%p\\t%o\\t%T\\t%k\\t%s\\t%h\\n"


def kcat_produce(bootstrap: str, topic: str, recs: list[Rec], codec: str, header: tuple[str, str] | None,
                 timeout: float = 120) -> None:
    """kcat -P with keys (tab delimiter). Records must be ASCII without tabs/newlines."""
    data = b"".join(r.key + b"\t" + r.value + b"\n" for r in recs)
    cmd = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-X", "acks=all", "-X", "linger.ms=5"]
    if codec != "none":
        cmd += ["-z", codec]
    if header:
        cmd += ["-H", f"{header[0]}={header[1]}"]
    r = run(cmd, input=data, timeout=timeout, what="kcat -P")
    err = r.stderr.decode(errors="replace")
    assert "ERROR" not in err and "Failed" not in err, f"kcat -P reported errors:\n{_tail(err)}"


def kcat_consume(bootstrap: str, topic: str, partitions: int = PARTITIONS, timeout: float = 120) -> list[dict]:
    """kcat -C from the beginning of every partition to its end (-e), no consumer group."""
    out = []
    for p in range(partitions):
        r = run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", str(p), "-o", "beginning", "-e",
                 "-f", KCAT_FMT], timeout=timeout, what="kcat -C")
        for ln in r.stdout.split(b"\n"):
            if not ln:
                continue
            f = ln.split(b"\t")
            assert len(f) == 6, f"kcat line with {len(f)} fields: {ln[:200]!r}"
            hdrs = []
            if f[5]:
                for h in f[5].split(b","):
                    k, _, v = h.partition(b"=")
                    hdrs.append([k.decode(), v.hex()])
            out.append({"p": int(f[0]), "o": int(f[1]), "ts": int(f[2]), "k": f[3].hex(), "v": f[4].hex(),
                        "h": hdrs})
    return out


def kcat_query(bootstrap: str, topic: str, partition: int, ts: int) -> int:
    """kcat -Q (offsets for times); -1 = latest, -2 = earliest. Returns the offset (-1 when none)."""
    r = run(["kcat", "-Q", "-b", bootstrap, "-t", f"{topic}:{partition}:{ts}"], timeout=60, what="kcat -Q")
    for ln in r.stdout.decode().splitlines():
        # "topic [0] offset 51"
        if f"[{partition}]" in ln and "offset" in ln:
            return int(ln.rsplit("offset", 1)[1].strip())
    raise AssertionError(f"kcat -Q: unexpected output {r.stdout!r} {r.stderr!r}")


def kcat_topics(bootstrap: str) -> list[str]:
    r = run(["kcat", "-L", "-J", "-b", bootstrap], timeout=60, what="kcat -L")
    return [t["topic"] for t in json.loads(r.stdout)["topics"]]


# ------------------------------------------------------------------------------------------
# confluent-kafka with any security settings (TLS, SASL tests)


def produce_numbered(c: dict, topic: str, n: int, timeout: float = 30.0) -> list[str]:
    """Produces records value-0..value-(n-1) with confluent-kafka, idempotent acks=all, with the
    client settings `c` (security ones included); returns the delivery errors. A record that
    produce() itself refuses counts as one: once a Produce answer said the topic is not
    authorized, librdkafka refuses the topic's next records at once, and whether the first
    answer comes before the loop ends is a race."""
    errors: list[str] = []
    p = Producer({**c, "enable.idempotence": True, "acks": "all", "message.timeout.ms": int(timeout * 1000)})
    for i in range(n):
        try:
            p.produce(topic, key=str(i).encode(), value=f"value-{i}".encode(),
                      on_delivery=lambda err, msg: errors.append(str(err)) if err else None)
        except KafkaException as e:
            errors.append(str(e.args[0]))
        p.poll(0)
    left = p.flush(timeout + 10)
    if left:
        errors.append(f"{left} records not delivered")
    return errors


def consume_group(c: dict, topic: str, n: int, group: str, timeout: float = 60.0) -> list[bytes]:
    """Reads up to n values of `topic` as a member of `group` (confluent-kafka), commits, leaves."""
    cons = Consumer({**c, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    cons.subscribe([topic])
    got: list[bytes] = []
    deadline = time.time() + timeout
    try:
        while len(got) < n and time.time() < deadline:
            m = cons.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(m.value())
        cons.commit(asynchronous=False)
    finally:
        cons.close()
    return got
