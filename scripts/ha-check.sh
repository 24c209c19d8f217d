#!/usr/bin/env bash
# Checks the high-availability topology end to end under load: the
# `ha-bench` tool brings up deploy/ha-cluster.sh (three etcd members, three
# Patroni-managed PostgreSQL nodes with synchronous replication, HAProxy
# routing by Patroni's REST API, two service processes behind the
# branch-affine HAProxy) in a throw-away directory and runs its drills with
# 32 clients selling, taking payments and pushing tills' batches over 8
# branches, every request with a mutation id and retried with it until
# acknowledged:
#
#   failover  kill -9 of the leader's postmaster: a replica takes over, writes
#             are back within 30 s, no acknowledged sale or payment is lost or
#             doubled, the old leader comes back as a replica;
#   replica   kill -9 of the synchronous standby's postmaster: writes go on;
#   etcd      kill -9 of one etcd member (started again 5 s later): nothing
#             happens;
#   freeze    SIGSTOP of the leader's Patroni (HAProxy loses its view of the
#             node while its PostgreSQL runs on), SIGCONT once a replica
#             leads: writes back once the lock's ttl ran out (within 45 s),
#             nothing lost, the old leader rejoins as a replica;
#   node      the whole leader node lost: kill -9 of its Patroni and its
#             postmaster, started again once a replica leads; like freeze,
#             writes back once the lock's ttl ran out (within 45 s), nothing
#             lost, the node rejoins as a replica;
#   stop      the leader's node stopped in order (maintenance): its Patroni
#             stops PostgreSQL and hands the lock over, so writes come back
#             as after a failover; started again once a replica leads,
#             nothing lost, the node rejoins as a replica;
#   replicas  both replicas' nodes lost (kill -9 of their Patroni and
#             postmaster), started again 10 s later: the leader goes on
#             alone, nothing lost, both rejoin as replicas.
#
# After each drill the new leader's database is checked: every acknowledged
# write once with its content, icv gapless, hash chains verified, stock =
# movements >= 0, balances = ledger >= 0; and a till's feed cursor (max_rev
# and epoch) taken before the fault gets 409 `resnapshot` after a drill
# that promoted a replica (a new epoch), a page after one that did not.
# Finally `down`, and a check that nothing of the cluster is left running.
# About seven minutes (debug build, this shared 2-core machine).
#
#   scripts/ha-check.sh        # PHARMACY_BIN defaults to target/debug/pharmacy (built if missing)
#   HA_CHECK_PORT=19480 HA_CHECK_DRILLS=failover scripts/ha-check.sh
#
# Needs what deploy/ha-cluster.sh needs (PostgreSQL, Patroni, etcd, HAProxy,
# curl, python3); .ci/run installs them. Exit status 0 when every check
# passes.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
started=$(date +%s)
PORT="${HA_CHECK_PORT:-18880}"
DRILLS="${HA_CHECK_DRILLS:-failover,replica,etcd,freeze,node,stop,replicas}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
DIR="$ROOT/target/ha-bench/cluster"

fail() { echo "ha-check: FAILED: $*" >&2; exit 1; }
step() { echo "ha-check: $*"; }

if [ -z "${PHARMACY_BIN:-}" ]; then
    PHARMACY_BIN="$TARGET/debug/pharmacy"
    [ -x "$PHARMACY_BIN" ] || cargo build --quiet --bin pharmacy
fi
PHARMACY_BIN=$(realpath "$PHARMACY_BIN")
export PHARMACY_BIN

step "building the drill tool (bench --bin ha-bench)"
cargo build --quiet -p bench --bin ha-bench

# The ports of the cluster (see deploy/ha-cluster.sh), for the check at the end.
ports=("$PORT" $((PORT - 1)) $((PORT + 1)) $((PORT + 2)))
for off in 300 301 302 311 312 313 321 322 323 331 332 333 341 342 343; do ports+=($((PORT + off))); done
cleanup() {
    local status=$?
    if [ -d "$DIR" ]; then
        deploy/ha-cluster.sh down --dir "$DIR" --purge >/dev/null 2>&1 || true
    fi
    exit "$status"
}
trap cleanup EXIT

step "drills $DRILLS on port $PORT"
# ha-bench brings the cluster down itself; --keep is not used here.
"$TARGET/debug/ha-bench" "$DRILLS" --port "$PORT" --server-bin "$PHARMACY_BIN" \
    --clients 32 --branches 8 --before 5 --after 15 \
    || fail "a drill failed (the cluster's logs are kept in target/ha-bench/last-logs)"

step "nothing left running"
left=$(pgrep -af "$DIR" || true)
[ -z "$left" ] || fail "still running after down: $left"
left=$(pgrep -af "pharmacy-ha-" || true)
[ -z "$left" ] || fail "still running after down: $left"
for p in "${ports[@]}"; do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && fail "port $p still answers after down"
done

step "passed in $(($(date +%s) - started)) s"
