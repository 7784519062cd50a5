#!/usr/bin/env bash
# run25.sh DIR SECS -- probe... (twenty-fifth pass): run22.sh (the probe under nice with bob's victim16a.py
# beside) with the daemon's VmRSS/VmHWM and the load before and after, and a count of 'fatal error', 'DATA RACE'
# and 'panic' lines in DIR/daemon.log.
D=$1; . "$D/env"; H=$(cd "$(dirname "$0")" && pwd)
m() { grep -E "VmRSS|VmHWM" /proc/$PID/status | awk '{printf "%s %d MB ", $1, $2/1024}'; }
echo "before: $(m) load $(cut -d' ' -f1 /proc/loadavg)"
bash "$H/run22.sh" "$@" 2>&1 | tail -6
echo "after: $(m) load $(cut -d' ' -f1 /proc/loadavg)"
echo "fatal/race/panic lines: $(grep -c "fatal error\|DATA RACE\|panic" "$D/daemon.log")"
