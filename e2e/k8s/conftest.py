"""What the operator tier's modules share in one pytest session: one platform (this machine's
control plane, or one install on an existing cluster) for test_operator.py,
test_certificates.py and test_day2.py, so that each module does not start its own; and a clean
namespace between modules. test_upgrade.py brings its own platform (its `env` fixture starts
from the previous release's chart)."""

from __future__ import annotations

import pytest

import test_operator
from test_operator import NS, ExistingCluster, LocalCluster, running, wait_until


@pytest.fixture(scope="session")
def env(tmp_path_factory, request):
    if test_operator.MODE not in ("local", "existing"):
        pytest.fail(f"SKEIN_E2E_CLUSTER={test_operator.MODE}: expected local or existing")
    cls = LocalCluster if test_operator.MODE == "local" else ExistingCluster
    yield from running(cls(tmp_path_factory.mktemp("op")), request)


@pytest.fixture(scope="module", autouse=True)
def clean_namespace():
    """After each module, remove the KafkaClusters, Topics and KafkaUsers it left in the test
    namespace and wait for their broker pods to go: the next module's timings must not share
    the machine with them."""
    yield
    e = test_operator.CURRENT
    if e is None:
        return
    for kind in ("kafkauser", "topic", "kafkacluster"):
        e.k("-n", NS, "delete", kind, "--all", "--wait=false", check=False)
    wait_until(lambda: not e.get("-n", NS, "get", "pods", "-l", "app.kubernetes.io/component=broker")["items"],
               180, "the module's broker pods gone")
