"""A broker stops on SIGTERM even when its controller is gone.

The operator (and with it the controller) is killed without a word, as when
its pod is lost or its KafkaCluster deleted; a broker then told to stop must
give up its controlled shutdown after `controlled.shutdown.timeout.ms`, close
its logs and exit, instead of waiting for a controller that never answers
(it used to hang until SIGKILL, leaving processes on addresses that were
handed out again).
"""

import os
import signal
import time

import pytest

from brokers import LocalCluster
from conftest import TARGET

pytestmark = pytest.mark.skipif(TARGET != "skein", reason="runs Skein's own local platform (skein-operator local)")

SHUTDOWN_TIMEOUT_MS = 3000


def running(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().split(") ", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.timeout(180)
def test_sigterm_stops_a_broker_whose_controller_is_gone(tmp_path):
    cluster = LocalCluster(tmp_path, brokers=2,
                           overrides={"controlled.shutdown.timeout.ms": str(SHUTDOWN_TIMEOUT_MS)})
    cluster.start()
    pids = [cluster.broker_pid(i) for i in (1, 2)]
    try:
        assert all(pids), pids
        os.kill(cluster.proc.pid, signal.SIGKILL)
        cluster.proc.wait(10)
        # Let a heartbeat find the controller gone (and start registering again).
        time.sleep(8)
        assert all(running(p) for p in pids), "brokers must outlive their controller"
        started = time.monotonic()
        os.kill(pids[0], signal.SIGTERM)
        # controlled shutdown (3 s) + leave (2 s) + closing logs + the runtime's wait (2 s)
        budget = SHUTDOWN_TIMEOUT_MS / 1000 + 10
        while running(pids[0]) and time.monotonic() - started < budget:
            time.sleep(0.2)
        took = time.monotonic() - started
        assert not running(pids[0]), (
            f"broker still running {took:.1f}s after SIGTERM:\n" + cluster.broker_log(1).read_text()[-3000:])
        print(f"broker exited {took:.1f}s after SIGTERM with no controller")
        assert "logs closed" in cluster.broker_log(1).read_text()
        # Neither writes colour codes into a file (only a terminal gets them).
        for log in (cluster.broker_log(1), cluster.broker_log(2), cluster.log_path):
            text = log.read_text(errors="replace")
            assert text and "\x1b[" not in text, f"escape codes in {log.name}: {text[:300]!r}"
    finally:
        for p in pids:
            if p and running(p):
                os.kill(p, signal.SIGKILL)
