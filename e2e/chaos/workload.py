"""The clients of a chaos run, each a process of its own inside the clients' network namespace
(chaos.py starts them with `ip netns exec`). They only write logs; checker.py judges.

    workload.py create-topic BOOTSTRAP TOPIC PARTITIONS KEY=VALUE...
    workload.py producer  --id N ...   idempotent acks=all confluent-kafka producer, values "pN-SEQ";
                                       --mode txn: transactional (several records to several
                                       partitions per transaction, 1 in 5 aborted)
    workload.py consumer  --id N ...   read_committed; a member of the consumer group (--consume
                                       subscribe) or a consumer of its own share of the partitions
                                       (--consume assign: p % members == id - 1) committing to the
                                       group's offsets; commits what it processed
    workload.py monitor   ...          metadata, group offsets and end offsets, polled
    workload.py dump      ...          the whole topic, read back without a group

Log lines (space separated, times are time.time()):
    producer-N.log  A seq partition offset t_ack | E seq partition error-name t | F error-name t
                    (fatal: a new producer instance follows, from seq next=N) | S sent acked t (final)
                    --mode txn also: B txn t seq:partition,... (a transaction begins, with its
                    writes) | O txn committed|aborted|unknown t_end_called t_done [error]
    consumer-N.log  P t n (a consume() call returned n records, the next n M lines) |
                    M partition offset value | C t partition offset (a commit acknowledged) |
                    X t error | R t assigned|revoked partitions...
    monitor.log     T t partition leader isr(comma) | B t brokers(comma) | G t partition offset |
                    H t partition high-watermark | X t error
    state.json      the monitor's latest view, for the nemesis and the final phase
    dump.log        partition offset value, in offset order per partition
A process stops when the file named by --stop appears. Every loop is bounded by --max-seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path


def now() -> float:
    return time.time()


class Log:
    """A line log flushed at most every 0.5 s (and on close). A daemon thread
    flushes too, so lines written just before a client hangs inside
    librdkafka (which releases the GIL) reach the file before the harness
    kills it, and the checker sees every record the client really took."""

    def __init__(self, path: str):
        self.f = open(path, "a", buffering=1 << 16)
        self.last = 0.0
        threading.Thread(target=self._flusher, daemon=True).start()

    def _flusher(self):
        while not self.f.closed:
            time.sleep(0.5)
            try:
                self.f.flush()
            except ValueError:  # closed meanwhile
                return

    def w(self, line: str):
        self.f.write(line + "\n")
        t = time.monotonic()
        if t - self.last > 0.5:
            self.f.flush()
            self.last = t

    def close(self):
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()


def create_topic(bootstrap: str, topic: str, partitions: int, configs: list[str]) -> int:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    cfg = dict(c.split("=", 1) for c in configs)
    fs = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3, config=cfg)],
                             operation_timeout=30)
    fs[topic].result(timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10).topics[topic]
        if md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 and len(p.isrs) == 3 for p in md.partitions.values()):
            print(f"topic {topic}: {partitions} partitions, RF 3, in sync")
            return 0
        time.sleep(0.5)
    print(f"topic {topic} not in sync within 60 s", file=sys.stderr)
    return 1


# ---------------------------------------------------------------------------------------------
def delivery_logger(log, state: dict):
    """A delivery callback `cb(err, msg, seq)` that logs each delivery (A) or failure (E)
    and counts the acknowledged ones in state["acked"]."""
    def cb(err, msg, s):
        if err is None:
            state["acked"] += 1
            log.w(f"A {s} {msg.partition()} {msg.offset()} {now():.3f}")
        else:
            log.w(f"E {s} {msg.partition()} {err.name()} {now():.3f}")
    return cb


def producer(a) -> int:
    from confluent_kafka import KafkaException, Producer
    log = Log(f"{a.dir}/producer-{a.id}.log")
    fatal: list = []
    conf = {"bootstrap.servers": a.bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": a.message_timeout_ms, "request.timeout.ms": 10000,
            "log_level": 3, "error_cb": lambda e: fatal.append(e) if e.fatal() else None}
    if a.debug:
        # librdkafka's own account (for example "eos": epoch bumps and the
        # broker answers behind them), written to the client's .out file.
        conf.update({"debug": a.debug, "log_level": 7})
    p = Producer(conf)
    seq = acked = 0
    state = {"acked": 0}
    cb = delivery_logger(log, state)

    start = time.monotonic()
    interval = 1.0 / a.rate
    next_at = start
    while not os.path.exists(a.stop) and time.monotonic() - start < a.max_seconds:
        if fatal:
            e = fatal[0]
            log.w(f"F {e.name()} {now():.3f} {str(e).replace(' ', '_')[:200]} next={seq}")
            try:
                p.flush(10)  # delivery reports of what the dead instance held
            except KafkaException:
                pass
            fatal.clear()
            p = Producer(conf)
            continue
        t = time.monotonic()
        if t < next_at:
            p.poll(min(next_at - t, 0.05))
            continue
        part = seq % a.partitions
        try:
            p.produce(a.topic, f"p{a.id}-{seq}".encode(), partition=part,
                      on_delivery=lambda e, m, s=seq: cb(e, m, s))
            seq += 1
            next_at += interval
            if next_at < t - 1.0:  # after a blocked stretch, do not burst to catch up
                next_at = t
        except BufferError:
            p.poll(0.1)
        p.poll(0)
    left = p.flush(a.flush_seconds)
    acked = state["acked"]
    log.w(f"S {seq} {acked} {now():.3f} unresolved={left}")
    log.close()
    print(f"producer {a.id}: sent {seq}, acknowledged {acked}, unresolved {left}")
    return 0


# ---------------------------------------------------------------------------------------------
def txn_producer(a) -> int:
    """Transactions of 2-6 records, each to a random partition (so several partitions, sometimes
    two records to one), at --rate records/s; 1 in --abort-every aborted after its records were
    flushed to the log (so aborted records really are there, behind an abort marker). The
    outcome logged: committed (commit_transaction returned), aborted (abort_transaction returned,
    or commit was never asked for), unknown (commit asked for and neither it nor an abort
    answered: a new producer instance, which fences the old one, follows)."""
    import random
    from confluent_kafka import KafkaException, Producer
    log = Log(f"{a.dir}/producer-{a.id}.log")
    rnd = random.Random(a.id * 7919 + int(time.time()))
    conf = {"bootstrap.servers": a.bootstrap, "transactional.id": f"chaos-txn-{a.id}",
            "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            # librdkafka wants message.timeout.ms <= transaction.timeout.ms; a transaction left
            # open (its producer gone) is aborted by the coordinator after the latter
            "message.timeout.ms": min(a.message_timeout_ms, 30000), "request.timeout.ms": 10000,
            "transaction.timeout.ms": 30000, "log_level": 3}
    if a.debug:
        conf.update({"debug": a.debug, "log_level": 7})
    state = {"acked": 0}
    cb = delivery_logger(log, state)

    def err_name(e: Exception) -> str:
        return e.args[0].name() if isinstance(e, KafkaException) and e.args else type(e).__name__

    def new_producer():
        deadline = time.monotonic() + 120
        while True:
            p = Producer(conf)
            try:
                p.init_transactions(30)
                return p
            except KafkaException as e:
                log.w(f"X {now():.3f} init_transactions:{err_name(e)}")
                if time.monotonic() > deadline or os.path.exists(a.stop):
                    raise
                time.sleep(0.5)

    def retrying(fn, what: str) -> str | None:
        """Calls fn (commit or abort) until it returns (None) or fails for good (the error's name)."""
        for _ in range(10):
            try:
                fn(15)
                return None
            except KafkaException as e:
                err = e.args[0]
                if err.retriable() and not err.fatal() and not err.txn_requires_abort():
                    log.w(f"X {now():.3f} {what}:{err.name()}:retrying")
                    continue
                return err.name() + (":abortable" if err.txn_requires_abort() else "") + \
                    (":fatal" if err.fatal() else "")
        return "retries-exhausted"

    p = new_producer()
    seq = txn = 0
    start = time.monotonic()
    next_at = start
    while not os.path.exists(a.stop) and time.monotonic() - start < a.max_seconds:
        t = time.monotonic()
        if t < next_at:
            p.poll(min(next_at - t, 0.05))
            continue
        n = rnd.randint(2, 6)
        writes = [(seq + i, rnd.randrange(a.partitions)) for i in range(n)]
        seq += n
        abort = rnd.randrange(a.abort_every) == 0
        outcome, error, t_end = "aborted", "", 0.0
        try:
            p.begin_transaction()
        except KafkaException as e:  # nothing written: a new instance, no transaction logged
            log.w(f"F {err_name(e)} {now():.3f} begin_transaction")
            p = new_producer()
            continue
        log.w(f"B {txn} {now():.3f} " + ",".join(f"{s}:{part}" for s, part in writes))
        try:
            for s, part in writes:
                while True:
                    try:
                        p.produce(a.topic, f"p{a.id}-{s}".encode(), partition=part,
                                  on_delivery=lambda e, m, s=s: cb(e, m, s))
                        break
                    except BufferError:
                        p.poll(0.1)
            if abort:
                p.flush(30)  # the records reach the log before the abort marker
        except KafkaException as e:
            error, abort = f"produce:{err_name(e)}", True
        t_end = now()
        if abort:
            bad = retrying(p.abort_transaction, "abort")
            if bad:  # commit was never asked for: whatever happens, it cannot commit
                error = (error + " " if error else "") + f"abort:{bad}"
        else:
            bad = retrying(p.commit_transaction, "commit")
            if bad is None:
                outcome = "committed"
            elif bad.endswith(":abortable"):
                bad2 = retrying(p.abort_transaction, "abort")
                outcome, error = ("aborted", f"commit:{bad}") if bad2 is None else \
                    ("unknown", f"commit:{bad} abort:{bad2}")
            else:
                outcome, error = "unknown", f"commit:{bad}"
        log.w(f"O {txn} {outcome} {t_end:.3f} {now():.3f}" + (f" {error.replace(' ', ',')}" if error else ""))
        txn += 1
        if error and (outcome == "unknown" or "fatal" in error or "abort:" in error):
            # a new instance: InitProducerId fences this one and ends its open transaction
            log.w(f"F {error.split(',')[0].replace(' ', '_')} {now():.3f} new-instance")
            try:
                p.flush(5)
            except KafkaException:
                pass
            p = new_producer()
        next_at += n / a.rate
        if next_at < time.monotonic() - 1.0:
            next_at = time.monotonic()
    left = p.flush(a.flush_seconds)
    log.w(f"S {seq} {state['acked']} {now():.3f} unresolved={left} transactions={txn}")
    log.close()
    print(f"txn producer {a.id}: sent {seq} in {txn} transactions, acknowledged {state['acked']}, unresolved {left}")
    return 0


# ---------------------------------------------------------------------------------------------
def consumer(a) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
    log = Log(f"{a.dir}/consumer-{a.id}.log")
    committed: dict[int, int] = {}

    def logged_commit(c) -> None:
        try:
            res = c.commit(asynchronous=False)
        except KafkaException as e:
            if e.args[0].name() == "_NO_OFFSET":  # nothing stored since: the position is committed
                try:
                    committed.update((tp.partition, tp.offset) for tp in c.position(c.assignment()))
                except KafkaException:
                    pass
                return
            log.w(f"X {now():.3f} commit:{e.args[0].name()}")
            return
        t = now()
        for tp in res or []:
            if tp.error is None and tp.offset >= 0:
                committed[tp.partition] = tp.offset
                log.w(f"C {t:.3f} {tp.partition} {tp.offset}")
            elif tp.error is not None:
                log.w(f"X {t:.3f} commit:{tp.partition}:{tp.error.name()}")

    def moved(c) -> bool:
        """Whether the position passed what was last committed without a new record: the
        position steps over transaction markers and aborted records, and the group should
        commit past them too (or it never reaches the end offsets)."""
        try:
            pos = c.position(c.assignment())
        except KafkaException:
            return False
        return any(tp.offset >= 0 and tp.offset != committed.get(tp.partition) for tp in pos)

    def on_assign(c, parts):
        log.w(f"R {now():.3f} assigned " + " ".join(str(tp.partition) for tp in parts))

    def on_revoke(c, parts):
        log.w(f"R {now():.3f} revoked " + " ".join(str(tp.partition) for tp in parts))
        logged_commit(c)  # commit what was processed before handing the partitions over

    conf = {"bootstrap.servers": a.bootstrap, "group.id": a.group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 1000, "log_level": 3, "isolation.level": "read_committed",
            "error_cb": lambda e: log.w(f"X {now():.3f} {e.name()}")}
    if a.debug:
        # e.g. "cgrp,topic,fetch": what the member asked and was answered, in its .out file
        conf.update({"debug": a.debug, "log_level": 7})
    c = Consumer(conf)
    if a.consume == "assign":
        # A fixed share of the partitions, from the group's committed offsets (else the start),
        # read here until answered: assign() left to fetch them itself stayed without a position,
        # fetching nothing, after its OffsetFetch was answered NOT_COORDINATOR (librdkafka 2.16,
        # a group coordinator just started).
        mine = [p for p in range(a.partitions) if p % a.members == a.id - 1]
        start_at = None
        while start_at is None and not os.path.exists(a.stop):
            try:
                res = c.committed([TopicPartition(a.topic, p) for p in mine], timeout=5)
                bad = [tp for tp in res if tp.error is not None]
                if bad:
                    raise KafkaException(bad[0].error)
                start_at = [TopicPartition(a.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                            for tp in res]
            except KafkaException as e:
                log.w(f"X {now():.3f} committed:{e.args[0].name() if e.args else '?'}")
                time.sleep(0.5)
        c.assign(start_at or [])
        log.w(f"R {now():.3f} assigned " + " ".join(map(str, mine)))
    else:
        c.subscribe([a.topic], on_assign=on_assign, on_revoke=on_revoke)
    start = time.monotonic()
    last_commit = start
    n = fresh = 0
    while not os.path.exists(a.stop) and time.monotonic() - start < a.max_seconds:
        msgs = c.consume(500, 0.2)
        got = []
        for m in msgs:
            if m.error():
                log.w(f"X {now():.3f} {m.error().name()}")
                continue
            got.append(f"M {m.partition()} {m.offset()} {m.value().decode(errors='replace')}")
        if got:  # one poll operation: what a single consume() call returned, in its order
            log.w(f"P {now():.3f} {len(got)}\n" + "\n".join(got))
            n += len(got)
            fresh += len(got)
        if time.monotonic() - last_commit >= a.commit_interval:
            last_commit = time.monotonic()
            if fresh or moved(c):  # commit what was processed since the last commit
                fresh = 0
                logged_commit(c)
    if fresh or moved(c):
        logged_commit(c)
    c.close()
    log.close()
    print(f"consumer {a.id}: consumed {n}")
    return 0


# ---------------------------------------------------------------------------------------------
def monitor(a) -> int:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec
    log = Log(f"{a.dir}/monitor.log")
    admin = AdminClient({"bootstrap.servers": a.bootstrap, "log_level": 0})
    # The group's committed offsets through OffsetFetch from a consumer that never joins the
    # group. AdminClient.list_consumer_group_offsets sends the same request, but crashed this
    # process (SIGSEGV inside confluent-kafka 2.16.1) when called while the members joined.
    offsets = Consumer({"bootstrap.servers": a.bootstrap, "group.id": a.group, "enable.auto.commit": False,
                        "log_level": 0})
    parts = list(range(a.partitions))
    meta: dict[int, tuple[int, tuple]] = {}
    brokers: tuple = ()
    committed: dict[int, int] = {}
    hw: dict[int, int] = {}
    state_path = Path(a.dir) / "state.json"
    start = time.monotonic()
    last_slow = 0.0
    while not os.path.exists(a.stop) and time.monotonic() - start < a.max_seconds:
        t0 = time.monotonic()
        t = now()
        ok_meta = False
        try:
            md = admin.list_topics(a.topic, timeout=2)
            tm = md.topics[a.topic]
            b = tuple(sorted(md.brokers))
            if b != brokers:
                brokers = b
                log.w(f"B {t:.3f} {','.join(map(str, b))}")
            if tm.error is None:
                ok_meta = True
                for p in tm.partitions.values():
                    v = (p.leader, tuple(sorted(p.isrs)))
                    if meta.get(p.id) != v:
                        meta[p.id] = v
                        log.w(f"T {t:.3f} {p.id} {p.leader} {','.join(map(str, v[1])) or '-'}")
        except Exception as e:  # noqa: BLE001
            log.w(f"X {t:.3f} metadata:{type(e).__name__}")
        if t0 - last_slow >= 1.0:
            last_slow = t0
            try:
                res = offsets.committed([TopicPartition(a.topic, p) for p in parts], timeout=3)
                t = now()
                for tp in res:
                    if tp.error is None and committed.get(tp.partition) != tp.offset:
                        committed[tp.partition] = tp.offset
                        log.w(f"G {t:.3f} {tp.partition} {tp.offset}")
            except Exception as e:  # noqa: BLE001
                log.w(f"X {now():.3f} committed:{type(e).__name__}")
            try:
                fs = admin.list_offsets({TopicPartition(a.topic, p): OffsetSpec.latest() for p in parts},
                                        request_timeout=3)
                t = now()
                for tp, fut in fs.items():
                    r = fut.result(timeout=5)
                    if hw.get(tp.partition) != r.offset:
                        hw[tp.partition] = r.offset
                        log.w(f"H {t:.3f} {tp.partition} {r.offset}")
            except Exception as e:  # noqa: BLE001
                log.w(f"X {now():.3f} end-offsets:{type(e).__name__}")
        whole = ok_meta and len(meta) == a.partitions and all(
            v[0] >= 0 and len(v[1]) == 3 for v in meta.values()) and len(brokers) == 3
        st = {"t": now(), "whole": whole, "brokers": list(brokers),
              "leaders": {str(p): v[0] for p, v in meta.items()},
              "isr": {str(p): list(v[1]) for p, v in meta.items()},
              "committed": {str(p): o for p, o in committed.items()},
              "hw": {str(p): o for p, o in hw.items()}}
        tmp = state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(st))
        tmp.replace(state_path)
        time.sleep(max(0.0, a.interval - (time.monotonic() - t0)))
    offsets.close()
    log.close()
    return 0


# ---------------------------------------------------------------------------------------------
def watermarks(c, tp) -> tuple[int, int]:
    """(log start, high watermark), asked again while the answer is retriable (a new leader whose
    high watermark lags the start of its epoch answers OFFSET_NOT_AVAILABLE until its followers
    fetch; librdkafka raises it without retrying, and marks no error of this call retriable)."""
    from confluent_kafka import KafkaError, KafkaException
    deadline = time.monotonic() + 60
    while True:
        try:
            return c.get_watermark_offsets(tp, timeout=10)
        except KafkaException as e:
            if e.args[0].code() not in (KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.LEADER_NOT_AVAILABLE,
                                        KafkaError.NOT_LEADER_FOR_PARTITION) \
                    or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def dump(a) -> int:
    """Every partition from its log start to its high watermark, without a group."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka import KafkaError
    c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": f"chaos-dump-{time.time_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 3,
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    ends, starts = {}, {}
    for p in range(a.partitions):
        starts[p], ends[p] = watermarks(c, TopicPartition(a.topic, p))
    next_off = dict(starts)
    c.assign([TopicPartition(a.topic, p, starts[p]) for p in range(a.partitions)])
    n = 0
    deadline = time.monotonic() + a.max_seconds
    with open(f"{a.dir}/dump.log", "w", buffering=1 << 20) as f:
        while any(next_off[p] < ends[p] for p in ends):
            if time.monotonic() > deadline:
                print("dump: timed out reading the topic back", file=sys.stderr)
                return 1
            for m in c.consume(5000, 1.0):
                if m.error():
                    # read_committed skips transaction markers and aborted records: the end of a
                    # partition can be one of those, which no record reaches
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        next_off[m.partition()] = max(next_off[m.partition()], m.offset())
                    continue
                p, o = m.partition(), m.offset()
                if o >= ends[p]:
                    continue
                f.write(f"{p} {o} {m.value().decode(errors='replace')}\n")
                next_off[p] = o + 1
                n += 1
    c.close()
    Path(f"{a.dir}/dump.json").write_text(json.dumps({"start": starts, "end": ends, "records": n}))
    print(f"dump: {n} records, end offsets {ends}")
    return 0


def reassign(a) -> int:
    """The nemesis' `reassign` of partition --partition (kafka-python's admin client, the
    AlterPartitionReassignments / ListPartitionReassignments / ElectLeaders APIs): one replica
    is removed (waited for) and the preferred leader elected, then the replica is added back at
    a random place in the list, which copies the whole partition to it again; that is left
    running, so the next faults hit the copy. A partition left short by an earlier try gets its
    missing replica first. With --repair: every short partition is completed and waited for.
    Prints what it did as one JSON line."""
    import random
    from kafka import KafkaAdminClient, TopicPartition as KTP
    rnd = random.Random(a.id)
    admin = KafkaAdminClient(bootstrap_servers=a.bootstrap, request_timeout_ms=8000,
                             client_id="chaos-reassign")
    deadline = time.monotonic() + a.max_seconds
    out: dict = {"steps": []}

    def retry(what, fn):
        last = None
        while time.monotonic() < deadline:
            try:
                return fn()
            except Exception as e:  # noqa: BLE001 (faults make any call fail for a while)
                last = f"{type(e).__name__}: {e}"[:200]
                time.sleep(0.5)
        raise RuntimeError(f"{what}: {last}")

    def replicas() -> dict[int, list[int]]:
        d = retry("describe", lambda: admin.describe_topics([a.topic]))
        return {p["partition_index"]: list(p["replica_nodes"]) for t in d for p in t["partitions"]}

    def alter(p: int, target: list[int]) -> None:
        def once():
            r = admin.alter_partition_reassignments({KTP(a.topic, p): target})
            err = r.get(KTP(a.topic, p))
            if err is not None:
                raise RuntimeError(f"refused: {err}")
        retry(f"alter {p} -> {target}", once)
        out["steps"].append({"partition": p, "replicas": target, "t": round(now(), 3)})

    def done(p: int, target: list[int]) -> bool:
        pending = retry("list", lambda: admin.list_partition_reassignments([KTP(a.topic, p)]))
        return KTP(a.topic, p) not in pending and replicas().get(p) == target

    def wait_done(p: int, target: list[int]) -> None:
        while not done(p, target):
            if time.monotonic() >= deadline:
                raise RuntimeError(f"reassignment of {p} to {target} not done in time")
            time.sleep(0.5)

    everyone = [1, 2, 3]
    try:
        current = replicas()
        short = {p: r for p, r in current.items() if len(r) < len(everyone)}
        for p, r in short.items():
            target = r + [b for b in everyone if b not in r]
            alter(p, target)
            if a.repair:
                wait_done(p, target)
        if not a.repair and a.partition not in short:
            r = current[a.partition]
            gone = rnd.choice(r)
            smaller = [b for b in r if b != gone]
            alter(a.partition, smaller)
            wait_done(a.partition, smaller)
            try:
                admin.elect_leaders(0, {a.topic: [a.partition]}, raise_errors=False)
                out["elected"] = True
            except Exception as e:  # noqa: BLE001
                out["elected"] = f"{type(e).__name__}"
            back = list(smaller)
            back.insert(rnd.randrange(len(back) + 1), gone)
            alter(a.partition, back)
        out["ok"] = True
    except Exception as e:  # noqa: BLE001
        out.update(ok=False, error=f"{e}"[:300])
    finally:
        admin.close()
    print(json.dumps(out))
    return 0 if out["ok"] else 1


def main(argv=None) -> int:
    import faulthandler
    import signal
    faulthandler.enable()
    faulthandler.register(signal.SIGUSR1)  # the harness asks for stacks before killing a stuck client
    if len(sys.argv) > 1 and sys.argv[1] == "create-topic":
        return create_topic(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:])
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["producer", "consumer", "monitor", "dump", "reassign"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--stop", default="/nonexistent")
    ap.add_argument("--id", type=int, default=0)
    ap.add_argument("--group", default="chaos")
    ap.add_argument("--rate", type=float, default=300.0)
    ap.add_argument("--message-timeout-ms", type=int, default=120000)
    ap.add_argument("--debug", default="", help="librdkafka debug contexts (e.g. eos for producers, cgrp,topic,fetch for consumers)")
    ap.add_argument("--flush-seconds", type=float, default=90.0)
    ap.add_argument("--commit-interval", type=float, default=1.0)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--mode", choices=["plain", "txn"], default="plain", help="producers: idempotent or transactional")
    ap.add_argument("--abort-every", type=int, default=5, help="txn producers abort 1 transaction in N")
    ap.add_argument("--consume", choices=["subscribe", "assign"], default="subscribe")
    ap.add_argument("--members", type=int, default=3, help="consumers in all (--consume assign splits the partitions)")
    ap.add_argument("--max-seconds", type=float, default=4 * 3600)
    ap.add_argument("--partition", type=int, default=0, help="reassign: the partition")
    ap.add_argument("--repair", action="store_true", help="reassign: complete every short replica list")
    a = ap.parse_args(argv)
    if a.role == "producer" and a.mode == "txn":
        return txn_producer(a)
    return {"producer": producer, "consumer": consumer, "monitor": monitor, "dump": dump,
            "reassign": reassign}[a.role](a)


if __name__ == "__main__":
    sys.exit(main())
