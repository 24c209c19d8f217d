#!/usr/bin/env bash
# The scale-out topology on one machine, from the machine's own PostgreSQL
# and HAProxy: a primary, a streaming standby made with pg_basebackup, N
# service processes (reads that may lag go to the standby) and HAProxy in
# front, routing by branch (deploy/haproxy.cfg).
#
#   deploy/local-cluster.sh up [--processes N] [--balance affinity|roundrobin]
#                              [--dir DIR] [--port PORT]
#   deploy/local-cluster.sh status [--dir DIR]
#   deploy/local-cluster.sh down [--dir DIR] [--purge]
#   deploy/local-cluster.sh stop-primary|start-primary|stop-standby|start-standby [--dir DIR]
#
# `up` migrates, creates an admin and prints BASE_URL=, ADMIN_EMAIL=,
# ADMIN_PASSWORD= (and more) lines, also kept in DIR/cluster.env. Running
# `up` again on a running cluster prints them again; on a stopped one it
# starts the same data again. `down` stops everything `up` started and
# checks that nothing is left running; `--purge` also deletes the data.
# `stop-*`/`start-*` stop (fast shutdown) or start one PostgreSQL server of
# a running cluster: fault drills (the service answers 503 with Retry-After
# while the primary is down, and reads the primary while the standby is).
#
# Defaults: 2 processes, affinity on, DIR = target/local-cluster, HAProxy on
# 127.0.0.1:18080 (stats on PORT-1, processes on PORT+1.., the primary on
# PORT+352 and the standby on PORT+353). The environment may say the same:
# CLUSTER_PROCESSES, CLUSTER_BALANCE, CLUSTER_DIR, CLUSTER_PORT. The service
# binary is PHARMACY_BIN, else target/release/pharmacy, else
# target/debug/pharmacy. Other PHARMACY__* variables reach every process;
# fiscal documents queue unsent (PHARMACY__FISCAL__MODE=off) unless the
# environment names a mode.
#
# It installs nothing: a missing program is named with its Debian package.
# As root, PostgreSQL runs as the `postgres` system user (initdb refuses
# root), or `nobody` when there is no such user.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COMMAND="${1:-}"
[[ $# -gt 0 ]] && shift

PROCESSES="${CLUSTER_PROCESSES:-2}"
BALANCE="${CLUSTER_BALANCE:-affinity}"
DIR="${CLUSTER_DIR:-$ROOT/target/local-cluster}"
PORT="${CLUSTER_PORT:-18080}"
PURGE=0

usage() {
    sed -n '2,31p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit "${1:-2}"
}

while [[ $# -gt 0 ]]; do
    case "$1" in
        --processes) PROCESSES="$2"; shift 2 ;;
        --balance) BALANCE="$2"; shift 2 ;;
        --dir) DIR="$2"; shift 2 ;;
        --port) PORT="$2"; shift 2 ;;
        --purge) PURGE=1; shift ;;
        -h|--help) usage 0 ;;
        *) echo "unknown option: $1" >&2; usage ;;
    esac
done

[[ "$PROCESSES" =~ ^[1-8]$ ]] || { echo "--processes must be 1 to 8 (deploy/haproxy.cfg names 8 servers)" >&2; exit 2; }
[[ "$BALANCE" == affinity || "$BALANCE" == roundrobin ]] || { echo "--balance must be affinity or roundrobin" >&2; exit 2; }
[[ "$PORT" =~ ^[0-9]+$ ]] && (( PORT > 1024 && PORT < 65000 )) || { echo "--port must be 1025..64999" >&2; exit 2; }
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
# `status` and `down` use the ports and size `up` was given.
if [[ "$COMMAND" != up && -f "$DIR/settings" ]]; then
    # shellcheck disable=SC1091
    source "$DIR/settings"
fi

STATS_PORT=$((PORT - 1))
PRIMARY_PORT=$((PORT + 352))
STANDBY_PORT=$((PORT + 353))
DB=pharmacy
ADMIN_EMAIL=admin@cluster.local
SLOT=pharmacy_standby

# The helpers both cluster scripts share (say, die, the PostgreSQL user,
# process and HAProxy start-up).
# shellcheck source=deploy/cluster-lib.sh
PG_DIR_PREFIX=cluster
source "$ROOT/deploy/cluster-lib.sh"

# --- what the machine must have ------------------------------------------------

PG_BIN="$(find_pg_bin)"

require_programs() {
    local missing=()
    for p in initdb pg_ctl postgres pg_basebackup psql; do
        [[ -n "$PG_BIN" && -x "$PG_BIN/$p" ]] || { missing+=("postgresql (PostgreSQL's server and client binaries: $p)"); break; }
    done
    command -v haproxy >/dev/null || missing+=("haproxy")
    command -v curl >/dev/null || missing+=("curl")
    if [[ $EUID -eq 0 ]]; then
        command -v runuser >/dev/null || missing+=("util-linux (runuser)")
    fi
    if [[ ${#missing[@]} -gt 0 ]]; then
        say "missing Debian packages; install them with:"
        say "  apt-get install -y $(printf '%s\n' "${missing[@]}" | cut -d' ' -f1 | sort -u | tr '\n' ' ')"
        for m in "${missing[@]}"; do say "  - $m"; done
        exit 1
    fi
    if ! haproxy -vv 2>/dev/null | grep -q 'Built with the Prometheus exporter'; then
        say "note: this HAProxy has no Prometheus exporter; /metrics on the stats port will not answer"
    fi
}

# --- small helpers -----------------------------------------------------------------

pg_running() { # datadir
    as_pg "$PG_BIN/pg_ctl" status -D "$1" >/dev/null 2>&1
}

# --- up ------------------------------------------------------------------------------

start_primary() {
    local pg="$1" data="$1/primary"
    if [[ ! -f "$data/PG_VERSION" ]]; then
        say "initdb: the primary in $data"
        as_pg "$PG_BIN/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --no-locale >/dev/null
        as_pg tee -a "$data/postgresql.conf" >/dev/null <<EOF

# deploy/local-cluster.sh
listen_addresses = '127.0.0.1'
port = $PRIMARY_PORT
unix_socket_directories = '$pg/run'
max_connections = 400
wal_level = replica
max_wal_senders = 10
max_replication_slots = 10
hot_standby = on
hot_standby_feedback = on
EOF
    fi
    say "starting the primary on 127.0.0.1:$PRIMARY_PORT"
    as_pg "$PG_BIN/pg_ctl" start -w -t 60 -D "$data" -l "$pg/log/primary.log" >/dev/null \
        || { tail -n 20 "$pg/log/primary.log" >&2; die "the primary did not start"; }
    if [[ -z "$(psql_at "$PRIMARY_PORT" "SELECT 1 FROM pg_database WHERE datname = '$DB'")" ]]; then
        psql_at "$PRIMARY_PORT" "CREATE DATABASE $DB" >/dev/null
    fi
}

start_standby() {
    local pg="$1" data="$1/standby"
    if [[ ! -f "$data/PG_VERSION" ]]; then
        say "pg_basebackup: the standby in $data"
        local slot_args=(-C -S "$SLOT")
        if [[ -n "$(psql_at "$PRIMARY_PORT" "SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT'")" ]]; then
            slot_args=(-S "$SLOT")
        fi
        as_pg "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$PRIMARY_PORT" -U postgres \
            -D "$data" -R -X stream -c fast "${slot_args[@]}"
        as_pg tee -a "$data/postgresql.auto.conf" >/dev/null <<EOF
port = $STANDBY_PORT
EOF
    fi
    say "starting the standby on 127.0.0.1:$STANDBY_PORT"
    as_pg "$PG_BIN/pg_ctl" start -w -t 60 -D "$data" -l "$pg/log/standby.log" >/dev/null \
        || { tail -n 20 "$pg/log/standby.log" >&2; die "the standby did not start"; }
    local i
    for ((i = 0; i < 100; i++)); do
        [[ "$(psql_at "$STANDBY_PORT" "SELECT status FROM pg_stat_wal_receiver" 2>/dev/null)" == streaming ]] && return 0
        sleep 0.1
    done
    die "the standby is not streaming from the primary (see $pg/log/standby.log)"
}

up() {
    require_programs
    local bin
    bin="$(service_bin)"
    mkdir -p "$DIR/pids" "$DIR/log"
    local running=0 p
    for f in "$DIR"/pids/*.pid; do
        [[ -f "$f" ]] && alive "$(cat "$f")" && running=1
    done
    if [[ $running -eq 1 ]]; then
        if [[ -f "$DIR/cluster.env" ]]; then
            say "the cluster in $DIR is already running"
            print_env
            return 0
        fi
        die "a cluster in $DIR is partly running; run \`$0 down --dir $DIR\` first"
    fi
    for p in "$PORT" "$STATS_PORT" "$PRIMARY_PORT" "$STANDBY_PORT" $(seq $((PORT + 1)) $((PORT + PROCESSES))); do
        port_busy "$p" && die "port $p is in use; choose other ports with --port"
    done
    printf 'PORT=%s\nPROCESSES=%s\nBALANCE=%s\n' "$PORT" "$PROCESSES" "$BALANCE" >"$DIR/settings"
    UP_DONE=0
    trap 'if [[ $UP_DONE -eq 0 ]]; then say "up failed; stopping what it started"; down_all >/dev/null 2>&1 || true; fi' EXIT

    local pg
    pg="$(pg_dir)"
    as_pg mkdir -p "$pg/run" "$pg/log"
    start_primary "$pg"
    start_standby "$pg"

    PRIMARY_URL="postgres://postgres@127.0.0.1:$PRIMARY_PORT/$DB"
    STANDBY_URL="postgres://postgres@127.0.0.1:$STANDBY_PORT/$DB"
    if [[ ! -f "$DIR/secrets.env" ]]; then
        (umask 077 && printf 'JWT_SECRET=%s\nADMIN_PASSWORD=%s\n' "$(random_hex 32)" "Cl-$(random_hex 9)" >"$DIR/secrets.env")
    fi
    # shellcheck disable=SC1091
    source "$DIR/secrets.env"

    say "migrating and creating the admin"
    (cd "$ROOT" && DATABASE_URL="$PRIMARY_URL" JWT_SECRET="$JWT_SECRET" "$bin" migrate >>"$DIR/log/setup.log" 2>&1) \
        || { tail -n 20 "$DIR/log/setup.log" >&2; die "migrate failed"; }
    (cd "$ROOT" && DATABASE_URL="$PRIMARY_URL" JWT_SECRET="$JWT_SECRET" "$bin" create-admin \
        --email "$ADMIN_EMAIL" --password "$ADMIN_PASSWORD" --name "Cluster Admin" >>"$DIR/log/setup.log" 2>&1) \
        || { tail -n 20 "$DIR/log/setup.log" >&2; die "create-admin failed"; }

    local i
    for ((i = 1; i <= PROCESSES; i++)); do start_process "$i" "$bin"; done
    for ((i = 1; i <= PROCESSES; i++)); do
        wait_http "http://127.0.0.1:$((PORT + i))/readyz" 60 "service process p$i"
    done
    start_haproxy
    wait_http "http://127.0.0.1:$PORT/readyz" 20 "HAProxy"
    UP_DONE=1

    local urls=""
    for ((i = 1; i <= PROCESSES; i++)); do urls+="${urls:+ }http://127.0.0.1:$((PORT + i))"; done
    cat >"$DIR/cluster.env" <<EOF
BASE_URL=http://127.0.0.1:$PORT/api/v1
ADMIN_EMAIL=$ADMIN_EMAIL
ADMIN_PASSWORD=$ADMIN_PASSWORD
ROOT_URL=http://127.0.0.1:$PORT
DATABASE_URL=$PRIMARY_URL
DATABASE_READ_URL=$STANDBY_URL
PROCESS_URLS="$urls"
HAPROXY_STATS_URL=http://127.0.0.1:$STATS_PORT/stats
BALANCE=$BALANCE
PROCESSES=$PROCESSES
CLUSTER_DIR=$DIR
EOF
    chmod 600 "$DIR/cluster.env"
    print_env
}

# --- down ------------------------------------------------------------------------------

stop_pid() { # name signal-wait-seconds
    local name="$1" secs="$2" pid i
    pid="$(pid_of "$name")"
    if alive "$pid"; then
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < secs * 10; i++)); do alive "$pid" || break; sleep 0.1; done
        if alive "$pid"; then
            say "$name did not stop within $secs s of SIGTERM; killing it"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.2
        fi
    fi
    rm -f "$DIR/pids/$name.pid"
}

down_all() {
    local name pg
    stop_pid haproxy 10
    for f in "$DIR"/pids/p*.pid; do
        [[ -f "$f" ]] || continue
        name="$(basename "$f" .pid)"
        stop_pid "$name" 30
    done
    if [[ -f "$DIR/pgdir" ]]; then
        pg="$(cat "$DIR/pgdir")"
        for data in "$pg/standby" "$pg/primary"; do
            if [[ -f "$data/PG_VERSION" ]] && pg_running "$data"; then
                as_pg "$PG_BIN/pg_ctl" stop -w -t 60 -m fast -D "$data" >/dev/null
            fi
        done
    fi
}

down() {
    [[ -d "$DIR" ]] || { say "nothing to stop in $DIR"; return 0; }
    down_all
    local left=0 pg
    for f in "$DIR"/pids/*.pid; do
        [[ -f "$f" ]] && alive "$(cat "$f")" && { say "still running: $(basename "$f" .pid)"; left=1; }
    done
    if [[ -f "$DIR/pgdir" ]]; then
        pg="$(cat "$DIR/pgdir")"
        for data in "$pg/standby" "$pg/primary"; do
            [[ -f "$data/PG_VERSION" ]] && pg_running "$data" && { say "still running: PostgreSQL in $data"; left=1; }
        done
    fi
    [[ $left -eq 0 ]] || die "some parts of the cluster are still running"
    rm -f "$DIR/cluster.env"
    if [[ $PURGE -eq 1 ]]; then
        if [[ -f "$DIR/pgdir" ]]; then
            pg="$(cat "$DIR/pgdir")"
            [[ "$pg" != "$DIR/pg" ]] && rm -rf "$pg"
        fi
        rm -rf "$DIR"
        say "stopped; $DIR deleted"
    else
        say "stopped; data kept in $DIR (\`down --purge\` deletes it)"
    fi
}

# --- status -------------------------------------------------------------------------------

status() {
    [[ -d "$DIR/pids" ]] || { echo "no cluster in $DIR"; return 0; }
    local pid name pg
    for f in "$DIR"/pids/*.pid; do
        [[ -f "$f" ]] || continue
        name="$(basename "$f" .pid)"
        pid="$(cat "$f")"
        if alive "$pid"; then echo "$name: running (pid $pid)"; else echo "$name: stopped"; fi
    done
    if [[ -f "$DIR/pgdir" ]]; then
        pg="$(cat "$DIR/pgdir")"
        for role in primary standby; do
            if [[ -f "$pg/$role/PG_VERSION" ]] && pg_running "$pg/$role"; then
                echo "$role: running ($pg/$role)"
            else
                echo "$role: stopped"
            fi
        done
        if pg_running "$pg/standby" 2>/dev/null; then
            echo "standby: $(psql_at "$STANDBY_PORT" "SELECT coalesce((SELECT status FROM pg_stat_wal_receiver), 'not streaming') || ', replay lag ' || CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN '0 s (caught up)' ELSE coalesce(round(extract(epoch FROM now() - pg_last_xact_replay_timestamp())::numeric, 1)::text || ' s', 'unknown') END" 2>/dev/null || echo unknown)"
        fi
    fi
    if alive "$(pid_of haproxy)"; then
        echo "HAProxy backends:"
        curl -fsS --max-time 2 "http://127.0.0.1:$STATS_PORT/stats;csv" 2>/dev/null \
            | awk -F, '$1 == "pharmacy" && $2 ~ /^p[0-9]/ { print "  " $2 ": " $18 }' || true
    fi
    [[ -f "$DIR/cluster.env" ]] && { echo; print_env; }
    return 0
}

# --- fault drills -------------------------------------------------------------------------

drill() { # stop|start primary|standby
    local action="$1" role="$2" pg
    [[ -f "$DIR/pgdir" ]] || die "no cluster in $DIR"
    pg="$(cat "$DIR/pgdir")"
    [[ -f "$pg/$role/PG_VERSION" ]] || die "no $role in $pg"
    if [[ "$action" == stop ]]; then
        pg_running "$pg/$role" || { say "the $role is not running"; return 0; }
        as_pg "$PG_BIN/pg_ctl" stop -w -t 60 -m fast -D "$pg/$role" >/dev/null
        say "the $role stopped"
    else
        pg_running "$pg/$role" && { say "the $role is running"; return 0; }
        as_pg "$PG_BIN/pg_ctl" start -w -t 60 -D "$pg/$role" -l "$pg/log/$role.log" >/dev/null \
            || { tail -n 20 "$pg/log/$role.log" >&2; die "the $role did not start"; }
        say "the $role started"
    fi
}

case "$COMMAND" in
    up) up ;;
    down) down ;;
    status) status ;;
    stop-primary) drill stop primary ;;
    start-primary) drill start primary ;;
    stop-standby) drill stop standby ;;
    start-standby) drill start standby ;;
    *) usage ;;
esac
