#!/usr/bin/env bash
# The drivers' unified-format spec tests (transactions, withTransaction, change streams,
# retryable writes and reads, sessions, causal consistency, CRUD, collection and index
# management, command monitoring) run by pymongo's own unified test
# runner against a Strata replica set of one: see run_unified.py for what it does and its options.
# Usage: STRATA_BIN=path/to/strata run.sh [run_unified.py options]
# CI: run.sh --baseline "$here/known-failures.txt" (exit 1 only on a failure not listed there).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../../../.." && pwd)"
: "${STRATA_BIN:=$root/target/release/strata}"
export STRATA_BIN
venv="$root/target/driver-venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$here/../requirements.txt"
exec "$venv/bin/python" "$here/run_unified.py" "$@"
