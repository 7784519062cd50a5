#!/usr/bin/env bash
# shared29.sh DIR SECS WHO... -- honest cmd... (twenty-ninth pass): the tokens WHO... each send gpok.bin
# GetIndexInfo (64 KiB, one field) on --http-listen, 8 connections each, SECS seconds (eight29.sh's flood, which
# keeps every caller's bodies past --all-body-bytes-per-second); 4 s in, the honest command runs (nice -n 10,
# timed). Then the flood's figures, the daemon's CPU and the byte-rate counters. H2CTL: h2ctl20 (default
# /tmp/p28/h2ctl20); BODY: the flood's body file (default /tmp/p28/gpok.bin); LST: HTTP (default) or GRPC.
D=$1; S=$2; shift 2; W=(); while [ "$1" != -- ]; do W+=("$1"); shift; done; shift
. "$D/env"; O=/tmp/p29h/sh.$$; mkdir -p $O; ADDR=$HTTP; [ "${LST:-HTTP}" = GRPC ] && ADDR=$GRPC
c0=$(awk '{print $14+$15}' /proc/$PID/stat)
for w in "${W[@]}"; do T=$(awk -v w=$w '$1==w{print $3}' "$D/tokens")
  nice -n 10 "${H2CTL:-/tmp/p28/h2ctl20}" -addr $ADDR -path /classifier.v1.ClassifierService/GetIndexInfo -mode refused -token $T \
    -bodyfile "${BODY:-/tmp/p28/gpok.bin}" -ctype application/grpc -frame 1024 -per 64 -conns 8 -inflight 1 -secs $S > $O/$w.out 2>&1 &
done
sleep 4; echo "honest start $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"; s=$(date +%s.%N)
nice -n 10 "$@"
echo "honest took $(echo "$(date +%s.%N) - $s" | bc | cut -c1-5) s"
wait; c1=$(awk '{print $14+$15}' /proc/$PID/stat)
grep -ho "map\[[^]]*\]" $O/*.out | head -2
awk '/client CPU/{for(i=1;i<=NF;i++) if($i=="CPU" && $(i-1)=="client"){gsub("s","",$(i+1)); s+=$(i+1)}} END{print "flood clients CPU", s}' $O/*.out
echo "daemon CPU $(( c1-c0 ))/100 s in the run; load $(cut -d' ' -f1-3 /proc/loadavg)"
curl -s http://$METRICS/metrics | grep -E "^classifierd_body_bytes_past|^classifierd_grpc_reset_penalties|^classifierd_grpc_early_reset_closes" | tr '\n' ' '; echo
