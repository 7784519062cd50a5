#!/usr/bin/env python3
"""MCP over streamable HTTP against --mcp-listen: sessions per identity,
cross-identity session use, call_tool isolation on the memory server,
notification floods and batches, many standalone GET streams. Prints what
each answered and the daemon's RSS. Reads var/h/env and var/h/tokens."""
import json, os, sys, socket, time, threading, urllib.request
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
d = os.environ.get("DIR", os.path.join(root, "var/h"))
env = dict(l.strip().split("=", 1) for l in open(os.path.join(d, "env")))
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, "tokens"))}
URL = f"http://{env['MCP']}/mcp"
def rss():
    s = open(f"/proc/{env['PID']}/status").read()
    g = lambda k: int(s.split(k + ":")[1].split()[0]) // 1024
    return f"RSS {g('VmRSS')} MB HWM {g('VmHWM')} MB load {open('/proc/loadavg').read().split()[0]}"
def post(body, who="alice", sid=None, raw=None, timeout=30):
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
         "Authorization": "Bearer " + tok[who], "MCP-Protocol-Version": "2025-06-18"}
    if sid: h["Mcp-Session-Id"] = sid
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(URL, data, h)
    try:
        r = urllib.request.urlopen(req, timeout=timeout)
        txt = r.read().decode()
        return r.status, r.headers.get("Mcp-Session-Id"), txt
    except urllib.error.HTTPError as e:
        return e.code, None, e.read().decode()
def init(who):
    st, sid, _ = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "hostile", "version": "0"}}}, who)
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, who, sid)
    return st, sid
def tool(who, sid, name, args, i=2):
    return post({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": args}}, who, sid)
what = sys.argv[1:] or ["isolation", "cross", "flood", "batch", "sessions", "gets"]
print("start", rss())
if "isolation" in what:
    _, a = init("alice"); _, b = init("bob")
    print("alice create", tool("alice", a, "call_tool", {"server": "memory", "tool": "create_entities", "arguments":
        {"entities": [{"name": "alicebank", "entityType": "secret", "observations": ["alice bank PIN 4921"]}]}})[2][:160])
    r = tool("bob", b, "call_tool", {"server": "memory", "tool": "read_graph", "arguments": {}})
    print("bob read_graph sees alice's PIN:", "4921" in r[2], r[2][:200])
    r = tool("alice", a, "call_tool", {"server": "memory", "tool": "read_graph", "arguments": {}})
    print("alice read_graph sees her PIN:", "4921" in r[2])
if "cross" in what:
    _, a = init("alice")
    for m in ["GET", "DELETE"]:
        req = urllib.request.Request(URL, method=m, headers={"Authorization": "Bearer " + tok["bob"], "Mcp-Session-Id": a,
            "Accept": "text/event-stream"})
        try: print("bob", m, "alice's session:", urllib.request.urlopen(req, timeout=5).status)
        except urllib.error.HTTPError as e: print("bob", m, "alice's session:", e.code)
        except Exception as e: print("bob", m, e)
    print("bob POST alice's session:", tool("bob", a, "search_tools", {"query": "x"})[:1])
    print("ro call_tool:", tool("ro", init("ro")[1], "call_tool", {"server": "memory", "tool": "read_graph", "arguments": {}})[2][:160])
if "flood" in what:
    _, a = init("alice")
    t0 = time.time(); n = 0
    for i in range(2000):
        st, _, _ = post({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}, "alice", a); n += st == 202
    print(f"2000 list_changed notifications: {n} accepted in {time.time()-t0:.1f}s;", rss())
    print("session still answers:", tool("alice", a, "search_tools", {"query": "github issues"})[0])
if "batch" in what:
    _, a = init("alice")
    batch = [{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}] * 50000
    st, _, txt = post(None, "alice", a, raw=json.dumps(batch).encode())
    print("batch of 50000 notifications:", st, txt[:120], rss())
    batch = [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "search_tools", "arguments": {"query": "x" * 1000}}} for i in range(2000)]
    t0 = time.time(); st, _, txt = post(None, "alice", a, raw=json.dumps(batch).encode(), timeout=120)
    print(f"batch of 2000 search_tools: {st} {len(txt)} bytes in {time.time()-t0:.1f}s", txt[:120], rss())
if "sessions" in what:
    t0 = time.time(); codes = {}
    for i in range(1100):
        st, sid = init("bob"); codes[st] = codes.get(st, 0) + 1
    print(f"1100 initialize by bob: {codes} in {time.time()-t0:.1f}s;", rss())
    print("alice can still open one:", init("alice")[0])
if "gets" in what:
    _, a = init("alice")
    socks = []; codes = {}
    h, p = env["MCP"].split(":")
    for i in range(300):
        s = socket.create_connection((h, int(p)))
        s.sendall(f"GET /mcp HTTP/1.1\r\nHost: {env['MCP']}\r\nAuthorization: Bearer {tok['alice']}\r\nMcp-Session-Id: {a}\r\nAccept: text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n\r\n".encode())
        socks.append(s)
    time.sleep(2)
    for s in socks:
        s.settimeout(0.5)
        try: line = s.recv(64).split(b"\r\n")[0].decode()
        except Exception: line = "no answer (held)"
        codes[line] = codes.get(line, 0) + 1
    print("300 standalone GET streams on one session:", codes, rss())
    for s in socks: s.close()
print("end", rss())
