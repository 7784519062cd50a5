#!/usr/bin/env python3
"""mcpget5.py N: the fifth pass's MCP event-stream probe: one MCP session
(alice) on --mcp-listen, then N standalone GET /mcp event streams on it held
open at once; prints how many got 200, the daemon's RSS/threads/fds before
and after, then closes them. Also N sessions' worth of GETs without a token."""
import os, socket, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3 import env, tok, proc
from mcp3 import init
n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
fds = lambda: len(os.listdir(f"/proc/{env['PID']}/fd"))
sid = init("alice")
print("session", sid, proc(), "fds", fds())
host, port = env["MCP"].split(":")
socks, codes = [], {}
for i in range(n):
    s = socket.create_connection((host, int(port)))
    s.sendall((f"GET /mcp HTTP/1.1\r\nHost: {env['MCP']}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {sid}\r\n"
               f"MCP-Protocol-Version: 2025-06-18\r\nAuthorization: Bearer {tok['alice']}\r\n\r\n").encode())
    socks.append(s)
time.sleep(2)
for s in socks:
    s.settimeout(0.5)
    try: line = s.recv(200).split(b"\r\n")[0].decode()
    except Exception: line = "no answer"
    codes[line] = codes.get(line, 0) + 1
print(codes)
print("held", proc(), "fds", fds())
for s in socks: s.close()
time.sleep(1)
print("after", proc(), "fds", fds())
