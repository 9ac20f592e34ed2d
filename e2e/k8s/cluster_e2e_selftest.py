"""Runs e2e/k8s/cluster-e2e.sh, the script for users' own clusters, in its
default mode (the suite in a runner pod) against this machine's control plane.

The control plane and the pod runners are the ones of the local suite
(test_operator.LocalCluster); the chart is installed by the suite itself, as on
a real cluster, with the images `skein-operator:e2e` and `skein-broker:e2e`
(the pod runner maps them to the binaries under test). The runner pod is a kwok
pod; `kubectl exec` into it goes API server -> kwok's kubelet endpoint, which
runs the command on this machine (up.sh's ClusterExec), inside this network
namespace, with e2e/.venv first on PATH (what the runner image provides).

Run by e2e/k8s/operator-e2e.sh --cluster-script."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_operator import LocalCluster  # noqa: E402

RUNNER_DIR = Path("/tmp/skein-e2e")  # cluster-e2e.sh's directory in the runner pod


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="skein-cluster-e2e-"))
    cluster = LocalCluster(work)
    try:
        cluster.start_platform()
        env = {**os.environ, "KUBECONFIG": cluster.kubeconfig, "KUBECTL": cluster.kubectl, "HELM": cluster.helm}
        return subprocess.run([str(HERE / "cluster-e2e.sh"), "--operator-image", "skein-operator:e2e",
                               "--broker-image", "skein-broker:e2e", *sys.argv[1:]], env=env).returncode
    finally:
        cluster.teardown()
        shutil.rmtree(RUNNER_DIR, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
