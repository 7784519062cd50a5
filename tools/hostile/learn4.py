#!/usr/bin/env python3
"""learn4.py SECONDS: ReportUse flooding by one identity (alice) with a new
query each time, as fast as one connection goes, then the same through
Route request ids; prints the answers' statuses, the daemon's RSS and CPU,
and the size of the learning database (--learn-db). Then checks that bob's
reports are still accepted (his own rate)."""
import os, sys, time, collections, glob
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3 import c, proc, d
secs = float(sys.argv[1]) if len(sys.argv) > 1 else 20
def dbsize():
    return sum(os.path.getsize(f) for f in glob.glob(os.path.join(d, "state", "learn.db*")))
st, r = c("Route", {"query": "create a github issue for the login bug"}, "alice")
srv = [s.get("id") or s.get("server") for s in r.get("servers", [])][:2] if isinstance(r, dict) else []
print("route", st, srv, str(r)[:0])
print("before", proc(), "learn.db*", dbsize())
codes = collections.Counter(); t0 = time.time(); i = 0
while time.time() - t0 < secs:
    st, r = c("ReportUse", {"query": f"q{i} {os.urandom(6).hex()} deploy the thing {i*7919}", "servers": srv}, "alice")
    codes[st] += 1; i += 1
print(f"alice ReportUse by query, {secs}s: {dict(codes)}", proc(), "learn.db*", dbsize())
codes = collections.Counter(); t0 = time.time(); i = 0
while time.time() - t0 < secs:
    st, r = c("Route", {"query": f"route {i} {os.urandom(6).hex()}"}, "alice")
    if st != 200: codes["route%s" % st] += 1; continue
    st, r2 = c("ReportUse", {"requestId": r.get("requestId", ""), "servers": srv}, "alice")
    codes[st] += 1; i += 1
print(f"alice Route+ReportUse by id, {secs}s: {dict(codes)}", proc(), "learn.db*", dbsize())
st, r = c("ReportUse", {"query": "bob's own report", "servers": srv}, "bob")
print("bob ReportUse (route,sessions,terminal scopes):", st, str(r)[:100])
st, r = c("ReportUse", {"query": "ops report", "servers": srv}, "ops")
print("ops ReportUse:", st, str(r)[:100])
