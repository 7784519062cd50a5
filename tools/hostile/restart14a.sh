#!/usr/bin/env bash
# restart14a.sh: stop the daemon of DIR (default var/h14a) by its PID and start it again
# (start13a.sh, PORTBASE (43200), TLS=1 unless TLS=0), so that a run starts with no penalty.
# The ports lie in the ephemeral range: a probe's outgoing connections may hold one for a
# while, so the start is retried until the daemon listens.
ROOT=$(cd "$(dirname "$0")/../.." && pwd); cd "$ROOT"
DIR=${DIR:-$ROOT/var/h14a}; . "$DIR/env"
kill "$PID" 2>/dev/null; while kill -0 "$PID" 2>/dev/null; do sleep 0.2; done
for i in 1 2 3 4 5 6 7 8 9 10; do
  PORTBASE=${PORTBASE:-43200} DIR=$DIR TLS=${TLS:-1} tools/hostile/start13a.sh > /dev/null
  . "$DIR/env"; sleep 1
  kill -0 "$PID" 2>/dev/null && curl -s "http://$METRICS/metrics" >/dev/null && { echo "PID=$PID"; exit 0; }
  sleep 2
done
echo "could not start"; exit 1
