#!/usr/bin/env bash
# Makes sure Debian's OpenSSH server and client are installed for the SSH CA tests
# (test/ssh/sshd-login.test.ts starts a real sshd on a loopback port and logs in with ssh; the
# other SSH tests read certificates with ssh-keygen). Installs `openssh-server` (which brings
# openssh-client) with apt when /usr/sbin/sshd is missing. KMS_SSHD overrides the path.
set -uo pipefail
bin="${KMS_SSHD:-/usr/sbin/sshd}"
if [ -x "$bin" ] && command -v ssh >/dev/null 2>&1 && command -v ssh-keygen >/dev/null 2>&1; then exit 0; fi
echo "OpenSSH is missing; installing Debian's openssh-server package"
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else "$@"; fi; }
export DEBIAN_FRONTEND=noninteractive
as_root apt-get update -qq >/dev/null 2>&1 || true
# --no-install-recommends: no ncurses-term, xauth or the like; the service is not enabled here
# (policy-rc.d-less containers may print a warning about starting it, which does not matter).
as_root apt-get install -y -qq --no-install-recommends openssh-server openssh-client >/dev/null 2>&1 || true
if [ -x "$bin" ] && command -v ssh >/dev/null 2>&1; then echo "OpenSSH installed: $(ssh -V 2>&1)"; exit 0; fi
echo "OpenSSH could not be installed (apt-get install openssh-server failed); the SSH tests need it"
exit 1
