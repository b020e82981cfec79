#!/usr/bin/env bash
# Makes sure GNU time (/usr/bin/time, Debian's `time` package) is installed: the 1 GiB
# encrypt-file test (test/kms-cli/files-1gb.test.ts) reads each CLI process's peak resident memory
# from it, as the kernel counted it, not as the process reports itself.
set -uo pipefail
if [ -x /usr/bin/time ] && /usr/bin/time -f '%M' true >/dev/null 2>&1; then exit 0; fi
echo "GNU time is missing; installing Debian's time package"
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else "$@"; fi; }
export DEBIAN_FRONTEND=noninteractive
as_root apt-get update -qq >/dev/null 2>&1 || true
as_root apt-get install -y -qq --no-install-recommends time >/dev/null 2>&1 || true
if [ -x /usr/bin/time ]; then exit 0; fi
echo "GNU time could not be installed (apt-get install time failed); the 1 GiB file test needs it"
exit 1
