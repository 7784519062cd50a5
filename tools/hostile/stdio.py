#!/usr/bin/env python3
"""classifierd mcp (stdio): hostile frames one after another — not JSON,
NUL bytes, invalid UTF-8, 10k-deep nesting, a 6 MiB line, a batch of 5000,
a notification flood — then a tools/call; prints each answer and whether the
process still serves. Usage: stdio.py CMD... (the classifierd mcp command)."""
import json, subprocess, sys, threading, time, os
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
out = []
def reader():
    for line in p.stdout:
        out.append(line)
threading.Thread(target=reader, daemon=True).start()
def send(b):
    p.stdin.write(b + b"\n"); p.stdin.flush()
def wait_id(i, t=60):
    end = time.time() + t
    while time.time() < end:
        for l in out:
            if b'"id":%d' % i in l or b'"id": %d' % i in l:
                return l[:200]
        if p.poll() is not None:
            return b"PROCESS EXITED %d" % p.returncode
        time.sleep(0.05)
    return b"no answer"
send(json.dumps({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"h","version":"0"}}}).encode())
print("init:", wait_id(1)[:80])
send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
frames = {"not json": b"\x00\x01garbage\xff", "nul in string": b'{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"a\\u0000b"}}}',
  "invalid utf8": b'{"jsonrpc":"2.0","id":51,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"a\xff\xfeb"}}}',
  "deep": b'{"jsonrpc":"2.0","id":52,"method":"x","params":' + b"[" * 100000 + b"]" * 100000 + b"}",
  "6 MiB line": b'{"jsonrpc":"2.0","id":53,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"' + b"a" * (6 << 20) + b'"}}}',
  "batch 5000": json.dumps([{"jsonrpc":"2.0","id":1000+i,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"github"}}} for i in range(5000)]).encode(),
}
for name, f in frames.items():
    t0 = time.time(); send(f)
    n = len(out)
    time.sleep(1.0)
    print(f"{name}: {len(out)-n} answers, e.g.", (out[-1][:150] if len(out) > n else b"-"), "alive" if p.poll() is None else "EXITED")
for i in range(20000):
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}\n')
p.stdin.flush()
send(json.dumps({"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"list github issues"}}}).encode())
print("after 20000 notifications, tools/call:", wait_id(99, 120)[:120])
rss = open(f"/proc/{p.pid}/status").read().split("VmHWM:")[1].split("\n")[0].strip() if p.poll() is None else "-"
print("stdio process VmHWM", rss)
p.stdin.close(); p.wait(timeout=30)
