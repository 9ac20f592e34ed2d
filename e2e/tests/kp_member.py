"""One kafka-python consumer-group member, run as a subprocess (so the test can SIGKILL it):

    python kp_member.py --bootstrap B --topic T --group G --out FILE --assignor range|roundrobin|cooperative-sticky
                        [--stop-file F] [--timeout-ms 120000] [--session-timeout-ms 6000]

Same event log as the Java driver's group-consume mode (one JSON line per event, flushed at once):
    {"t","ev":"assigned","parts"}  {"t","ev":"rec","p","o","i"}  {"t","ev":"commit","offsets"}
    {"t","ev":"commit_failed","error"}
Each poll's records are processed (logged) first, then their offsets committed synchronously.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    for a in ("bootstrap", "topic", "group", "out"):
        ap.add_argument(f"--{a}", required=True)
    ap.add_argument("--assignor", default="range")
    ap.add_argument("--stop-file")
    ap.add_argument("--timeout-ms", type=int, default=120000)
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    args = ap.parse_args()

    # The coordinator's join/sync/heartbeat steps go to stderr, which a failing
    # test prints (the tail of it): enough to tell a lost response from a
    # client that never sent its request.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("kafka.coordinator").setLevel(logging.DEBUG)

    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.structs import OffsetAndMetadata, TopicPartition

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                "cooperative-sticky": CooperativeStickyAssignor}[args.assignor]
    c = KafkaConsumer(bootstrap_servers=args.bootstrap, group_id=args.group, enable_auto_commit=False,
                      auto_offset_reset="earliest", partition_assignment_strategy=[assignor],
                      session_timeout_ms=args.session_timeout_ms, heartbeat_interval_ms=1000,
                      max_poll_records=100, request_timeout_ms=30000)
    out = open(args.out, "w")

    def ev(**kw):
        out.write(json.dumps({"t": int(time.time() * 1000), **kw}) + "\n")
        out.flush()

    c.subscribe([args.topic])
    deadline = time.monotonic() + args.timeout_ms / 1000
    last = None
    count = failures = 0
    try:
        while True:
            if args.stop_file and os.path.exists(args.stop_file):
                break
            if time.monotonic() > deadline:
                print(f"kp_member: timeout, {count} records", file=sys.stderr)
                break
            batches = c.poll(timeout_ms=200, max_records=100)
            now = sorted(tp.partition for tp in c.assignment())
            if now != last:
                last = now
                ev(ev="assigned", parts=now)
            commit = {}
            lines = []
            for tp, msgs in batches.items():
                for m in msgs:
                    v = m.value or b""
                    i = int(v[1:8]) if len(v) >= 9 and v[:1] == b"v" and v[8:9] == b"|" else None
                    lines.append(json.dumps({"t": int(time.time() * 1000), "ev": "rec", "p": m.partition,
                                             "o": m.offset, "i": i}))
                    commit[TopicPartition(tp.topic, tp.partition)] = OffsetAndMetadata(m.offset + 1, "", -1)
                    count += 1
            if not commit:
                continue
            out.write("\n".join(lines) + "\n")
            out.flush()
            try:
                c.commit(commit)
                ev(ev="commit", offsets={str(tp.partition): om.offset for tp, om in commit.items()})
            except Exception as e:  # noqa: BLE001 - a commit lost to a rebalance is allowed (at least once)
                failures += 1
                ev(ev="commit_failed", error=repr(e))
    finally:
        c.close()
        out.close()
    print(json.dumps({"consumed": count, "commit_failures": failures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
