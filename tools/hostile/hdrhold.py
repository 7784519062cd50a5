#!/usr/bin/env python3
"""hdrhold.py HOST:PORT CONNS KB [HOLD]: open CONNS HTTP/1.1 connections, on
each send a request line and KB KiB of header lines (no token) without the
blank line that ends them, then hold; prints the target's RSS (PID from
$PID) every 2 s. The probe of what a server holds before it reads a whole
request head (MaxHeaderBytes, ReadHeaderTimeout)."""
import os, socket, sys, time
addr, conns, kb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
hold = float(sys.argv[4]) if len(sys.argv) > 4 else 14
host, port = addr.rsplit(":", 1)
pid = os.environ.get("PID")
def rss():
    if not pid: return ""
    s = open(f"/proc/{pid}/status").read()
    return "RSS %d MB HWM %d MB" % tuple(int(s.split(k + ":")[1].split()[0]) // 1024 for k in ("VmRSS", "VmHWM"))
print("before", rss(), flush=True)
socks, refused = [], 0
line = b"X-Pad-%05d: " + b"a" * 1000 + b"\r\n"
for i in range(conns):
    s = socket.create_connection((host, int(port)))
    s.sendall(b"POST /mcp HTTP/1.1\r\nHost: " + host.encode() + b"\r\n")
    try:
        for j in range(kb):
            s.sendall(line % j)
    except OSError:
        refused += 1
    socks.append(s)
print("sent", conns, "x", kb, "KiB; refused mid-head", refused, rss(), flush=True)
t0 = time.time()
while time.time() - t0 < hold:
    time.sleep(2)
    open_ = 0
    for s in socks:
        s.setblocking(False)
        try:
            d = s.recv(1)
            if d == b"": continue
            open_ += 1
        except BlockingIOError:
            open_ += 1
        except OSError:
            pass
    print("t=%.0fs open %d" % (time.time() - t0, open_), rss(), flush=True)
