#!/usr/bin/env bash
# Run a command in a fresh, private network (and mount) namespace in which pod
# IPs are real:
#   - loopback is up (the control plane still listens on 127.0.0.1 inside it);
#   - the whole pod CIDR (SKEIN_K8S_POD_CIDR, default 198.18.0.0/16: RFC 2544
#     benchmarking space, neither private nor loopback) is routed as *local*, so
#     a process can bind any pod IP kwok hands out (skein-broker on
#     198.18.0.5:9092) and clients reach it; EndpointSlices accept such IPs;
#   - /etc/hosts is a private writable copy ($SKEIN_K8S_HOSTS_FILE): the e2e
#     runner can append "198.18.0.5 broker-0.broker.ns.svc.cluster.local ..." so
#     pod DNS names resolve (there is no cluster DNS).
# Nothing inside can reach, or be reached from, any other network: the namespace
# has no other interface and disappears with its last process.
#   e2e/k8s/netns.sh e2e/k8s/smoke.sh
#   e2e/k8s/netns.sh bash -c 'export KUBECONFIG=$(e2e/k8s/up.sh); cargo test --offline ...; e2e/k8s/down.sh'
# Needs root (CAP_SYS_ADMIN) for unshare.
set -euo pipefail
if [[ -z ${SKEIN_K8S_IN_NETNS:-} ]]; then
  export SKEIN_K8S_IN_NETNS=1
  export SKEIN_K8S_POD_CIDR=${SKEIN_K8S_POD_CIDR:-198.18.0.0/16}
  exec unshare --net --mount --propagation private -- "$0" "$@"
fi
ip link set lo up
ip route add local "$SKEIN_K8S_POD_CIDR" dev lo
SKEIN_K8S_HOSTS_FILE=$(mktemp "${TMPDIR:-/tmp}/skein-netns-hosts.XXXXXX")
cp /etc/hosts "$SKEIN_K8S_HOSTS_FILE"
mount --bind "$SKEIN_K8S_HOSTS_FILE" /etc/hosts
export SKEIN_K8S_HOSTS_FILE
# The command runs as a child (not exec) so the hosts copy is removed afterwards.
rc=0; "$@" || rc=$?
umount /etc/hosts 2>/dev/null || true
rm -f "$SKEIN_K8S_HOSTS_FILE"
exit $rc
