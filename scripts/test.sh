#!/usr/bin/env bash
# npm test: make sure PostgreSQL and Redis are up, then run the suite in two passes.
#  1. every test/**/*.test.ts outside test/alone, two files at a time (each file has its own
#     database and Redis prefix); the tests mirror src/ (test/<domain>/), with the suites that
#     cross every domain in test/cross-cutting/;
#  2. test/alone/*.test.ts, one file at a time with nothing else running: these compare a tenant's
#     latency under another tenant's flood with its idle latency, as a ratio, and on a 2-core
#     machine a second test file's load would be counted as unfairness.
# Both passes always run; the exit status is non-zero if either failed.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-services.sh || exit 1
# Debian's Chromium for the sign-in page tests (playwright-core); installed when missing.
bash scripts/ensure-chromium.sh || exit 1
# Debian's OpenSSH server and client for the SSH CA tests (a real sshd on a loopback port).
bash scripts/ensure-openssh.sh || exit 1
# GNU time, whose peak-memory figure the 1 GiB encrypt-file test reads.
bash scripts/ensure-gnu-time.sh || exit 1
mapfile -t files < <(find test -name '*.test.ts' -not -path 'test/alone/*' | sort)
status=0
node --test --test-concurrency=2 --test-timeout=120000 "${files[@]}" || status=1
node --test --test-concurrency=1 --test-timeout=120000 'test/alone/*.test.ts' || status=1
exit "$status"
