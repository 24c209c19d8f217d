#!/usr/bin/env bash
# Fuzzes the whole HTTP surface with schemathesis, from the live OpenAPI
# document, every default check and every phase (examples, coverage,
# fuzzing, stateful) on, once as a cashier and once as an admin.
#
#   scripts/fuzz.sh            # full run: 60 cases per operation, phase and role
#   scripts/fuzz.sh --short    # CI-sized: a few hundred cases in all (no coverage phase)
#   scripts/fuzz.sh --max-examples N [--seed S] [--keep] [-- extra schemathesis args]
#
# It installs schemathesis into a venv under target/fuzz/ if missing, builds
# the release binary, starts the server on a throw-away database in its own
# PostgreSQL cluster under target/fuzz/pg (the demo chain is seeded on first
# start, so there is data to find), signs in as cashier.hq and admin.hq,
# runs schemathesis, checks the server log for panics, drops the database
# and stops the server. Reports (JUnit, NDJSON) go to target/fuzz/report-*.
# Exit status: 0 when both runs pass, non-zero otherwise.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
OUT="$ROOT/target/fuzz"
VENV="$OUT/venv"
PORT=${FUZZ_PORT:-18089}
PG_PORT=${FUZZ_PG_PORT:-54339}
MAX_EXAMPLES=60
SEED=${FUZZ_SEED:-}
KEEP=0
PHASES="examples,coverage,fuzzing,stateful"
EXTRA=()

while [ $# -gt 0 ]; do
    case "$1" in
        --short) MAX_EXAMPLES=3; SHORT=1; PHASES="examples,fuzzing,stateful" ;;
        --max-examples) MAX_EXAMPLES=$2; shift ;;
        --seed) SEED=$2; shift ;;
        --keep) KEEP=1 ;;
        --) shift; EXTRA=("$@"); break ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
    shift
done
SHORT=${SHORT:-0}

mkdir -p "$OUT"

# 1. schemathesis, in its own venv.
if ! "$VENV/bin/schemathesis" --version >/dev/null 2>&1; then
    echo "fuzz: installing schemathesis into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --upgrade pip >/dev/null
    "$VENV/bin/pip" install --quiet 'schemathesis>=4,<5'
fi
"$VENV/bin/schemathesis" --version

# 2. The server binary.
if [ -z "${PHARMACY_BIN:-}" ]; then
    cargo build --release --quiet --bin pharmacy
    PHARMACY_BIN="$ROOT/target/release/pharmacy"
fi

# 3. A throw-away database in the fuzz cluster (scripts/lib.sh's
#    server_start, below); the server seeds the demo chain into it.
# Tokens must outlive the run; the fuzzer's wrong logins must not lock the
# run's own sign-in out (they are taken first anyway).
export PHARMACY__AUTH__ACCESS_TOKEN_MINUTES=720
export PHARMACY__LOG__FORMAT=text PHARMACY__LOG__LEVEL=${FUZZ_LOG_LEVEL:-warn}
export PHARMACY_BIN

# 4. The run's configuration. Every default check stays on. One documented
#    allowance: `positive_data_acceptance` also accepts a 400 on the
#    operations below, whose 400s depend on what JSON Schema cannot state:
#    stored state (a referenced record that does not exist or belongs to
#    another branch, a payment above the balance, a currency not active in
#    the registry, the caller's own account or current password) or decimal
#    precision (money with at most 2 decimals, rates with at most 10: JSON
#    Schema's `multipleOf` on binary floats disagrees with decimal
#    arithmetic), and date windows
#    whose `from_date` must not be after `to_date`. Every stateless rule is in
#    the document, and `negative_data_rejection` holds everywhere.
CONFIG="$OUT/schemathesis.toml"
cat >"$CONFIG" <<'TOML'
[[operations]]
include-method = ["POST", "PUT", "DELETE"]
include-path-regex = "^/api/v1/(sales|customers|customers/[^/]+|customers/[^/]+/payments|sessions/open|sessions/[^/]+/close|coupons|medicines|medicines/[^/]+|purchases|supplier-finance/invoices|supplier-finance/invoices/[^/]+/payments|supplier-finance/batches/[^/]+/quarantine|currency/rates|stockcount/submit|transfers|transfers/[^/]+/(receive|cancel)|prescriptions|prescriptions/[^/]+/dispense|suppliers|suppliers/[^/]+|settings|branches|branches/[^/]+|users|users/[^/]+|devices|dispensing/will-call|printing/print-jobs|printing/printers|printing/printers/[^/]+|printing/receipt-templates|printing/receipt-templates/[^/]+|approvals|auth/password)$"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "429"]

[[operations]]
include-method = "GET"
include-path-regex = "^/api/v1/(sales|reports/.*|compliance/(prescription-book|classified-drugs-book)|transfers|audit-log|dashboard/branch-comparison)$"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "429"]
TOML

cleanup() {
    if [ "$KEEP" = 1 ]; then server_stop keep; else server_stop; fi
}
trap cleanup EXIT

echo "fuzz: starting the server on 127.0.0.1:$PORT (log $OUT/server.log)"
server_start "$OUT" "$PORT" "$PG_PORT" fuzz
LOG=$SERVER_LOG

login() {
    curl -fsS -X POST "http://127.0.0.1:$PORT/api/v1/auth/login" \
        -H 'content-type: application/json' \
        -d "{\"email\":\"$1\",\"password\":\"Demo-Pass-2026\"}" |
        "$VENV/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["access_token"])'
}
CASHIER_TOKEN=$(login cashier.hq@demo.pharmacy)
ADMIN_TOKEN=$(login admin.hq@demo.pharmacy)

run_as() {
    local role=$1 token=$2
    local args=(
        run "http://127.0.0.1:$PORT/api/v1/openapi.json"
        --url "http://127.0.0.1:$PORT"
        -H "Authorization: Bearer $token"
        --phases "$PHASES"
        --max-examples "$MAX_EXAMPLES"
        --workers 2
        --request-timeout 30
        --suppress-health-check all
        --report junit,ndjson
        --report-dir "$OUT/report-$role"
        --no-color
        # Logging out would end the run's own token.
        --exclude-path /api/v1/auth/logout
    )
    [ -n "$SEED" ] && args+=(--seed "$SEED")
    echo "fuzz: as $role (max $MAX_EXAMPLES examples per operation and phase)"
    (cd "$OUT" && "$VENV/bin/schemathesis" --config-file "$CONFIG" "${args[@]}" "${EXTRA[@]}") 2>&1 | tee "$OUT/run-$role.txt"
    return "${PIPESTATUS[0]}"
}

status=0
# The cashier first: the admin run may create, change and delete records.
run_as cashier "$CASHIER_TOKEN" || status=$?
run_as admin "$ADMIN_TOKEN" || status=$?

if grep -Eq 'panicked|request failed with a server fault' "$LOG"; then
    echo "fuzz: the server log has panics or server faults:" >&2
    grep -E 'panicked|request failed with a server fault' "$LOG" | head -20 >&2
    status=1
fi
for role in cashier admin; do
    grep -E '(generated, |^=+ .* in [0-9.]+s)' "$OUT/run-$role.txt" |
        sed -e 's/^ *//' -e "s/^/fuzz: $role: /" || true
done
if [ "$status" = 0 ]; then
    echo "fuzz: passed (short=$SHORT)"
else
    echo "fuzz: FAILED (see $OUT/run-*.txt and $LOG)" >&2
fi
exit "$status"
