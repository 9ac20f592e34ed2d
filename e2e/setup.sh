#!/usr/bin/env bash
# Installs everything the e2e compatibility suite needs. Idempotent, non-interactive,
# safe to run as root in CI on a fresh Debian 12 machine, from any clone location.
#
#   - kcat (Debian package)                          -> /usr/bin/kcat
#   - openssl (Debian package; TLS test certificates) -> /usr/bin/openssl
#   - Python venv with pinned requirements.txt      -> e2e/.venv
#   - kafkajs + snappy/lz4 codecs (package-lock.json) -> e2e/js/node_modules
#   - Java kafka-clients driver (Maven)             -> e2e/java/target (+ target/classpath.txt)
#   - franz-go client driver (Go module proxy)      -> e2e/go/bin/franz
#   - Apache Kafka server + CLI tools + Connect (runtime, JSON converter, file connectors) jars (Maven)
#                                                   -> e2e/.cache/kafka-$KAFKA_VERSION/libs
#   - SeaweedFS `weed` (S3 server of the tiered-storage tests), built from the Go module proxy
#     by tools/seaweedfs-build.sh (8-10 min cold) -> ${SKEIN_CACHE:-~/.cache/skein}/seaweedfs/<ver>/weed
#     Skipped when SKEIN_WEED_BIN names a binary, or with SKEIN_SEAWEEDFS_SKIP=1 (test.sh builds it
#     in the background meanwhile).
#
# Needs: apt-get, python3 (+venv), node/npm, java 17+, mvn, go. Each step is skipped when its
# inputs did not change since the last successful run (stamp files hold a hash of the inputs).
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$E2E_DIR/kafka-dist/pom.xml")"
CACHE="$E2E_DIR/.cache"
mkdir -p "$CACHE"
MVN=(mvn -B -q -T1 -Dstyle.color=never)

say() { printf '\n==> [e2e setup] %s\n' "$*"; }
hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }
fresh() { [[ -f "$1" && "$(cat "$1")" == "$2" ]]; }

for tool in python3 node npm java mvn go; do
    command -v "$tool" >/dev/null || { echo "e2e setup: required tool '$tool' not found on PATH" >&2; exit 1; }
done

# 1. kcat -----------------------------------------------------------------------------------
if command -v kcat >/dev/null; then
    say "kcat already installed: $(kcat -V 2>&1 | grep -i version | head -1)"
else
    say "installing kcat (apt-get install -y kcat)"
    if [[ $(id -u) -ne 0 ]]; then
        echo "e2e setup: kcat missing and not root; install it with 'apt-get install -y kcat'" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-cache policy kcat 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        apt-get update -q
    fi
    apt-get install -y -q kcat
fi

# 1b/1c. Debian tools: iproute2 (ip netns: the network-partition test), openssl (the TLS tests
# make their certificates with it) ------------------------------------------------------------
ensure_tool() { # COMMAND PACKAGE
    if command -v "$1" >/dev/null; then
        say "$2 already installed"
    else
        say "installing $2 (apt-get install -y $2)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q "$2" || { apt-get update -q && apt-get install -y -q "$2"; }
    fi
}
ensure_tool ip iproute2
ensure_tool openssl openssl
# gdb: a chaos client that does not finish has its native threads' stacks taken before it is
# killed (librdkafka's own deadlocks, e2e/chaos/README.md)
ensure_tool gdb gdb
# libfaketime: the chaos run's clock-skew fault runs each broker under it (e2e/chaos/README.md)
if [[ -f /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ]]; then
    say "libfaketime already installed"
else
    say "installing libfaketime (apt-get install -y libfaketime)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q libfaketime || { apt-get update -q && apt-get install -y -q libfaketime; }
fi

# 2. Python venv ----------------------------------------------------------------------------
VENV="$E2E_DIR/.venv"
h=$(hash_of "$E2E_DIR/requirements.txt")
if fresh "$VENV/.stamp" "$h" && [[ -x "$VENV/bin/python" ]]; then
    say "python venv up to date: $VENV"
else
    say "creating python venv $VENV with: $(grep -v '^#' "$E2E_DIR/requirements.txt" | tr '\n' ' ')"
    rm -rf "$VENV"
    if ! python3 -m venv "$VENV"; then
        say "python3 -m venv failed: installing python3-venv (apt)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q python3-venv || { apt-get update -q && apt-get install -y -q python3-venv; }
        rm -rf "$VENV" && python3 -m venv "$VENV"
    fi
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$E2E_DIR/requirements.txt"
    echo "$h" > "$VENV/.stamp"
fi

# 3. kafkajs --------------------------------------------------------------------------------
# kafkajs-lz4 depends on the 'lz4' package, whose install script compiles a small native addon
# with node-gyp against the local node headers (the tarball ships only macOS binaries); that needs
# make + g++. There is no zstd codec for kafkajs that builds here (cppzst fails with Node 20), so
# kafkajs is tested with none/gzip/snappy/lz4.
h="native-lz4-$(hash_of "$E2E_DIR/js/package.json" "$E2E_DIR/js/package-lock.json")"
if fresh "$E2E_DIR/js/node_modules/.e2e-stamp" "$h"; then
    say "kafkajs node_modules up to date"
else
    if ! command -v make >/dev/null || ! command -v g++ >/dev/null; then
        say "installing make + g++ for the lz4 native addon (apt-get install -y make g++)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q make g++ || { apt-get update -q && apt-get install -y -q make g++; }
    fi
    # node-gyp builds against the Debian nodejs package's headers (/usr/include/node) rather than
    # downloading them from nodejs.org, which is not reachable here; the machine's ~/.npmrc says
    # so too, but a fresh home must not depend on it.
    if [[ -z "$(npm config get nodedir 2>/dev/null | grep -v '^undefined$')" && -f /usr/include/node/node.h ]]; then
        export npm_config_nodedir=/usr
    fi
    say "npm ci in e2e/js (kafkajs, kafkajs-snappy, kafkajs-lz4 + native lz4 build)"
    (cd "$E2E_DIR/js" && npm ci --no-audit --no-fund --foreground-scripts)
    (cd "$E2E_DIR/js" && node -e '
        const L = require("kafkajs-lz4"); const c = new (L.default || L)().codec();
        c.compress({ buffer: Buffer.from("x".repeat(100)) }).then(b => c.decompress(b))
         .then(d => { if (d.length !== 100) throw new Error("lz4 roundtrip"); require("kafkajs-snappy"); })
         .catch(e => { console.error("kafkajs codec check failed:", e); process.exit(1); });') \
        || { echo "e2e setup: kafkajs lz4/snappy codecs do not load" >&2; exit 1; }
    echo "$h" > "$E2E_DIR/js/node_modules/.e2e-stamp"
fi

# 4. Java client driver ---------------------------------------------------------------------
h=$(hash_of "$E2E_DIR/java/pom.xml" $(find "$E2E_DIR/java/src" -type f | sort))
if fresh "$E2E_DIR/java/target/.e2e-stamp" "$h" && [[ -f "$E2E_DIR/java/target/classpath.txt" ]]; then
    say "java client driver up to date"
else
    say "building java client driver (kafka-clients $KAFKA_VERSION) with maven"
    "${MVN[@]}" -f "$E2E_DIR/java/pom.xml" package dependency:build-classpath \
        -Dmdep.outputFile="$E2E_DIR/java/target/classpath.txt"
    echo "$h" > "$E2E_DIR/java/target/.e2e-stamp"
fi

# 4b. franz-go client driver (Go module proxy) -------------------------------------------------
h=$(hash_of "$E2E_DIR/go/go.mod" "$E2E_DIR/go/go.sum" "$E2E_DIR/go/main.go")
if fresh "$E2E_DIR/go/bin/.e2e-stamp" "$h" && [[ -x "$E2E_DIR/go/bin/franz" ]]; then
    say "franz-go client driver up to date"
else
    say "building the franz-go client driver (e2e/go) with go build"
    (cd "$E2E_DIR/go" && go build -trimpath -o bin/franz .)
    echo "$h" > "$E2E_DIR/go/bin/.e2e-stamp"
fi

# 5. Apache Kafka server + tools + Connect jars --------------------------------------------
KLIBS="$CACHE/kafka-$KAFKA_VERSION/libs"
h=$(hash_of "$E2E_DIR/kafka-dist/pom.xml")
if fresh "$CACHE/kafka-$KAFKA_VERSION/.stamp" "$h" && [[ -d "$KLIBS" ]]; then
    say "Apache Kafka $KAFKA_VERSION jars up to date: $KLIBS"
else
    say "fetching Apache Kafka $KAFKA_VERSION server + tools jars into $KLIBS"
    rm -rf "$KLIBS"
    "${MVN[@]}" -f "$E2E_DIR/kafka-dist/pom.xml" dependency:copy-dependencies \
        -DoutputDirectory="$KLIBS" -DincludeScope=runtime
    echo "$h" > "$CACHE/kafka-$KAFKA_VERSION/.stamp"
fi

# 5b. Kafka Connect (its own release: e2e/connect-dist/pom.xml says why) -----------------------
CONNECT_VERSION="$(sed -n 's:.*<connect.version>\(.*\)</connect.version>.*:\1:p' "$E2E_DIR/connect-dist/pom.xml")"
CLIBS="$CACHE/connect-$CONNECT_VERSION/libs"
h=$(hash_of "$E2E_DIR/connect-dist/pom.xml")
if fresh "$CACHE/connect-$CONNECT_VERSION/.stamp" "$h" && [[ -d "$CLIBS" ]]; then
    say "Kafka Connect $CONNECT_VERSION jars up to date: $CLIBS"
else
    say "fetching Kafka Connect $CONNECT_VERSION (runtime, JSON converter, file connectors) into $CLIBS"
    rm -rf "$CLIBS"
    "${MVN[@]}" -f "$E2E_DIR/connect-dist/pom.xml" dependency:copy-dependencies \
        -DoutputDirectory="$CLIBS" -DincludeScope=runtime
    echo "$h" > "$CACHE/connect-$CONNECT_VERSION/.stamp"
fi

# 6. SeaweedFS (tiered-storage tests) --------------------------------------------------------
if [[ -n "${SKEIN_WEED_BIN:-}" ]]; then
    [[ -x "$SKEIN_WEED_BIN" ]] || { echo "e2e setup: SKEIN_WEED_BIN=$SKEIN_WEED_BIN is not executable" >&2; exit 1; }
    say "SeaweedFS: SKEIN_WEED_BIN=$SKEIN_WEED_BIN"
elif [[ "${SKEIN_SEAWEEDFS_SKIP:-0}" == 1 ]]; then
    say "SeaweedFS: not built here (SKEIN_SEAWEEDFS_SKIP=1: the caller builds it)"
else
    weed=$(bash "$E2E_DIR/tools/seaweedfs-build.sh") || { echo "e2e setup: SeaweedFS build failed" >&2; exit 1; }
    say "SeaweedFS: $weed"
fi

say "ready: $(kcat -V 2>&1 | grep -i 'version' | head -1); $("$VENV/bin/python" -c 'import confluent_kafka,kafka;print("confluent-kafka",confluent_kafka.__version__,"(librdkafka",confluent_kafka.libversion()[0]+"), kafka-python",kafka.__version__)'); kafkajs $(node -p 'require(process.argv[1]).version' "$E2E_DIR/js/node_modules/kafkajs/package.json"); Apache Kafka $KAFKA_VERSION ($(ls "$KLIBS" | wc -l) jars)"
