#!/usr/bin/env bash
# small30x.sh DIR SECS BODY PATH WHO... (thirtieth pass): small30 for each token WHO at once (8 connections, 16
# requests in flight each) on DIR/env's --http-listen, sending BODY (a small gRPC envelope, with its
# content-length) to PATH for SECS, bob's victim16a.py beside (from 1 s in); then each probe's last line, the
# daemon's CPU in the run against the probes' and the load. SMALL: the small30 binary (default /tmp/p30/small30).
D=$1; S=$2; B=$3; P=$4; shift 4; . "$D/env"; O=$D/sx.$$; mkdir -p $O
c0=$(awk '{print $14+$15}' /proc/$PID/stat)
for w in "$@"; do T=$(awk -v w=$w '$1==w{print $3}' "$D/tokens")
  nice -n 10 "${SMALL:-/tmp/p30/small30}" -addr $HTTP -path $P -token $T -bodyfile $B -conns 8 -inflight 16 -secs $S > $O/$w.out 2>&1 &
done
sleep 1; nice -n 10 python3 "$(dirname "$0")/victim16a.py" "$D" $((S-2)) bob | tail -1; wait
c1=$(awk '{print $14+$15}' /proc/$PID/stat)
for w in "$@"; do echo "$w: $(grep -E 'grpc-status [^0]|status 4|closed' $O/$w.out | tr -s ' \n' ' ') $(tail -1 $O/$w.out | sed 's/.*: sent/sent/')"; done
awk '/client CPU/{for(i=1;i<=NF;i++) if($i=="CPU" && $(i-1)=="client"){gsub("s","",$(i+1)); s+=$(i+1)}} END{print "probes CPU", s}' $O/*.out
echo "daemon CPU $(( c1-c0 ))/100 s; load $(cut -d' ' -f1-3 /proc/loadavg)"
