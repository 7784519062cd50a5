#!/usr/bin/env bash
# rss.sh: the daemon's VmRSS and VmHWM (kB) and the load average.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "${DIR:-$ROOT/var/h}/env"
echo "$(grep -E 'VmRSS|VmHWM' /proc/$PID/status | tr -s ' \t' ' ' | tr '\n' ' ') load=$(cut -d' ' -f1-3 /proc/loadavg)"
