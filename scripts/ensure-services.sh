#!/usr/bin/env bash
# Makes sure the PostgreSQL and Redis the tests talk to are up, starting local ones if they are
# not (the commands of this machine kind: Debian's PostgreSQL cluster and redis-server).
set -uo pipefail

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_up() { (exec 3<>/dev/tcp/127.0.0.1/6379 && printf 'PING\r\n' >&3 && timeout 2 head -c 5 <&3 | grep -q PONG) 2>/dev/null; }

if ! pg_up; then
  echo "PostgreSQL is down; starting it"
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
  fi
  for _ in $(seq 1 30); do pg_up && break; sleep 1; done
fi
if ! redis_up; then
  echo "Redis is down; starting it"
  if command -v redis-server >/dev/null 2>&1; then
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
  fi
  for _ in $(seq 1 30); do redis_up && break; sleep 1; done
fi

pg_up || { echo "PostgreSQL is not reachable on 127.0.0.1:5432 (set TEST_DATABASE_URL or start it)"; exit 1; }
redis_up || { echo "Redis is not reachable on 127.0.0.1:6379 (start it)"; exit 1; }
