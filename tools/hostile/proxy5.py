#!/usr/bin/env python3
"""proxy5.py: the fifth pass's proxy probe (startproxy5.sh): per-identity
isolation of the memory server (caller writes, ops and alice read), the
shared one (documented as shared), server and tool names that try to reach
another identity's backend or a path, scopes (carol: route only), and
call_tool arguments at the body limit; prints each answer clipped and the
backend files' modes."""
import sys, os, json, stat
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3 import env, d
import mcp3
U = f"http://{env['PROXY']}/mcp"
S = {w: mcp3.init(w, url=U) for w in ["alice", "bob", "carol", "caller", "ops"]}
def call(who, server, tool, args):
    return str(mcp3.tool(who, S[who], "call_tool", {"server": server, "tool": tool, "arguments": args}, url=U))
ent = {"entities": [{"name": "caller-secret-5", "entityType": "note", "observations": ["caller PIN 77315"]}]}
print("caller create", call("caller", "memory", "create_entities", ent)[:160])
for who in ["ops", "alice", "caller"]:
    r = call(who, "memory", "read_graph", {})
    print(who, "reads memory:", "SEES caller's PIN" if "77315" in r else "no", r[:120])
for srv in ["memory ", "MEMORY", "memory@caller", "memory/caller", "../memory", "memory\u0000caller", "caller", "${identity}", "memory__caller"]:
    r = call("ops", srv, "read_graph", {})
    print("ops server", repr(srv), "SEES" if "77315" in r else "no", r[:140])
print("carol", call("carol", "memory", "read_graph", {})[:140])
big = {"entities": [{"name": "big%d" % i, "entityType": "n", "observations": ["x" * 60000]} for i in range(60)]}
for i in range(3):
    print("ops 3.6 MB args", call("ops", "memory", "create_entities", big)[:100])
r = call("ops", "memory", "read_graph", {})
print("ops read_graph answer", len(r), "bytes")
print("ops server name of 1 MB:", len(call("ops", "m" * 1_000_000, "read_graph", {})), "bytes answered")
for f in sorted(os.listdir(os.path.join(d, "pmem"))):
    st = os.stat(os.path.join(d, "pmem", f))
    print("file", f, oct(stat.S_IMODE(st.st_mode)), st.st_size)
