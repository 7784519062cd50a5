#!/usr/bin/env bash
# rss29.sh DIR SECS -- probe... (twenty-ninth pass): the probe under nice -n 10 with DIR/env's daemon's VmRSS
# and VmHWM printed every second (MB) and the load, for memory growth under a flood.
D=$1; S=$2; shift 3; . "$D/env"
( for i in $(seq $((S+3))); do printf '%s ' "$(awk '/VmRSS/{r=$2}/VmHWM/{h=$2}END{printf "%d/%d", r/1024, h/1024}' /proc/$PID/status)"; sleep 1; done; echo "(RSS/HWM MB each second) load $(cut -d' ' -f1 /proc/loadavg)" ) &
nice -n 10 "$@" 2>&1 | tail -2; wait
