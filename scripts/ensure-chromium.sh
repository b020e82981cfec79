#!/usr/bin/env bash
# Makes sure Debian's Chromium is installed for the browser tests (playwright-core drives it; a
# test tool's own browser download does not work on these machines). Installs the `chromium`
# package with apt when /usr/bin/chromium is missing. KMS_CHROMIUM overrides the path.
set -uo pipefail
bin="${KMS_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$bin" ]; then exit 0; fi
echo "Chromium is missing; installing Debian's chromium package"
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else "$@"; fi; }
export DEBIAN_FRONTEND=noninteractive
as_root apt-get update -qq >/dev/null 2>&1 || true
as_root apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 || true
if [ -x "$bin" ]; then echo "Chromium installed: $("$bin" --version 2>/dev/null)"; exit 0; fi
echo "Chromium could not be installed (apt-get install chromium failed); the browser tests need it"
exit 1
