#!/usr/bin/env bash
# fl28.sh DIR WHO BODYFILE PATH [LISTENER] [SECS] (twenty-eighth pass): run25.sh (bob's victim16a.py beside,
# VmRSS/VmHWM, load) around h2ctl20's refused mode sending BODYFILE (a gRPC envelope) to PATH on DIR/env's
# LISTENER (GRPC, the default, or HTTP) with WHO's token: 64 connections, one call in flight on each, 48
# DATA frames of 1,024 bytes a call, SECS (default 10) seconds. H2CTL: the h2ctl20 binary (default
# /tmp/p28/h2ctl20).
D=$1; W=$2; F=$3; P=$4; A=${5:-GRPC}; S=${6:-10}
H=$(cd "$(dirname "$0")" && pwd)
. "$D/env"; T=$(awk -v w="$W" '$1==w{print $3}' "$D/tokens"); ADDR=${!A}
echo "== $D $W $F $P on $A ($ADDR) $(date +%T)"
bash "$H/run25.sh" "$D" "$S" -- "${H2CTL:-/tmp/p28/h2ctl20}" -addr "$ADDR" -path "$P" -mode refused -token "$T" -bodyfile "$F" \
  -ctype application/grpc -frame 1024 -per 48 -conns 64 -inflight 1 -secs "$S" -pid "$PID"
