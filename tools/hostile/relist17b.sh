#!/usr/bin/env bash
# relist17b.sh MODE SECS: restart the proxy of run17b.sh with the shared evil17 (evilmcp17b.py) in MODE
# ("fatdie 15 1000", "fatflood 15 1000 100", "over 16 1000"), then count its starts and pages served and the
# proxy's CPU and peak RSS over SECS s. Leaves the proxy running (run17b.sh stop).
cd "$(dirname "$0")/../.."
tools/hostile/run17b.sh stop; echo "$1" > var/h17b/evil17.mode; rm -f var/h17b/evil17.mode.starts var/h17b/evil17.mode.log
tools/hostile/run17b.sh start >/dev/null; P=$(grep PROXY_PID var/h17b/env|cut -d= -f2)
c0=$(awk '{print $14+$15}' /proc/$P/stat); n0=$(wc -l < var/h17b/evil17.mode.starts); p0=$(wc -l < var/h17b/evil17.mode.log); maxr=0
for i in $(seq $2); do sleep 1; r=$(awk '/VmRSS/{print int($2/1024)}' /proc/$P/status); [ $r -gt $maxr ] && maxr=$r; done
c1=$(awk '{print $14+$15}' /proc/$P/stat)
echo "$1: starts in $2 s: $(( $(wc -l < var/h17b/evil17.mode.starts) - n0 )), pages $(( $(wc -l < var/h17b/evil17.mode.log) - p0 )); proxy CPU $(echo "($c1-$c0)/100" | bc -l | cut -c1-5) s; RSS max $maxr MB; load $(cut -d' ' -f1 /proc/loadavg)"
grep "evil17" var/h17b/proxy.log | grep -v "left out" | tail -2 | cut -c1-300
