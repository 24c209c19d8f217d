# shellcheck shell=bash
# Shared by the scripts that drive a real server (scripts/fuzz.sh,
# scripts/client-check.sh) and by the `openapi_contract` test: pinned Python
# tools in a venv, a free port, and the server on a throw-away database in a
# local PostgreSQL cluster of its own, stopped again at the end.
# Source it from the repository root; it sets no shell options.

# pytools_venv VENV REQUIREMENTS: a venv at VENV holding the pins of the
# REQUIREMENTS file, installed when the venv is missing or the file changed.
pytools_venv() {
    local venv=$1 requirements=$2
    if [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$venv/.requirements"; then
        return 0
    fi
    echo "installing the pinned Python tools of $requirements into $venv" >&2
    python3 -m venv "$venv" || return 1
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" || return 1
    cp "$requirements" "$venv/.requirements"
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on right now.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# server_start OUT PORT PG_PORT NAME: runs "$PHARMACY_BIN" serve on
# 127.0.0.1:PORT with a new database NAME_<time>_<pid> in the cluster under
# OUT/pg (on PG_PORT, or the free port that cluster remembers); the server
# seeds the demo chain into the new database (no DATABASE_URL). Logs to
# OUT/server.log. Returns once /readyz answers. Sets SERVER_PID, SERVER_URL,
# SERVER_LOG and SERVER_DB; call server_stop at exit (trap).
server_start() {
    local out=$1 port=$2 pg_port=$3 name=$4
    mkdir -p "$out"
    SERVER_DB="${name}_$(date +%s)_$$"
    SERVER_URL="http://127.0.0.1:$port"
    SERVER_LOG="$out/server.log"
    export APP_ENV=development HOST=127.0.0.1 PORT="$port"
    export PHARMACY__DEVDB__DIR="$out/pg" PHARMACY__DEVDB__PORT="$pg_port"
    export PHARMACY__DEVDB__DATABASE="$SERVER_DB"
    unset DATABASE_URL
    "$PHARMACY_BIN" serve >"$SERVER_LOG" 2>&1 &
    SERVER_PID=$!
    local _
    for _ in $(seq 1 240); do
        if curl -fsS "$SERVER_URL/readyz" >/dev/null 2>&1; then return 0; fi
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then
            echo "the server did not start:" >&2
            tail -20 "$SERVER_LOG" >&2
            return 1
        fi
        sleep 1
    done
    echo "the server did not become ready in 240 s:" >&2
    tail -20 "$SERVER_LOG" >&2
    return 1
}

# server_stop [keep]: drops the run's database, stops the server and then
# the cluster (unless `keep`: then both stay for a look). Safe to call twice.
server_stop() {
    local keep=${1:-}
    if [ -z "${SERVER_PID:-}" ]; then return 0; fi
    if [ "$keep" != keep ]; then
        local psql="" dir pg_port
        for dir in "${PG_BIN:-}" /usr/lib/postgresql/*/bin; do
            if [ -n "$dir" ] && [ -x "$dir/psql" ]; then psql="$dir/psql"; break; fi
        done
        [ -z "$psql" ] && psql=$(command -v psql || true)
        pg_port=$("$PHARMACY_BIN" devdb status 2>/dev/null | sed -n 's/.*port \([0-9][0-9]*\).*/\1/p' | head -1)
        if [ -n "$psql" ] && [ -n "$pg_port" ]; then
            "$psql" -q "postgres://postgres@127.0.0.1:$pg_port/postgres" \
                -c "DROP DATABASE IF EXISTS $SERVER_DB WITH (FORCE)" >/dev/null 2>&1 || true
        fi
    fi
    if kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    if [ "$keep" != keep ]; then
        # The server stops a cluster it started itself; this one was running
        # before it (an earlier run's) or the server died.
        "$PHARMACY_BIN" devdb stop >/dev/null 2>&1 || true
    fi
    SERVER_PID=""
}
