#!/usr/bin/env bash
# race30.sh DIR [SECS] (thirtieth pass): mixed floods at once against a daemon (a `go build -race` one) for SECS
# (default 15): the --listen flood of gpok48.bin GetIndexInfo past its rates (m42, 32 connections: closes at the
# 8th refusal, 7f55651), small30's 1 KiB GetSession bodies on --http-listen (m33, never refused for the byte
# rates), four tokens' gpok.bin on --http-listen (m0..m3, the shared rate), mcpargs28's 32,700 zeros on MCP
# (m20), a no-token h2ctl20 flood on --http-listen; 4 s in, hub30.py (a hog and bob on one channel), embed29
# (2 MB Embeds), grpcio 1,000 Routes, browser22. Then alive?, and the 'DATA RACE' / 'fatal error' / 'panic'
# lines of DIR/daemon.log. H2CTL (default /tmp/p28/h2ctl20), SMALL (default /tmp/p30/small30).
D=$1; S=${2:-15}; H=$(cd "$(dirname "$0")" && pwd); PY=${PY:-/tmp/p24v/bin/python}; . "$D/env"
tk() { awk -v w="$1" '$1==w{print $3}' "$D/tokens"; }
H2=${H2CTL:-/tmp/p28/h2ctl20}; SM=${SMALL:-/tmp/p30/small30}; O=$D/race30; mkdir -p $O
echo "start $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
nice -n 10 $H2 -addr $GRPC -path /classifier.v1.ClassifierService/GetIndexInfo -mode refused -token $(tk m42) -bodyfile /tmp/p28/gpok48.bin -ctype application/grpc -frame 1024 -per 48 -conns 32 -inflight 1 -secs $S > $O/f1.out 2>&1 &
nice -n 10 $SM -addr $HTTP -path /classifier.v1.ClassifierService/GetSession -token $(tk m33) -bodyfile /tmp/p30/s_empty.bin -conns 8 -inflight 16 -secs $S > $O/small.out 2>&1 &
for w in m0 m1 m2 m3; do nice -n 10 $H2 -addr $HTTP -path /classifier.v1.ClassifierService/GetIndexInfo -mode refused -token $(tk $w) -bodyfile /tmp/p28/gpok.bin -ctype application/grpc -frame 1024 -per 64 -conns 8 -inflight 1 -secs $S > $O/sh.$w.out 2>&1 & done
nice -n 10 python3 $H/mcpargs28.py $D m20 $S route 32700 2 95 > $O/mcp.out 2>&1 &
nice -n 10 $H2 -addr $HTTP -mode refused -frame 1024 -per 16 -conns 128 -secs $S > $O/notoken.out 2>&1 &
sleep 4
nice -n 10 $PY $H/hub30.py $D 8 m43 bob 4 > $O/hub.out 2>&1 &
nice -n 10 python3 $H/embed29.py $D alice 8 8 250000 2 > $O/embed.out 2>&1 &
WHO=m6 nice -n 10 $PY $H/grpcio21.py $D many 1000 > $O/grpcio.out 2>&1 &
nice -n 10 $PY $H/browser22.py $D 3 > $O/browser.out 2>&1 &
wait
echo "end $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
for f in $O/*.out; do echo "== $(basename $f): $(tail -3 $f | tr '\n' ' ' | cut -c1-400)"; done
kill -0 $PID && echo "alive: $(grep -E 'VmHWM|Threads' /proc/$PID/status | tr -s ' \n' ' ')"
echo "DATA RACE / fatal error / panic lines: $(grep -c 'DATA RACE\|fatal error\|panic' $D/daemon.log)"
