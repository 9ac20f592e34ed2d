#!/usr/bin/env bash
# The broker launcher of a chaos run: `skein-operator local --launcher "launch.sh {id}"` runs
#   launch.sh ID <skein-broker command...>
# for every broker start. Environment (set by chaos.py for the operator, inherited here):
#   CHAOS_STATE   directory with the control files below
#   CHAOS_NS      network namespace name with {id} (the broker's own namespace)
#   CHAOS_CGROUP  blkio cgroup directory with {id} (slow-disk throttling), may be empty
#
# - hold-ID present: wait (at most 600 s) before starting: the nemesis keeps a broker down while it
#   wipes its disk.
# - broker-ID.pid names a live skein-broker (one that outlived a SIGKILLed controller): adopt it
#   instead of starting a second broker on the same data dir and ports; wait until it exits and
#   forward SIGTERM to it, so the restarted controller supervises it as its own child.
# - otherwise: join the blkio cgroup, write our pid (= the broker's: exec keeps it) and exec the
#   broker inside its network namespace.
set -u
id=$1
shift
state=${CHAOS_STATE:?CHAOS_STATE not set}
ns=${CHAOS_NS//\{id\}/$id}

for _ in $(seq 1 6000); do
    [[ -e "$state/hold-$id" ]] || break
    sleep 0.1
done

pidf="$state/broker-$id.pid"
if [[ -f "$pidf" ]]; then
    pid=$(cat "$pidf" 2>/dev/null || true)
    if [[ -n "$pid" && "$(cat "/proc/$pid/comm" 2>/dev/null)" == "skein-broker" ]]; then
        echo "launch.sh: broker $id already runs as pid $pid (controller restarted): adopting it" >&2
        trap 'kill -TERM "$pid" 2>/dev/null' TERM INT
        # bounded: a broker that outlives this wait is left to the harness' cleanup
        for _ in $(seq 1 432000); do
            [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "skein-broker" ]] || exit 0
            sleep 0.2
        done
        exit 0
    fi
fi

if [[ -n "${CHAOS_CGROUP:-}" ]]; then
    cg=${CHAOS_CGROUP//\{id\}/$id}
    echo $$ > "$cg/cgroup.procs" 2>/dev/null || echo "launch.sh: cannot join $cg" >&2
fi
echo $$ > "$pidf.tmp" && mv "$pidf.tmp" "$pidf"
exec ip netns exec "$ns" "$@"
