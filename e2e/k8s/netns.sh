#!/usr/bin/env bash
# Run a command in a fresh, private network namespace in which pod IPs are real:
#   - loopback is up (the control plane still listens on 127.0.0.1 inside it);
#   - the whole pod CIDR (SKEIN_K8S_POD_CIDR, default 198.18.0.0/16, RFC 2544
#     benchmarking space, not private, not loopback) is routed as *local*, so a
#     process can bind any pod IP that kwok hands out (e.g. skein-broker on
#     198.18.0.5:9092) and clients connect to it; EndpointSlices accept it.
# Nothing inside can reach, or be reached from, any other network: the namespace
# has no other interface and disappears with its last process.
#   e2e/k8s/netns.sh e2e/k8s/smoke.sh
#   e2e/k8s/netns.sh bash -c 'eval "$(e2e/k8s/up.sh --env)"; cargo test --offline -p e2e'
# Needs root (or CAP_SYS_ADMIN) for unshare --net.
set -euo pipefail
if [[ -z ${SKEIN_K8S_IN_NETNS:-} ]]; then
  export SKEIN_K8S_IN_NETNS=1
  export SKEIN_K8S_POD_CIDR=${SKEIN_K8S_POD_CIDR:-198.18.0.0/16}
  exec unshare --net -- "$0" "$@"
fi
ip link set lo up
ip route add local "$SKEIN_K8S_POD_CIDR" dev lo
exec "$@"
