"""MCP over streamable HTTP helpers for the third hostile pass (var/h3)."""
import json, sys, urllib.request
from h3 import env, tok
URL = f"http://{env['MCP']}/mcp"
def post(body, who="alice", sid=None, raw=None, timeout=60, url=None, headers=None):
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    if who: h["Authorization"] = "Bearer " + tok[who]
    if sid: h["Mcp-Session-Id"] = sid
    h.update(headers or {})
    data = raw if raw is not None else json.dumps(body).encode()
    try:
        r = urllib.request.urlopen(urllib.request.Request(url or URL, data, h), timeout=timeout)
        return r.status, r.headers.get("Mcp-Session-Id"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, None, e.read().decode()
def init(who, url=None):
    st, sid, txt = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "hostile3", "version": "0"}}}, who, url=url)
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, who, sid, url=url)
    return sid
def result(txt):
    for line in txt.splitlines():
        if line.startswith("data: "):
            return json.loads(line[6:])
    try: return json.loads(txt)
    except Exception: return txt
def tool(who, sid, name, args, url=None):
    st, _, txt = post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": args}}, who, sid, url=url)
    return st, result(txt)
def tools(who, sid, url=None):
    st, _, txt = post({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, who, sid, url=url)
    return [t["name"] for t in result(txt)["result"]["tools"]]
