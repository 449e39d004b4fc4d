#!/usr/bin/env bash
# Runs Gatehouse distributed on one machine: four processes on loopback ports,
# PostgreSQL (a schema per service) and Redis. Ctrl-C stops everything.
#
#   edge :8080 -> authn :8081, tokens :8082, directory :8083
#
# Overrides: GATEHOUSE_DATABASE_URL, GATEHOUSE_REDIS_URL, GATEHOUSE_ISSUER,
# RUN_DIR (state, logs; default ./data-distributed).
set -euo pipefail
cd "$(dirname "$0")/.."

RUN_DIR=${RUN_DIR:-./data-distributed}
mkdir -p "$RUN_DIR/logs"
chmod 700 "$RUN_DIR"

export GATEHOUSE_DATABASE_URL=${GATEHOUSE_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
export GATEHOUSE_REDIS_URL=${GATEHOUSE_REDIS_URL:-redis://127.0.0.1:6379/0}
export GATEHOUSE_ISSUER=${GATEHOUSE_ISSUER:-http://localhost:8080}
export GATEHOUSE_DATA_DIR=$RUN_DIR

# Secrets shared by the four processes, generated once (0600).
secret() { # file bytes
  if [ ! -s "$1" ]; then (umask 077; head -c "$2" /dev/urandom | base64 -w0 > "$1"); fi
  cat "$1"
}
export GATEHOUSE_MASTER_KEY=$(secret "$RUN_DIR/master.key" 32)
export GATEHOUSE_INTERNAL_TOKEN=$(secret "$RUN_DIR/internal.token" 48)
export GATEHOUSE_AUTHN_URL=http://127.0.0.1:8081
export GATEHOUSE_TOKENS_URL=http://127.0.0.1:8082
export GATEHOUSE_DIRECTORY_URL=http://127.0.0.1:8083

reachable() { # host:port
  (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null
}
hostport() { # URL -> host:port
  local rest=${1#*://}; rest=${rest#*@}; rest=${rest%%/*}; rest=${rest%%\?*}
  case $rest in *:*) echo "$rest" ;; *) echo "$rest:$2" ;; esac
}
reachable "$(hostport "$GATEHOUSE_DATABASE_URL" 5432)" || { echo "PostgreSQL is not reachable at $(hostport "$GATEHOUSE_DATABASE_URL" 5432)" >&2; exit 1; }
reachable "$(hostport "$GATEHOUSE_REDIS_URL" 6379)" || { echo "Redis is not reachable at $(hostport "$GATEHOUSE_REDIS_URL" 6379)" >&2; exit 1; }

pids=()
stop() {
  trap - INT TERM EXIT
  echo "stopping..."
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait || true
}
trap stop INT TERM EXIT

start() { # name port [unset vars...]
  local name=$1 port=$2
  GATEHOUSE_ADDR=127.0.0.1:$port ./bin/"$name" >>"$RUN_DIR/logs/$name.log" 2>&1 &
  pids+=($!)
  echo "started $name (pid $!) on 127.0.0.1:$port, log $RUN_DIR/logs/$name.log"
}

start directory 8083
start tokens 8082
start authn 8081
GATEHOUSE_ADDR=127.0.0.1:8080 ./bin/edge >>"$RUN_DIR/logs/edge.log" 2>&1 &
pids+=($!)
echo "started edge (pid $!) on 127.0.0.1:8080, log $RUN_DIR/logs/edge.log"

for port in 8083 8082 8081 8080; do
  for _ in $(seq 1 100); do
    if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then break; fi
    sleep 0.2
  done
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || { echo "process on :$port did not become ready; see $RUN_DIR/logs" >&2; exit 1; }
done
echo "Gatehouse (distributed) is ready at $GATEHOUSE_ISSUER — Ctrl-C stops all four processes."
# A stopped service only takes its own routes down (edge answers 503 for
# them); keep the others running until Ctrl-C.
wait || true
