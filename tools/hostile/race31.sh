#!/usr/bin/env bash
# race31.sh DIR [SECS] (thirty-first pass): race30.sh's mixed floods plus what 77b5074's unread-DATA path sees on
# --listen: gpempty48 GetSession bodies refused at their headers (m44, 64 connections: counted, held in the peer's
# queue), junk48 (a 5-byte GetIndexInfo then a 48 KiB second message no call reads, m21, 32 connections: the
# uncounted path, finding 1) and peerq31.py (carol refused with bodies in flight, backing off, Routes on the same
# channel). Then race30.sh's alive / 'DATA RACE' / 'fatal error' / 'panic' report.
D=$1; S=${2:-15}; H=$(cd "$(dirname "$0")" && pwd); PY=${PY:-/tmp/p24v/bin/python}; . "$D/env"
tk() { awk -v w="$1" '$1==w{print $3}' "$D/tokens"; }
H2=${H2CTL:-/tmp/p28/h2ctl20}; O=$D/race31; mkdir -p $O
nice -n 10 $H2 -addr $GRPC -path /classifier.v1.ClassifierService/GetSession -mode refused -token $(tk m44) -bodyfile /tmp/p28/gpempty48.bin -ctype application/grpc -frame 1024 -per 48 -conns 64 -inflight 1 -secs $S > $O/unread.out 2>&1 &
nice -n 10 $H2 -addr $GRPC -path /classifier.v1.ClassifierService/GetIndexInfo -mode refused -token $(tk m21) -bodyfile ${JUNK:-/tmp/p31h/junk48.bin} -ctype application/grpc -frame 1024 -per 48 -conns 32 -inflight 1 -secs $S > $O/junk.out 2>&1 &
(sleep 4; nice -n 10 $PY $H/peerq31.py $D 8 carol 2 0.5 > $O/peerq.out 2>&1) &
bash $H/race30.sh "$D" "$S"
wait
for f in $O/*.out; do echo "== $(basename $f): $(tail -2 $f | tr '\n' ' ' | cut -c1-400)"; done
echo "DATA RACE / fatal error / panic lines: $(grep -c 'DATA RACE\|fatal error\|panic' $D/daemon.log)"
