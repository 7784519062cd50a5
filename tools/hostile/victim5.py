#!/usr/bin/env python3
"""victim5.py SECONDS [SRC] [new|keep] [http|mcp|metrics|proxy]: another
client's calls while a flood runs: bob's small Route over HTTP/JSON (or an
MCP tools/list, a /metrics GET, the proxy's tools/list), from source address
SRC (127.0.0.1), on a new connection each call (new) or one kept-alive
connection (keep); prints count, statuses (reset: refused connection),
p50, p99 and max in ms, the daemon's RSS and open fds, and the load."""
import http.client, json, os, sys, time, collections
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3 import env, tok, proc
secs = float(sys.argv[1]); src = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
reuse = (sys.argv[3] if len(sys.argv) > 3 else "new") == "keep"
what = sys.argv[4] if len(sys.argv) > 4 else "http"
target = {"http": env["HTTP"], "mcp": env["MCP"], "metrics": env["METRICS"], "proxy": env.get("PROXY", "")}[what]
host, port = target.split(":")
fds = lambda: len(os.listdir(f"/proc/{env['PID']}/fd"))
lat, codes, t0, conn, maxfd = [], collections.Counter(), time.time(), None, 0
sid = None
def req(c):
    global sid
    if what == "http":
        c.request("POST", "/classifier.v1.ClassifierService/Route", json.dumps({"query": "open a pull request on github"}),
                  {"Content-Type": "application/json", "Authorization": "Bearer " + tok["bob"]})
    elif what == "metrics":
        c.request("GET", "/metrics")
    else:
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18",
             "Authorization": "Bearer " + tok["caller" if what == "proxy" else "bob"]}
        if sid is None:
            c.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
                "capabilities": {}, "clientInfo": {"name": "victim5", "version": "0"}}}), h)
            r = c.getresponse(); r.read(); sid = r.getheader("Mcp-Session-Id")
            h["Mcp-Session-Id"] = sid
            c.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), h)
            r = c.getresponse(); r.read()
        h["Mcp-Session-Id"] = sid
        c.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}), h)
    r = c.getresponse(); r.read(); return r.status
while time.time() - t0 < secs:
    s = time.time()
    try:
        if conn is None:
            conn = http.client.HTTPConnection(host, int(port), timeout=30, source_address=(src, 0))
        codes[req(conn)] += 1
    except (ConnectionResetError, ConnectionRefusedError, BrokenPipeError, http.client.RemoteDisconnected) as e:
        codes["reset"] += 1; conn = None
    except Exception as e:
        codes[type(e).__name__] += 1; conn = None
    lat.append((time.time() - s) * 1000)
    if not reuse and conn is not None:
        conn.close(); conn = None
    maxfd = max(maxfd, fds())
    time.sleep(0.05)
lat.sort(); p = proc()
print(f"victim5 {what} {src} {'keep' if reuse else 'new'}: {len(lat)} calls {dict(codes)} p50 {lat[len(lat)//2]:.1f} p99 {lat[int(len(lat)*.99)]:.1f} max {lat[-1]:.1f} ms; rss {p['rss']} MB, fds max {maxfd}, load {p['load']}")
