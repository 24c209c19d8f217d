#!/usr/bin/env bash
# The high-availability topology on one machine, from Debian's packages and
# no container runtime: three etcd members (the consensus store), three
# PostgreSQL nodes managed by Patroni (one leader, two replicas, synchronous
# replication: an acknowledged commit exists on two nodes), HAProxy routing
# database connections by Patroni's REST API (deploy/haproxy-patroni.cfg:
# writes to the leader, reads to the replicas), N service processes, and the
# branch-affine HAProxy of the scale-out round in front (deploy/haproxy.cfg).
#
#   deploy/ha-cluster.sh up [--processes N] [--balance affinity|roundrobin]
#                           [--dir DIR] [--port PORT] [--strict]
#   deploy/ha-cluster.sh status [--dir DIR]
#   deploy/ha-cluster.sh down [--dir DIR] [--purge]
#   deploy/ha-cluster.sh leader [--dir DIR]           # the leader's node name
#   deploy/ha-cluster.sh members [--dir DIR]          # Patroni's view: name role state lag timeline
#   deploy/ha-cluster.sh kill-primary [--dir DIR]     # kill -9 the leader's postmaster
#   deploy/ha-cluster.sh kill-replica [--dir DIR]     # kill -9 the synchronous standby's postmaster
#   deploy/ha-cluster.sh stop-node|start-node NODE [--dir DIR]  # a whole node (Patroni and PostgreSQL)
#   deploy/ha-cluster.sh kill-node [--dir DIR]        # kill -9 the leader's Patroni and postmaster (a node lost)
#   deploy/ha-cluster.sh stop-leader [--dir DIR]      # stop the leader's node in order (maintenance); prints its name
#   deploy/ha-cluster.sh kill-replicas [--dir DIR]    # kill -9 both replicas' Patroni and postmaster (two nodes lost)
#   deploy/ha-cluster.sh freeze-leader|thaw NODE [--dir DIR]    # SIGSTOP / SIGCONT the leader's Patroni
#   deploy/ha-cluster.sh kill-etcd [MEMBER] [--dir DIR]         # kill -9 one etcd member (default e3)
#   deploy/ha-cluster.sh start-etcd [MEMBER] [--dir DIR]
#   deploy/ha-cluster.sh wait-healthy [--dir DIR]     # a leader, two streaming replicas, one synchronous
#
# `up` migrates, creates an admin and prints the same lines as
# deploy/local-cluster.sh (BASE_URL=, ADMIN_EMAIL=, ADMIN_PASSWORD=,
# DATABASE_URL= ...) plus the HA ones (PATRONI_URLS=, ETCD_URLS=,
# PG_HAPROXY_STATS_URL=), also kept in DIR/cluster.env. DATABASE_URL names
# HAProxy's write port and DATABASE_READ_URL its read port: the service
# follows the leader without being told. Running `up` again on a running
# cluster prints them again; on a stopped one it starts the same data again.
# `down` stops everything and checks that nothing is left running;
# `--purge` also deletes the data.
#
# Patroni runs with synchronous_mode: true (a commit is acknowledged once
# the synchronous standby has it; without any standby the leader goes on
# alone). `--strict` sets synchronous_mode_strict: true instead (without a
# standby, commits wait): an operator's choice between availability and
# never running on one copy (docs/ha.md).
#
# Defaults: 2 processes, affinity on, DIR = target/ha-cluster, HAProxy on
# 127.0.0.1:18480 (stats on PORT-1, processes on PORT+1..). Around PORT+300:
# the database HAProxy (write PORT+300, read PORT+301, stats PORT+302), the
# PostgreSQL nodes (PORT+311..313), Patroni's REST APIs (PORT+321..323), etcd
# clients (PORT+331..333) and peers (PORT+341..343). The environment may say
# the same: CLUSTER_PROCESSES, CLUSTER_BALANCE, CLUSTER_DIR, CLUSTER_PORT,
# HA_STRICT=1. The service binary is PHARMACY_BIN, else
# target/release/pharmacy, else target/debug/pharmacy; other PHARMACY__*
# variables reach every process; fiscal documents queue unsent unless the
# environment names a mode.
#
# It installs nothing: a missing program is named with its Debian package
# (patroni, etcd-server, haproxy, postgresql). As root, PostgreSQL and
# Patroni run as the `postgres` system user (initdb refuses root).
#
# (Over 600 lines, like local-cluster.sh beside it, because up, down,
# status and the drills share one order of parts and one set of ports;
# split, each piece would repeat them.)

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COMMAND="${1:-}"
[[ $# -gt 0 ]] && shift
ARG=""
if [[ $# -gt 0 && "$1" != --* ]]; then ARG="$1"; shift; fi

PROCESSES="${CLUSTER_PROCESSES:-2}"
BALANCE="${CLUSTER_BALANCE:-affinity}"
DIR="${CLUSTER_DIR:-$ROOT/target/ha-cluster}"
PORT="${CLUSTER_PORT:-18480}"
STRICT="${HA_STRICT:-0}"
PURGE=0

usage() {
    sed -n '2,55p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit "${1:-2}"
}

while [[ $# -gt 0 ]]; do
    case "$1" in
        --processes) PROCESSES="$2"; shift 2 ;;
        --balance) BALANCE="$2"; shift 2 ;;
        --dir) DIR="$2"; shift 2 ;;
        --port) PORT="$2"; shift 2 ;;
        --strict) STRICT=1; shift ;;
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
# Every command but `up` uses the ports and size `up` was given.
if [[ "$COMMAND" != up && -f "$DIR/settings" ]]; then
    # shellcheck disable=SC1091
    source "$DIR/settings"
fi

NODES=(node1 node2 node3)
MEMBERS=(e1 e2 e3)
STATS_PORT=$((PORT - 1))
PG_WRITE_PORT=$((PORT + 300))
PG_READ_PORT=$((PORT + 301))
PG_STATS_PORT=$((PORT + 302))
pg_port() { echo $((PORT + 310 + ${1#node})); }
rest_port() { echo $((PORT + 320 + ${1#node})); }
etcd_client_port() { echo $((PORT + 330 + ${1#e})); }
etcd_peer_port() { echo $((PORT + 340 + ${1#e})); }
DB=pharmacy
ADMIN_EMAIL=admin@cluster.local
SCOPE=pharmacy

# The helpers both cluster scripts share (say, die, the PostgreSQL user,
# process and HAProxy start-up).
# shellcheck source=deploy/cluster-lib.sh
PG_DIR_PREFIX=ha
source "$ROOT/deploy/cluster-lib.sh"

# --- what the machine must have ------------------------------------------------

PG_BIN="$(find_pg_bin)"

require_programs() {
    local missing=()
    for p in initdb pg_ctl postgres pg_basebackup pg_rewind psql; do
        [[ -n "$PG_BIN" && -x "$PG_BIN/$p" ]] || { missing+=("postgresql (PostgreSQL's server and client binaries: $p)"); break; }
    done
    command -v patroni >/dev/null || missing+=("patroni")
    command -v etcd >/dev/null || missing+=("etcd-server")
    command -v haproxy >/dev/null || missing+=("haproxy")
    command -v curl >/dev/null || missing+=("curl")
    command -v python3 >/dev/null || missing+=("python3")
    if [[ $EUID -eq 0 ]]; then
        command -v runuser >/dev/null || missing+=("util-linux (runuser)")
    fi
    if [[ ${#missing[@]} -gt 0 ]]; then
        say "missing Debian packages; install them with:"
        say "  apt-get install -y $(printf '%s\n' "${missing[@]}" | cut -d' ' -f1 | sort -u | tr '\n' ' ')"
        for m in "${missing[@]}"; do say "  - $m"; done
        exit 1
    fi
}

# --- small helpers -----------------------------------------------------------------

# Patroni's view of the cluster, from the first REST API that answers:
# one line per member, `name role state lag timeline` (role: leader,
# sync_standby, replica).
members() {
    local n out
    for n in "${NODES[@]}"; do
        out=$(curl -fsS --max-time 2 "http://127.0.0.1:$(rest_port "$n")/cluster" 2>/dev/null) || continue
        python3 -c '
import json, sys
for m in json.loads(sys.argv[1]).get("members", []):
    print(m.get("name"), m.get("role"), m.get("state"), m.get("lag", 0), m.get("timeline"))
' "$out"
        return 0
    done
    return 1
}

leader() { members 2>/dev/null | awk '$2 == "leader" && $3 == "running" { print $1; exit }'; }

# The postmaster of NODE (its data directory's postmaster.pid), if running.
postmaster_pid() {
    local pg f pid
    pg="$(cat "$DIR/pgdir")"
    f="$pg/$1/data/postmaster.pid"
    [[ -f "$f" ]] || return 0
    pid=$(head -n1 "$f" 2>/dev/null || true)
    alive "$pid" && echo "$pid"
    return 0
}

# --- up ------------------------------------------------------------------------------

start_etcd() { # member
    local m="$1" cluster="" e
    for e in "${MEMBERS[@]}"; do cluster+="${cluster:+,}$e=http://127.0.0.1:$(etcd_peer_port "$e")"; done
    mkdir -p "$DIR/etcd"
    say "starting etcd member $m on 127.0.0.1:$(etcd_client_port "$m")"
    (
        cd /
        # A slow shared machine: a longer election timeout than etcd's 1 s
        # keeps a busy member from being voted out.
        setsid etcd --name "$m" --data-dir "$DIR/etcd/$m" \
            --listen-client-urls "http://127.0.0.1:$(etcd_client_port "$m")" \
            --advertise-client-urls "http://127.0.0.1:$(etcd_client_port "$m")" \
            --listen-peer-urls "http://127.0.0.1:$(etcd_peer_port "$m")" \
            --initial-advertise-peer-urls "http://127.0.0.1:$(etcd_peer_port "$m")" \
            --initial-cluster "$cluster" --initial-cluster-token "pharmacy-ha" \
            --initial-cluster-state new --heartbeat-interval 200 --election-timeout 2000 \
            --enable-v2=true \
            --logger zap --log-level warn \
            >>"$DIR/log/etcd-$m.log" 2>&1 </dev/null &
        echo $! >"$DIR/pids/etcd-$m.pid"
    )
}

write_patroni_config() { # pg node
    local pg="$1" n="$2" hosts="" e strict=false
    for e in "${MEMBERS[@]}"; do hosts+="${hosts:+,}127.0.0.1:$(etcd_client_port "$e")"; done
    [[ "$STRICT" == 1 ]] && strict=true
    as_pg tee "$pg/$n.yml" >/dev/null <<EOF
# deploy/ha-cluster.sh: Patroni's configuration of $n
scope: $SCOPE
name: $n
log:
  level: INFO
restapi:
  listen: 127.0.0.1:$(rest_port "$n")
  connect_address: 127.0.0.1:$(rest_port "$n")
# etcd's v2 API on purpose: Patroni 3.0's v3 client renews the leader key
# with an unconditional put, so a leader whose Patroni was frozen past the
# key's ttl (a stalled machine) takes the key back from the replica that
# was promoted meanwhile, and that replica's acknowledged commits are
# rewound away (the freeze drill showed it). The v2 client renews with a
# compare-and-swap on its own name, which fails once another node leads.
etcd:
  hosts: $hosts
bootstrap:
  dcs:
    # The leader key lives ttl seconds without a renewal; Patroni's loop
    # runs every loop_wait seconds.
    ttl: 20
    loop_wait: 2
    retry_timeout: 5
    # A crashed leader's PostgreSQL is not restarted in place: the
    # synchronous standby (which has every acknowledged commit) takes over
    # at once, and the old leader comes back as a replica.
    primary_start_timeout: 0
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: $strict
    synchronous_node_count: 1
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 400
        shared_buffers: 64MB
        wal_level: replica
        wal_log_hints: "on"
        hot_standby: "on"
        hot_standby_feedback: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
        synchronous_commit: "on"
  initdb:
    - encoding: UTF8
    - no-locale
postgresql:
  listen: 127.0.0.1:$(pg_port "$n")
  connect_address: 127.0.0.1:$(pg_port "$n")
  data_dir: $pg/$n/data
  bin_dir: $PG_BIN
  pgpass: $pg/$n/pgpass
  authentication:
    superuser:
      username: postgres
      password: postgres
    replication:
      username: replicator
      password: replicator
    rewind:
      username: postgres
      password: postgres
  parameters:
    unix_socket_directories: $pg/run
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
watchdog:
  mode: "off"
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
  nosync: false
EOF
}

start_patroni() { # node
    local n="$1" pg
    pg="$(cat "$DIR/pgdir")"
    as_pg mkdir -p "$pg/$n"
    as_pg chmod 700 "$pg/$n"
    [[ -f "$pg/$n.yml" ]] || write_patroni_config "$pg" "$n"
    say "starting Patroni $n (PostgreSQL on 127.0.0.1:$(pg_port "$n"), REST on 127.0.0.1:$(rest_port "$n"))"
    : >>"$DIR/log/patroni-$n.log"
    as_pg rm -f "$pg/run/patroni-$n.pid"
    (
        cd /
        # Patroni writes its own pid (the runuser wrapper's would be wrong).
        if [[ -n "$PG_USER" ]]; then
            setsid runuser -u "$PG_USER" -- sh -c 'echo $$ >"$0"; exec patroni "$1"' \
                "$pg/run/patroni-$n.pid" "$pg/$n.yml" >>"$DIR/log/patroni-$n.log" 2>&1 </dev/null &
        else
            setsid sh -c 'echo $$ >"$0"; exec patroni "$1"' \
                "$pg/run/patroni-$n.pid" "$pg/$n.yml" >>"$DIR/log/patroni-$n.log" 2>&1 </dev/null &
        fi
    )
    local i
    for ((i = 0; i < 50; i++)); do
        [[ -s "$pg/run/patroni-$n.pid" ]] && break
        sleep 0.1
    done
    cp "$pg/run/patroni-$n.pid" "$DIR/pids/patroni-$n.pid"
}

# A leader, and every other running node a streaming replica, one of them
# the synchronous standby (when there are replicas).
healthy() {
    local m
    m=$(members 2>/dev/null) || return 1
    local leaders sync running
    leaders=$(awk '$2 == "leader" && $3 == "running"' <<<"$m" | wc -l)
    sync=$(awk '$2 == "sync_standby" && ($3 == "streaming" || $3 == "running")' <<<"$m" | wc -l)
    running=$(wc -l <<<"$m")
    [[ $leaders -eq 1 && $sync -ge 1 && $running -ge "${1:-3}" ]] || return 1
    # A node that has not yet rewound to the leader's timeline is not back.
    [[ $(awk '{ print $5 }' <<<"$m" | sort -u | wc -l) -eq 1 ]] || return 1
    ! awk '$2 != "leader" && $3 != "streaming" && $3 != "running" { bad = 1 } END { exit !bad }' <<<"$m"
}

wait_healthy() { # seconds [members]
    local until=$((SECONDS + $1))
    while ((SECONDS < until)); do
        healthy "${2:-3}" && return 0
        sleep 0.2
    done
    healthy "${2:-3}" && return 0
    members >&2 || true
    return 1
}

wait_leader() { # seconds
    local until=$((SECONDS + $1))
    while ((SECONDS < until)); do
        [[ -n "$(leader)" ]] && return 0
        sleep 0.2
    done
    return 1
}

start_pg_haproxy() {
    local envs=(PHARMACY_PG_WRITE_LISTEN="127.0.0.1:$PG_WRITE_PORT" PHARMACY_PG_READ_LISTEN="127.0.0.1:$PG_READ_PORT"
        PHARMACY_PG_STATS_LISTEN="127.0.0.1:$PG_STATS_PORT")
    local n
    for n in "${NODES[@]}"; do
        envs+=("PHARMACY_PG${n#node}=127.0.0.1:$(pg_port "$n")" "PHARMACY_PG${n#node}_REST=$(rest_port "$n")")
    done
    env "${envs[@]}" haproxy -c -q -f "$ROOT/deploy/haproxy-patroni.cfg" || die "deploy/haproxy-patroni.cfg does not validate"
    say "starting the database HAProxy (writes 127.0.0.1:$PG_WRITE_PORT, reads 127.0.0.1:$PG_READ_PORT)"
    (
        cd /
        setsid env "${envs[@]}" haproxy -db -f "$ROOT/deploy/haproxy-patroni.cfg" >>"$DIR/log/haproxy-pg.log" 2>&1 </dev/null &
        echo $! >"$DIR/pids/haproxy-pg.pid"
    )
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
    local ports=("$PORT" "$STATS_PORT" "$PG_WRITE_PORT" "$PG_READ_PORT" "$PG_STATS_PORT")
    local n m
    for n in "${NODES[@]}"; do ports+=("$(pg_port "$n")" "$(rest_port "$n")"); done
    for m in "${MEMBERS[@]}"; do ports+=("$(etcd_client_port "$m")" "$(etcd_peer_port "$m")"); done
    for p in "${ports[@]}" $(seq $((PORT + 1)) $((PORT + PROCESSES))); do
        port_busy "$p" && die "port $p is in use; choose other ports with --port"
    done
    printf 'PORT=%s\nPROCESSES=%s\nBALANCE=%s\nSTRICT=%s\n' "$PORT" "$PROCESSES" "$BALANCE" "$STRICT" >"$DIR/settings"
    UP_DONE=0
    trap 'if [[ $UP_DONE -eq 0 ]]; then say "up failed; stopping what it started"; down_all >/dev/null 2>&1 || true; fi' EXIT

    local pg
    pg="$(pg_dir)"
    as_pg mkdir -p "$pg/run"

    for m in "${MEMBERS[@]}"; do start_etcd "$m"; done
    local i
    local until=$((SECONDS + 30)) quorum=0
    while ((SECONDS < until)); do
        if curl -fsS --max-time 1 "http://127.0.0.1:$(etcd_client_port e1)/health" 2>/dev/null | grep -q '"health":"true"'; then
            quorum=1
            break
        fi
        sleep 0.1
    done
    [[ $quorum -eq 1 ]] || die "etcd has no quorum after 30 s (see $DIR/log/etcd-*.log)"

    if [[ ! -f "$pg/node1/data/PG_VERSION" ]]; then
        # A new cluster: the first node bootstraps (initdb) and leads; the
        # others clone it.
        start_patroni node1
        wait_leader 60 || { tail -n 30 "$DIR/log/patroni-node1.log" >&2; die "no leader after 60 s"; }
        start_patroni node2
        start_patroni node3
    else
        # The same data again: all at once, since in synchronous mode only
        # the last leader or its synchronous standby may lead.
        for n in "${NODES[@]}"; do start_patroni "$n"; done
        wait_leader 90 || { tail -n 30 "$DIR/log/patroni-node1.log" >&2; die "no leader after 90 s"; }
    fi
    say "waiting for two streaming replicas, one of them synchronous"
    wait_healthy 120 || die "the replicas did not reach streaming within 120 s (see $DIR/log/patroni-*.log)"

    start_pg_haproxy
    PRIMARY_URL="postgres://postgres@127.0.0.1:$PG_WRITE_PORT/$DB"
    STANDBY_URL="postgres://postgres@127.0.0.1:$PG_READ_PORT/$DB"
    for ((i = 0; i < 100; i++)); do
        psql_at "$PG_WRITE_PORT" "SELECT 1" >/dev/null 2>&1 && break
        sleep 0.1
    done
    if [[ -z "$(psql_at "$PG_WRITE_PORT" "SELECT 1 FROM pg_database WHERE datname = '$DB'")" ]]; then
        psql_at "$PG_WRITE_PORT" "CREATE DATABASE $DB" >/dev/null
    fi

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

    for ((i = 1; i <= PROCESSES; i++)); do start_process "$i" "$bin"; done
    for ((i = 1; i <= PROCESSES; i++)); do
        wait_http "http://127.0.0.1:$((PORT + i))/readyz" 60 "service process p$i"
    done
    start_haproxy
    wait_http "http://127.0.0.1:$PORT/readyz" 20 "HAProxy"
    UP_DONE=1

    local urls="" patroni="" etcd=""
    for ((i = 1; i <= PROCESSES; i++)); do urls+="${urls:+ }http://127.0.0.1:$((PORT + i))"; done
    for n in "${NODES[@]}"; do patroni+="${patroni:+ }http://127.0.0.1:$(rest_port "$n")"; done
    for m in "${MEMBERS[@]}"; do etcd+="${etcd:+ }http://127.0.0.1:$(etcd_client_port "$m")"; done
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
PATRONI_URLS="$patroni"
ETCD_URLS="$etcd"
PG_HAPROXY_STATS_URL=http://127.0.0.1:$PG_STATS_PORT/stats
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
        # A frozen one (freeze-leader) gets the signal once it runs again.
        resume "$pid"
        for ((i = 0; i < secs * 10; i++)); do alive "$pid" || break; sleep 0.1; done
        if alive "$pid"; then
            say "$name did not stop within $secs s of SIGTERM; killing it"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.2
        fi
    fi
    rm -f "$DIR/pids/$name.pid"
}

# A node's PostgreSQL still running without its Patroni (a killed Patroni):
# a fast shutdown.
stop_orphan_postgres() { # node
    local pid pg
    pid="$(postmaster_pid "$1")"
    if [[ -n "$pid" ]]; then
        pg="$(cat "$DIR/pgdir")"
        as_pg "$PG_BIN/pg_ctl" stop -w -t 60 -m fast -D "$pg/$1/data" >/dev/null 2>&1 || kill -KILL "$pid" 2>/dev/null || true
    fi
}

down_all() {
    local name n l
    stop_pid haproxy 10
    for f in "$DIR"/pids/p*.pid; do
        [[ -f "$f" ]] || continue
        name="$(basename "$f" .pid)"
        stop_pid "$name" 30
    done
    # Replicas first, the leader last: stopping the leader first would make
    # a replica take over for nothing.
    l="$(leader || true)"
    for n in "${NODES[@]}"; do
        [[ "$n" == "$l" ]] || stop_pid "patroni-$n" 60
    done
    [[ -n "$l" ]] && stop_pid "patroni-$l" 60
    if [[ -f "$DIR/pgdir" ]]; then
        for n in "${NODES[@]}"; do stop_orphan_postgres "$n"; done
    fi
    stop_pid haproxy-pg 10
    for m in "${MEMBERS[@]}"; do stop_pid "etcd-$m" 20; done
}

down() {
    [[ -d "$DIR" ]] || { say "nothing to stop in $DIR"; return 0; }
    down_all
    local left=0 pg n
    for f in "$DIR"/pids/*.pid; do
        [[ -f "$f" ]] && alive "$(cat "$f")" && { say "still running: $(basename "$f" .pid)"; left=1; }
    done
    if [[ -f "$DIR/pgdir" ]]; then
        for n in "${NODES[@]}"; do
            [[ -n "$(postmaster_pid "$n")" ]] && { say "still running: PostgreSQL of $n"; left=1; }
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
    local pid name m
    for f in "$DIR"/pids/*.pid; do
        [[ -f "$f" ]] || continue
        name="$(basename "$f" .pid)"
        pid="$(cat "$f")"
        if alive "$pid"; then echo "$name: running (pid $pid)"; else echo "$name: stopped"; fi
    done
    echo "etcd:"
    for m in "${MEMBERS[@]}"; do
        echo "  $m: $(curl -fsS --max-time 2 "http://127.0.0.1:$(etcd_client_port "$m")/health" 2>/dev/null || echo unreachable)"
    done
    echo "Patroni (name role state lag timeline):"
    members 2>/dev/null | sed 's/^/  /' || echo "  no Patroni REST API answers"
    if alive "$(pid_of haproxy-pg)"; then
        echo "database HAProxy (write / read):"
        curl -fsS --max-time 2 "http://127.0.0.1:$PG_STATS_PORT/stats;csv" 2>/dev/null \
            | awk -F, '($1 == "postgres_write" || $1 == "postgres_read") && $2 ~ /^node/ { print "  " $1 " " $2 ": " $18 }' || true
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

need_cluster() { [[ -f "$DIR/pgdir" ]] || die "no cluster in $DIR"; }

kill_primary() {
    need_cluster
    local l pid
    l="$(leader)"
    [[ -n "$l" ]] || die "no leader to kill"
    pid="$(postmaster_pid "$l")"
    [[ -n "$pid" ]] || die "the leader $l has no running postmaster"
    kill -KILL "$pid"
    say "killed -9 the postmaster of the leader $l (pid $pid)"
    echo "$l"
}

kill_replica() {
    need_cluster
    local r pid
    r="$(members | awk '$2 == "sync_standby" { print $1; exit }')"
    [[ -n "$r" ]] || r="$(members | awk '$2 == "replica" { print $1; exit }')"
    [[ -n "$r" ]] || die "no replica to kill"
    pid="$(postmaster_pid "$r")"
    [[ -n "$pid" ]] || die "the replica $r has no running postmaster"
    kill -KILL "$pid"
    say "killed -9 the postmaster of the replica $r (pid $pid)"
    echo "$r"
}

# Two nodes lost at once: kill -9 of both replicas' Patroni and then of
# their postmasters. Not strict, the leader goes on alone once its Patroni
# finds no synchronous standby left (it empties synchronous_standby_names,
# which releases the commits waiting for the lost one); strict, writes
# wait until a replica is back. `start-node NODE` brings each back.
kill_replicas() {
    need_cluster
    local l n patroni pid lost=()
    l="$(leader)"
    [[ -n "$l" ]] || die "no leader"
    for n in $(members | awk -v l="$l" '$1 != l { print $1 }'); do
        patroni="$(pid_of "patroni-$n")"
        pid="$(postmaster_pid "$n")"
        alive "$patroni" && kill -KILL "$patroni"
        [[ -n "$pid" ]] && kill -KILL "$pid"
        lost+=("$n")
    done
    [[ ${#lost[@]} -eq 2 ]] || die "expected two replicas, found ${#lost[@]}"
    say "killed -9 Patroni and the postmaster of the replicas ${lost[*]}"
    echo "${lost[*]}"
}

# The leader's node stopped in order, as for maintenance: SIGTERM to its
# Patroni, which stops PostgreSQL cleanly and gives the leader lock up, so
# the synchronous standby takes over without waiting for the lock's ttl;
# `start-node NODE` brings the node back, as a replica.
stop_leader() {
    need_cluster
    local l
    l="$(leader)"
    [[ -n "$l" ]] || die "no leader to stop"
    stop_pid "patroni-$l" 60
    say "stopped the leader $l (Patroni and its PostgreSQL)"
    echo "$l"
}

# A whole node lost at once (power, kernel, network gone): kill -9 of the
# leader's Patroni and then of its postmaster. Nobody gives the leader lock
# up, so it expires after ttl and the synchronous standby takes over;
# `start-node NODE` brings the node back, as a replica. (`stop-node` is the
# orderly opposite: Patroni stops PostgreSQL and hands the lock over.)
kill_node() {
    need_cluster
    local l patroni pid
    l="$(leader)"
    [[ -n "$l" ]] || die "no leader to kill"
    patroni="$(pid_of "patroni-$l")"
    alive "$patroni" || die "the leader's Patroni is not running"
    pid="$(postmaster_pid "$l")"
    kill -KILL "$patroni"
    [[ -n "$pid" ]] && kill -KILL "$pid"
    say "killed -9 Patroni (pid $patroni) and the postmaster (pid ${pid:-none}) of the leader $l"
    echo "$l"
}

# SIGCONT to a process and to its runuser wrapper: runuser stops itself
# when its child is stopped, and a stopped wrapper would never reap it.
resume() { # pid
    local parent
    parent="$(ps -o ppid= -p "$1" 2>/dev/null | tr -d ' ' || true)"
    kill -CONT "$1" 2>/dev/null || true
    if [[ -n "$parent" && "$(ps -o comm= -p "$parent" 2>/dev/null || true)" == runuser ]]; then
        kill -CONT "$parent" 2>/dev/null || true
    fi
}

# The leader's Patroni stopped dead (SIGSTOP), its PostgreSQL still
# running: HAProxy's checks of that node fail, so writes stop reaching it at
# once; the lock expires after ttl and a replica takes over; `thaw` lets the
# old Patroni run again, find the lock gone and demote its PostgreSQL.
freeze_leader() {
    need_cluster
    local l pid
    l="$(leader)"
    [[ -n "$l" ]] || die "no leader to freeze"
    pid="$(pid_of "patroni-$l")"
    alive "$pid" || die "the leader's Patroni is not running"
    kill -STOP "$pid"
    say "froze Patroni of the leader $l (pid $pid); its PostgreSQL runs on"
    echo "$l"
}

node_arg() {
    [[ " ${NODES[*]} " == *" $ARG "* ]] || die "name a node: ${NODES[*]}"
}

member_arg() {
    [[ -n "$ARG" ]] || ARG=e3
    [[ " ${MEMBERS[*]} " == *" $ARG "* ]] || die "name an etcd member: ${MEMBERS[*]}"
}

case "$COMMAND" in
    up) up ;;
    down) down ;;
    status) status ;;
    leader) need_cluster; l="$(leader)"; [[ -n "$l" ]] || die "no leader"; echo "$l" ;;
    members) need_cluster; members || die "no Patroni REST API answers" ;;
    wait-healthy) need_cluster; wait_healthy "${ARG:-60}" || die "not healthy" ;;
    kill-primary) kill_primary ;;
    kill-replica) kill_replica ;;
    kill-node) kill_node ;;
    stop-leader) stop_leader ;;
    kill-replicas) kill_replicas ;;
    stop-node) need_cluster; node_arg; stop_pid "patroni-$ARG" 60; say "$ARG stopped" ;;
    start-node) need_cluster; node_arg; alive "$(pid_of "patroni-$ARG")" && { say "$ARG is running"; exit 0; }; start_patroni "$ARG" ;;
    freeze-leader) freeze_leader ;;
    thaw) need_cluster; node_arg; pid="$(pid_of "patroni-$ARG")"; alive "$pid" || die "Patroni of $ARG is not running"; resume "$pid"; say "Patroni of $ARG runs again" ;;
    kill-etcd) need_cluster; member_arg; pid="$(pid_of "etcd-$ARG")"; alive "$pid" || die "etcd $ARG is not running"; kill -KILL "$pid"; say "killed -9 etcd member $ARG (pid $pid)" ;;
    start-etcd) need_cluster; member_arg; alive "$(pid_of "etcd-$ARG")" && { say "etcd $ARG is running"; exit 0; }; start_etcd "$ARG" ;;
    *) usage ;;
esac
