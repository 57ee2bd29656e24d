#!/usr/bin/env bash
# Make this machine able to build and test the repo. Idempotent; silent when
# there is nothing to do.
#   - Debian packages: zookeeper (jars in /usr/share/java), a headless JRE,
#     libslf4j-java (slf4j-simple.jar, the logging binding the test server uses).
#   - nftables and util-linux's unshare: the network partition tests cut links inside a
#     network namespace of their own (tests/support/network.py).
#   - kcat, and node with npm (Debian's nodejs, npm) when node is missing: clients the
#     Kafka protocol tests drive (tests/broker/kafka/test_more_clients.py).
#   - .venv/ with `pip install -e '.[test]'`, redone only when pyproject.toml
#     changes (its sha256 is stamped in .venv/.tiered-installed).
#   - tests/js/node_modules/ (KafkaJS) with `npm ci`, redone only when
#     tests/js/package-lock.json changes (stamped in node_modules/.tiered-installed).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

# Serialise concurrent runs (e.g. `make test` and `make bench` side by side).
exec 9<"${BASH_SOURCE[0]}"
flock 9

PYTHON="${PYTHON:-python3}"
VENV="$repo_root/.venv"
STAMP="$VENV/.tiered-installed"

say() { printf 'ensure_env: %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        say "need root (or sudo) to run: $*"
        exit 1
    fi
}

# --- system packages ---------------------------------------------------------
packages=()
if [ ! -f /usr/share/java/zookeeper.jar ] || ! command -v java >/dev/null 2>&1; then
    packages+=(zookeeper default-jre-headless)
fi
if [ ! -f /usr/share/java/slf4j-simple.jar ]; then
    packages+=(libslf4j-java)
fi
if [ ! -x "$VENV/bin/python" ] && ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    packages+=(python3-venv)
fi
if ! command -v kcat >/dev/null 2>&1; then
    packages+=(kcat)
fi
if ! command -v nft >/dev/null 2>&1; then
    packages+=(nftables)
fi
if ! command -v unshare >/dev/null 2>&1; then
    packages+=(util-linux)
fi
if ! command -v node >/dev/null 2>&1; then
    packages+=(nodejs npm)
elif ! command -v npm >/dev/null 2>&1; then
    packages+=(npm)
fi
if [ "${#packages[@]}" -gt 0 ]; then
    say "installing Debian packages: ${packages[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 \
        install -y --no-install-recommends "${packages[@]}"
fi

# --- virtualenv ----------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
fi

want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
have="$(cat "$STAMP" 2>/dev/null || true)"
if [ "$want" != "$have" ]; then
    say "installing the project into .venv (pip install -e '.[test]')"
    rm -f "$STAMP"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test]'
    printf '%s\n' "$want" >"$STAMP"
fi

# --- KafkaJS (tests/js) ------------------------------------------------------
JS_DIR="$repo_root/tests/js"
JS_STAMP="$JS_DIR/node_modules/.tiered-installed"
want_js="$(sha256sum "$JS_DIR/package-lock.json" | cut -d' ' -f1)"
have_js="$(cat "$JS_STAMP" 2>/dev/null || true)"
if [ "$want_js" != "$have_js" ]; then
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        say "node and npm are needed for tests/js (KafkaJS) but are missing"
        exit 1
    fi
    say "installing tests/js's packages (npm ci: KafkaJS)"
    npm ci --prefix "$JS_DIR" --no-audit --no-fund --loglevel=error >&2
    printf '%s\n' "$want_js" >"$JS_STAMP"
fi
