#!/usr/bin/env bash
# The broker launcher of a chaos run: `skein-operator local --launcher "launch.sh {id}"` runs
#   launch.sh ID <skein-broker command...>
# for every broker start. Environment (set by chaos.py for the operator, inherited here):
#   CHAOS_STATE   directory with the control files below
#   CHAOS_NS      network namespace name with {id} (the broker's own namespace)
#   CHAOS_CGROUP  blkio cgroup directory with {id} (slow-disk throttling), may be empty
#   CHAOS_FAKETIME libfaketime's library, or empty: the broker runs under it (clock-skew)
#   CHAOS_PROXY_LISTENERS EXT:PROXY, or empty: a second listener on port EXT advertised at port
#                 PROXY, where txn_proxy.py listens (end-txn)
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
if [[ -n "${CHAOS_PROXY_LISTENERS:-}" ]]; then
    # the end-txn fault: a second listener, EXTERNAL, advertised at the proxy in front of it (the
    # producers' way in); the first, as --listen gives it, stays the inter-broker listener
    ext=${CHAOS_PROXY_LISTENERS%%:*}
    proxy=${CHAOS_PROXY_LISTENERS##*:}
    listen=
    prev=
    for arg in "$@"; do
        [[ "$prev" == "--listen" ]] && listen=$arg
        prev=$arg
    done
    host=${listen%:*}
    set -- "$@" --override "listeners=INTERNAL://$listen,EXTERNAL://$host:$ext" \
        --override "advertised.listeners=INTERNAL://$listen,EXTERNAL://$host:$proxy" \
        --override "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT" \
        --override "inter.broker.listener.name=INTERNAL"
fi
if [[ -n "${CHAOS_FAKETIME:-}" ]]; then
    # the clock-skew fault: the wall clock is offset by what $state/clock-ID says (re-read every
    # second); the monotonic clock is not touched
    exec ip netns exec "$ns" env LD_PRELOAD="$CHAOS_FAKETIME" FAKETIME_TIMESTAMP_FILE="$state/clock-$id" \
        FAKETIME_CACHE_DURATION=1 FAKETIME_DONT_FAKE_MONOTONIC=1 "$@"
fi
exec ip netns exec "$ns" "$@"
