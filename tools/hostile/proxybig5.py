#!/usr/bin/env python3
"""proxybig5.py MB CONC: the fifth pass's backend-answer amplification probe
on the proxy (startproxy5.sh): identity ops grows its own per-identity
memory graph to about MB megabytes with 3.6 MB create_entities calls, then
CONC sessions call read_graph at once; prints the proxy's RSS (and peak)
before, during and after, and each answer's size and time. Another
identity (caller) calls search_tools meanwhile and its latency is printed."""
import sys, os, json, time, threading
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3 import env
import mcp3
U = f"http://{env['PROXY']}/mcp"
mb, conc = int(sys.argv[1]), int(sys.argv[2])
ppid = env["PROXY_PID"]
def st(pid):
    s = open(f"/proc/{pid}/status").read()
    g = lambda k: int(s.split(k + ":")[1].split()[0]) // 1024
    return g("VmRSS"), g("VmHWM")
def call(who, sid, server, tool, args, timeout=300):
    return mcp3.tool(who, sid, "call_tool", {"server": server, "tool": tool, "arguments": args}, url=U)
so = mcp3.init("ops", url=U)
have = len(str(call("ops", so, "memory", "read_graph", {})))
k = 0
while have < mb * 1_000_000:
    big = {"entities": [{"name": f"g{time.time_ns()}-{i}", "entityType": "n", "observations": ["x" * 60000]} for i in range(60)]}
    call("ops", so, "memory", "create_entities", big); have += 3_700_000; k += 1
print("graph about", have // 1_000_000, "MB after", k, "writes; proxy rss/hwm", st(ppid), "load", open("/proc/loadavg").read().split()[0], flush=True)
sessions = [mcp3.init("ops", url=U) for _ in range(conc)]
out = []
def rd(sid):
    t = time.time(); r = call("ops", sid, "memory", "read_graph", {}); out.append((len(str(r)), round(time.time() - t, 1)))
ths = [threading.Thread(target=rd, args=(s,)) for s in sessions]
peak, lat = 0, []
sc = mcp3.init("caller", url=U)
for th in ths: th.start()
while any(th.is_alive() for th in ths):
    t = time.time(); mcp3.tool("caller", sc, "search_tools", {"query": "read a github issue"}, url=U); lat.append(time.time() - t)
    peak = max(peak, st(ppid)[0]); time.sleep(0.2)
for th in ths: th.join()
lat.sort()
print("answers", out)
print("proxy rss peak during", peak, "MB; rss/hwm after", st(ppid), "; caller search_tools n=%d p50=%.0fms max=%.0fms" % (len(lat), lat[len(lat)//2]*1000, lat[-1]*1000))
