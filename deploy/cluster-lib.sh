# Helpers shared by deploy/local-cluster.sh and deploy/ha-cluster.sh,
# sourced after each has set ROOT, DIR, PORT, STATS_PORT, PROCESSES,
# BALANCE, PG_DIR_PREFIX and (before starting processes) PRIMARY_URL,
# STANDBY_URL and JWT_SECRET.

# As root, PostgreSQL runs as the `postgres` system user (initdb refuses
# root), or `nobody` when there is no such user.
PG_USER=""
if [[ $EUID -eq 0 ]]; then
    if id postgres >/dev/null 2>&1; then PG_USER=postgres; else PG_USER=nobody; fi
fi

say() { printf '%s\n' "$*" >&2; }

die() { say "error: $*"; exit 1; }

find_pg_bin() {
    if [[ -n "${PG_BIN:-}" ]]; then echo "$PG_BIN"; return; fi
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -V -r); do
        [[ -x "$d/initdb" ]] && { echo "$d"; return; }
    done
    local initdb
    initdb="$(command -v initdb 2>/dev/null || true)"
    [[ -n "$initdb" ]] && dirname "$initdb"
    return 0
}

service_bin() {
    if [[ -n "${PHARMACY_BIN:-}" ]]; then echo "$PHARMACY_BIN"; return; fi
    for b in "$ROOT/target/release/pharmacy" "$ROOT/target/debug/pharmacy"; do
        [[ -x "$b" ]] && { echo "$b"; return; }
    done
    die "no service binary: build it with \`cargo build --release\` (or set PHARMACY_BIN)"
}

as_pg() {
    if [[ -n "$PG_USER" ]]; then
        (cd / && runuser -u "$PG_USER" -- "$@")
    else
        "$@"
    fi
}

# Where PostgreSQL's files live: DIR/pg, unless the PostgreSQL user cannot
# reach DIR (a checkout under /root): then a directory of its own under the
# temp dir (named after PG_DIR_PREFIX), remembered in DIR/pgdir.
pg_dir() {
    if [[ -f "$DIR/pgdir" ]]; then cat "$DIR/pgdir"; return; fi
    local want="$DIR/pg"
    mkdir -p "$want"
    if [[ -n "$PG_USER" ]]; then
        chown "$PG_USER" "$want"
        if ! (cd / && runuser -u "$PG_USER" -- test -w "$want") 2>/dev/null; then
            rmdir "$want" 2>/dev/null || true
            want="${TMPDIR:-/tmp}/pharmacy-$PG_DIR_PREFIX-$(printf '%s' "$DIR" | cksum | cut -d' ' -f1)"
            mkdir -p "$want"
            chown "$PG_USER" "$want"
            chmod 700 "$want"
        fi
    fi
    echo "$want" > "$DIR/pgdir"
    echo "$want"
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }

pid_of() { [[ -f "$DIR/pids/$1.pid" ]] && cat "$DIR/pids/$1.pid" || true; }

wait_http() { # url seconds what
    local url="$1" secs="$2" what="$3" i
    for ((i = 0; i < secs * 10; i++)); do
        curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null && return 0
        sleep 0.1
    done
    die "$what did not answer $url within $secs s"
}

random_hex() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }

psql_at() { # port sql
    as_pg "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$1" -U postgres -d postgres -tAc "$2"
}

print_env() { cat "$DIR/cluster.env"; }

start_process() { # index bin
    local i="$1" bin="$2" port=$((PORT + $1))
    say "starting service process p$i on 127.0.0.1:$port"
    (
        cd "$ROOT"
        export DATABASE_URL="$PRIMARY_URL" DATABASE_READ_URL="$STANDBY_URL" \
            HOST=127.0.0.1 PORT="$port" APP_ENV=production JWT_SECRET="$JWT_SECRET" \
            PHARMACY__HTTP__TRUST_FORWARDED_FOR=true \
            PHARMACY__FISCAL__MODE="${PHARMACY__FISCAL__MODE:-off}"
        setsid "$bin" serve >>"$DIR/log/p$i.log" 2>&1 </dev/null &
        echo $! >"$DIR/pids/p$i.pid"
    )
}

start_haproxy() {
    local envs=(PHARMACY_LISTEN="127.0.0.1:$PORT" PHARMACY_STATS_LISTEN="127.0.0.1:$STATS_PORT"
        PHARMACY_HAPROXY_LOG=stdout)
    [[ "$BALANCE" == roundrobin ]] && envs+=(PHARMACY_BALANCE=roundrobin)
    local i
    for ((i = 1; i <= PROCESSES; i++)); do envs+=("PHARMACY_P$i=127.0.0.1:$((PORT + i))"); done
    env "${envs[@]}" haproxy -c -q -f "$ROOT/deploy/haproxy.cfg" || die "deploy/haproxy.cfg does not validate"
    say "starting HAProxy on 127.0.0.1:$PORT ($BALANCE; stats on 127.0.0.1:$STATS_PORT/stats)"
    (
        cd /
        setsid env "${envs[@]}" haproxy -db -f "$ROOT/deploy/haproxy.cfg" >>"$DIR/log/haproxy.log" 2>&1 </dev/null &
        echo $! >"$DIR/pids/haproxy.pid"
    )
}
