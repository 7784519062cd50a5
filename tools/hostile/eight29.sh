#!/usr/bin/env bash
# eight29.sh DIR (the coordinator's re-check after the twenty-eighth pass): eight identities m20..m27 send gpok.bin GetIndexInfo (64 KiB, one field) on --http-listen, 8 conns each, 10 s; bob's victim beside
D=$1; . $D/env
c0=$(awk '{print $14+$15}' /proc/$PID/stat)
(nice -n 10 python3 /work/main/tools/hostile/victim16a.py $D 12 bob 2>&1 | tail -1) &
for i in 20 21 22 23 24 25 26 27; do T=$(awk -v w=m$i '$1==w{print $3}' $D/tokens)
  nice -n 10 /tmp/p28/h2ctl20 -addr $HTTP -path /classifier.v1.ClassifierService/GetIndexInfo -mode refused -token $T -bodyfile /tmp/p28/gpok.bin -ctype application/grpc -frame 1024 -per 64 -conns 8 -inflight 1 -secs 10 > /tmp/p29/eight.$i.out 2>&1 &
done
wait
c1=$(awk '{print $14+$15}' /proc/$PID/stat)
grep -ho "map\[[^]]*\]\|client CPU [0-9.]*s" /tmp/p29/eight.*.out | paste - - | awk '{print}' | head -8
awk '/client CPU/{for(i=1;i<=NF;i++) if($i=="CPU" && $(i-1)=="client"){gsub("s","",$(i+1)); s+=$(i+1)}} END{print "clients CPU", s}' /tmp/p29/eight.*.out
echo "daemon CPU $(( (c1-c0) ))/100 s; load $(cut -d' ' -f1-3 /proc/loadavg)"; curl -s http://$METRICS/metrics | grep -E "^classifierd_body_bytes_past"
