#!/usr/bin/env bash
# Checks that the API document is a contract a generated client can build
# on: starts the server on a free port with a throw-away database of its own
# (the demo chain is seeded into it), downloads the served
# /api/v1/openapi.json, generates a Python client from it with
# openapi-python-client (pinned in scripts/pytools.txt, installed into the
# venv target/pytools), and runs scripts/client_flow.py with it: log in, find
# a medicine in stock, make a sale, register a till and push a batch with one
# sale, read the sales report, then every parameterless list and report.
# Each answer must parse into the generated model and match the document
# exactly. Stops the server and its cluster at the end.
#
#   scripts/client-check.sh          # PHARMACY_BIN defaults to target/debug/pharmacy (built if missing)
#   scripts/client-check.sh --keep   # keep the generated client and the database for a look
#
# Exit status: 0 when the flow passes.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

KEEP=""
case "${1:-}" in
    --keep) KEEP=keep ;;
    "") ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
esac

started=$(date +%s)
OUT="$ROOT/target/client-check"
VENV="$ROOT/target/pytools"
mkdir -p "$OUT"

pytools_venv "$VENV" scripts/pytools.txt
echo "client-check: $("$VENV/bin/openapi-python-client" --version)"

if [ -z "${PHARMACY_BIN:-}" ]; then
    PHARMACY_BIN="$ROOT/target/debug/pharmacy"
    [ -x "$PHARMACY_BIN" ] || cargo build --quiet --bin pharmacy
fi
export PHARMACY_BIN
export PHARMACY__LOG__FORMAT=text PHARMACY__LOG__LEVEL=${CLIENT_CHECK_LOG_LEVEL:-warn}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/client-check.XXXXXX")
cleanup() {
    local status=$?
    server_stop "$KEEP"
    if [ -n "$KEEP" ]; then
        echo "client-check: kept the generated client in $WORK and the database $SERVER_DB"
    else
        rm -rf "$WORK"
    fi
    exit "$status"
}
trap cleanup EXIT

PORT=$(free_port)
PG_PORT=${CLIENT_CHECK_PG_PORT:-54349}
echo "client-check: starting the server on 127.0.0.1:$PORT (log $OUT/server.log)"
server_start "$OUT" "$PORT" "$PG_PORT" client_check

curl -fsS "$SERVER_URL/api/v1/openapi.json" -o "$WORK/openapi.json"
printf 'post_hooks: []\n' >"$WORK/generator.yaml"
"$VENV/bin/openapi-python-client" generate --path "$WORK/openapi.json" \
    --config "$WORK/generator.yaml" --meta none \
    --output-path "$WORK/pharmacy_client" >"$WORK/generate.log" 2>&1 || {
    cat "$WORK/generate.log" >&2
    exit 1
}
# The generator says so when it had to skip part of the document.
if grep -qiE 'warning|error|could not|unable|skipping' "$WORK/generate.log"; then
    echo "client-check: the generator did not take the whole document:" >&2
    cat "$WORK/generate.log" >&2
    exit 1
fi

PYTHONPATH="$WORK" "$VENV/bin/python" scripts/client_flow.py "$SERVER_URL" "$WORK/openapi.json"

if grep -Eq 'panicked|request failed with a server fault' "$SERVER_LOG"; then
    echo "client-check: the server log has panics or server faults:" >&2
    grep -E 'panicked|request failed with a server fault' "$SERVER_LOG" | head -20 >&2
    exit 1
fi
echo "client-check: done in $(($(date +%s) - started)) s"
