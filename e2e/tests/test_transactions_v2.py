"""Transaction version 2 (KIP-890 part 2) with the Java 4.1 client, which uses it once ApiVersions
finalizes `transaction.version` at 2 (a new cluster starts there, as a new Kafka 4.x cluster does):

- commits and aborts: read_committed sees exactly the committed records, and every EndTxn bumped
  the producer epoch (so version 2 was in use);
- KAFKA-17754: the EndTxn of a committed transaction, delayed until the producer began the next
  one, is refused (PRODUCER_FENCED) and cannot touch the next transaction; with version 1 (the
  same late EndTxn from a version 1 producer, on the wire) it ends the next transaction."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import uuid

import pytest

import rawkafka as rk
import util
from test_transactions_java import create, values
from util import java, java_cmd

pytestmark = pytest.mark.transactions

RETRIABLE = {rk.COORDINATOR_LOAD_IN_PROGRESS, rk.COORDINATOR_NOT_AVAILABLE, rk.NOT_COORDINATOR,
             rk.CONCURRENT_TRANSACTIONS}


def coordinator_connection(bootstrap: str, tid: str) -> rk.Connection:
    """A connection to the broker coordinating `tid` (single-broker fixtures: that broker)."""
    c = rk.Connection.to(bootstrap)
    deadline = time.monotonic() + 60
    while (err := c.find_coordinator(tid, 1)[0]) != rk.NONE:
        assert err in RETRIABLE and time.monotonic() < deadline, f"FindCoordinator({tid}): {err}"
        time.sleep(0.2)
    return c


def settled(c: rk.Connection, tid: str) -> dict:
    """The transaction once no EndTxn is completing (markers written)."""
    deadline = time.monotonic() + 60
    while True:
        d = c.describe_transaction(tid)
        if d["error"] == rk.NONE and d["state"] not in ("PrepareCommit", "PrepareAbort"):
            return d
        assert time.monotonic() < deadline, f"{tid} stays {d}"
        time.sleep(0.2)


@contextlib.contextmanager
def held_second_transaction(bootstrap: str, topic: str, tid: str, tmp):
    """The Java driver's txn-hold: transaction A ("a-r0".."a-r9") committed, B ("b-r*") begun,
    sent and flushed. Yields `end(how)`: ends B by "commit" or "abort" and returns the driver's
    last line ({"second": "committed" | "aborted" | "<error class>"})."""
    err = tmp / "txn-hold.err"
    proc = subprocess.Popen(java_cmd("txn-hold", "--bootstrap", bootstrap, "--topic", topic,
                                     "--tid", tid, "--per-txn", "10"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=open(err, "wb"), text=True)

    def end(how: str) -> dict:
        proc.stdin.write(f"{how}\n")
        proc.stdin.flush()
        out, _ = proc.communicate(timeout=120)
        assert out.strip(), err.read_text()[-3000:]
        return json.loads(out.strip().splitlines()[-1])

    try:
        line = proc.stdout.readline()
        assert json.loads(line) == {"held": True}, (line, err.read_text()[-3000:])
        yield end
    finally:
        if proc.poll() is None:
            proc.kill()


def test_java_producer_commits_and_aborts_with_transaction_version_2(broker, topic):
    create(broker.bootstrap, topic, 3)
    tid = f"tv2-{topic}"
    r = java("txn-produce", broker.bootstrap, topic=topic, tid=tid, txns=9, per_txn=20, abort_every=3)
    assert r == {"committed": 6, "aborted": 3}
    committed = {f"t{t}-r{i}" for t in range(9) if (t + 1) % 3 != 0 for i in range(20)}
    assert sorted(values(broker.bootstrap, topic, 3, "read_committed")) == sorted(committed)
    with coordinator_connection(broker.bootstrap, tid) as c:
        d = settled(c, tid)
    # InitProducerId gave epoch 0; each of the nine EndTxn (v5) bumped it once (the last one
    # aborted).
    assert d["state"] == "CompleteAbort" and d["epoch"] == 9, d


def test_back_to_back_transactions_of_a_java_producer_all_commit(replicated_cluster, topic, tmp):
    """Transactions one right after another, 2-6 records each over 6 partitions (the chaos
    workload's Java producer, for 8 s, on three brokers): with version 2 the EndTxn returns before the markers are
    written, so the next transaction's first batch in a partition often arrives before that
    partition's marker, whose epoch is the one the new transaction runs at. It must wait for the
    marker and go in; it was refused INVALID_TXN_STATE (a third of the commits failed)."""
    c = replicated_cluster
    create(c.bootstrap, topic, 6, rf=3)
    (tmp / "logs").mkdir()
    r = java("chaos-txn", c.bootstrap, topic=topic, partitions=6, id=1, dir=str(tmp / "logs"),
             stop=str(tmp / "stop"), rate=400, abort_every=1000, max_seconds=8, timeout=120)
    outcomes = [ln.split()[2] for ln in (tmp / "logs" / "producer-1.log").read_text().splitlines()
                if ln.startswith("O ")]
    failed = [ln for ln in (tmp / "logs" / "producer-1.log").read_text().splitlines()
              if ln.startswith(("E ", "F ")) or (ln.startswith("O ") and ":" in ln.split()[-1])]
    assert r["transactions"] == len(outcomes) >= 3, (r, len(outcomes))
    assert not failed, failed[:5]
    assert outcomes.count("committed") + outcomes.count("aborted") == len(outcomes)


def test_a_late_end_txn_is_fenced_with_transaction_version_2(broker, topic, tmp):
    """KAFKA-17754: the Java producer commits transaction A, then begins B and sends to it. The
    EndTxn of A arrives now (sent here on the wire, as a retry that was delayed in the network):
    with version 2 it carries A's epoch, one below B's, and is refused with PRODUCER_FENCED. B is
    still open, its records invisible to read_committed until the producer commits it."""
    create(broker.bootstrap, topic, 1)
    tid = f"late-{topic}"
    a = {f"a-r{i}" for i in range(10)}
    b = {f"b-r{i}" for i in range(10)}
    with held_second_transaction(broker.bootstrap, topic, tid, tmp) as end:
        with coordinator_connection(broker.bootstrap, tid) as c:
            before = c.describe_transaction(tid)
            assert before["state"] == "Ongoing" and before["epoch"] == 1, before
            pid, epoch_b = before["producer_id"], before["epoch"]
            # A's EndTxn, delayed: A's epoch, the one before B's.
            for commit in (True, False):
                err, _, _ = c.end_txn_v5(tid, pid, epoch_b - 1, commit)
                assert err == rk.PRODUCER_FENCED, err
            after = c.describe_transaction(tid)
            assert (after["state"], after["epoch"], after["partitions"]) == \
                ("Ongoing", epoch_b, before["partitions"]), after
        assert sorted(values(broker.bootstrap, topic, 1, "read_committed")) == sorted(a)
        assert end("commit") == {"second": "committed"}
    assert sorted(values(broker.bootstrap, topic, 1, "read_committed")) == sorted(a | b)


@pytest.mark.parametrize("how,answer", [("commit", "ProducerFencedException"), ("abort", "aborted")])
def test_a_producer_whose_transaction_its_coordinator_aborted_is_fenced_at_its_commit(
        broker, topic, tmp, how, answer):
    """A Java producer (version 2) has a transaction open when a second instance initialises the
    same transactional id: the coordinator aborts the open transaction at the next epoch and
    answers the new instance "retry" (which it is slow to do here). The first producer's EndTxn
    now carries the epoch just before the abort's, the epoch of a retry:
    - its abort is taken as the retry of an abort that went through (as Kafka);
    - its commit is refused PRODUCER_FENCED (KAFKA-20785). Kafka 4.4 answers INVALID_TXN_STATE,
      which the Java client takes as fatal with another error than "fenced" (a Kafka Streams
      thread dies of it instead of rejoining); so did Skein, one run in a few of the zombie test
      in test_transactions_java.py."""
    create(broker.bootstrap, topic, 1)
    tid = f"fence-{topic}"
    with held_second_transaction(broker.bootstrap, topic, tid, tmp) as end:
        with coordinator_connection(broker.bootstrap, tid) as c:
            err, _, _ = c.init_producer_id(tid)
            assert err == rk.CONCURRENT_TRANSACTIONS, err
            d = settled(c, tid)
            assert d["state"] == "CompleteAbort", d
        assert end(how) == {"second": answer}
    assert sorted(values(broker.bootstrap, topic, 1, "read_committed")) == sorted(f"a-r{i}" for i in range(10))


def test_a_late_end_txn_ends_the_next_transaction_with_transaction_version_1(broker, topic):
    """The same late EndTxn from a version 1 producer (AddPartitionsToTxn, Produce v8, EndTxn v1;
    Skein answers each by its request version, like Kafka): the epoch stays the same between
    transactions, so A's delayed commit cannot be told from B's and commits B, which its producer
    never committed. This is what version 2 closes."""
    create(broker.bootstrap, topic, 1)
    tid = f"late-v1-{uuid.uuid4().hex[:8]}"
    with coordinator_connection(broker.bootstrap, tid) as c:
        deadline = time.monotonic() + 60
        while True:
            err, pid, epoch = c.init_producer_id(tid)
            if err == rk.NONE:
                break
            assert err in RETRIABLE and time.monotonic() < deadline, f"InitProducerId({tid}): {err}"
            time.sleep(0.2)

        def transaction(name: str, seq: int) -> None:
            deadline = time.monotonic() + 60
            while (got := c.add_partitions_to_txn(tid, pid, epoch, {topic: [0]})) != {(topic, 0): rk.NONE}:
                assert time.monotonic() < deadline, got
                time.sleep(0.1)
            batch = rk.record_batch([rk.record(0, 0, b"k", name.encode())], base_timestamp=int(time.time() * 1000),
                                    attributes=rk.ATTR_TRANSACTIONAL, producer_id=pid, producer_epoch=epoch,
                                    base_sequence=seq)
            got = c.produce({(topic, 0): batch}, transactional_id=tid)
            assert got[(topic, 0)]["error"] == rk.NONE, got

        transaction("a", 0)
        assert c.end_txn(tid, pid, epoch, commit=True) == rk.NONE
        settled(c, tid)
        transaction("b", 1)
        # A's EndTxn, delayed: the same epoch as B's, so it ends B.
        assert c.end_txn(tid, pid, epoch, commit=True) == rk.NONE
        d = settled(c, tid)
        assert (d["state"], d["epoch"]) == ("CompleteCommit", epoch), d
    assert values(broker.bootstrap, topic, 1, "read_committed") == ["a", "b"]
