#!/usr/bin/env python3
"""mcpflood17b.py DIR WHO METHOD T SECS [DEPTH]: bob's small calls (search_tools, call_tool of
everything's echo) on the proxy (or the daemon's --mcp-listen: env ADDR=host:port, BOBTOOL=route),
SECS s idle, then SECS s while WHO (a process of its own at nice 10) keeps T HTTP/1.1 connections each
pipelining DEPTH (default 16) requests of METHOD at a time on one session (tools/list, ping,
prompts/list, resources/list; "echo": tools/call of call_tool everything/echo, "badjson": a body
that does not parse), answers read raw. Counts per answer the HTTP status, the JSON-RPC error code
(-32029 = refused by admission), the answers that said Connection: close and the connections the
server closed. Prints bob's p50/p99 per phase, the server's CPU and RSS, the flooder's CPU."""
import os, sys, json, time, threading, socket, subprocess, resource, collections
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, who, method, T, secs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
depth = int(sys.argv[6]) if len(sys.argv) > 6 else 16
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
addr = os.environ.get('ADDR', env.get('PROXY', ''))
pid = os.environ.get('SPID', env.get('PROXY_PID'))
def st():
    s = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith(('VmRSS', 'VmHWM'))}
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / 100, s['VmRSS'], s['VmHWM']
if os.environ.get('ROLE') == 'hog':
    os.nice(10)
    host, port = addr.split(':')
    s = mcp10.Session(addr, tok[who])
    hdr = ''.join('%s: %s\r\n' % kv for kv in s.h.items())
    def req(i):
        if method == 'echo':
            m = {'jsonrpc': '2.0', 'id': i, 'method': 'tools/call', 'params': {'name': 'call_tool', 'arguments': {'server': 'everything', 'tool': 'echo', 'arguments': {'message': 'hi'}}}}
            b = json.dumps(m).encode()
        elif method == 'badjson':
            b = b'{"jsonrpc":"2.0","id":%d,"method":' % i
        else:
            b = json.dumps({'jsonrpc': '2.0', 'id': i, 'method': method, 'params': {}}).encode()
        return ('POST /mcp HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %d\r\n\r\n' % (addr, hdr, len(b))).encode() + b
    batch = b''.join(req(i + 1) for i in range(depth))
    stats = collections.Counter(); lock = threading.Lock(); t0 = time.time()
    def run():
        c = None; buf = b''
        while time.time() - t0 < secs:
            try:
                if c is None:
                    c = socket.create_connection((host, int(port)), timeout=30); buf = b''
                    with lock: stats['connections'] += 1
                c.sendall(batch)
                got = 0
                while got < depth:
                    while b'\r\n\r\n' not in buf:
                        x = c.recv(65536)
                        if not x: raise ConnectionResetError('closed')
                        buf += x
                    head, buf = buf.split(b'\r\n\r\n', 1)
                    hl = head.decode('latin1').lower()
                    code = head[9:12].decode()
                    n = int(hl.split('content-length:')[1].split('\r\n')[0]) if 'content-length:' in hl else None
                    if n is None:  # chunked (an event stream): read every chunk to the last, empty one
                        body = b''
                        while True:
                            while b'\r\n' not in buf:
                                x = c.recv(65536)
                                if not x: raise ConnectionResetError('closed')
                                buf += x
                            line, buf = buf.split(b'\r\n', 1)
                            size = int(line.split(b';')[0], 16)
                            while len(buf) < size + 2:
                                x = c.recv(65536)
                                if not x: raise ConnectionResetError('closed')
                                buf += x
                            body += buf[:size]; buf = buf[size + 2:]
                            if size == 0: break
                    else:
                        while len(buf) < n:
                            x = c.recv(65536)
                            if not x: raise ConnectionResetError('closed')
                            buf += x
                        body, buf = buf[:n], buf[n:]
                    k = code
                    if b'"code":-32029' in body: k += ' rpc-32029'
                    elif b'"error"' in body: k += ' rpc-err'
                    with lock:
                        stats[k] += 1
                        if 'connection: close' in hl: stats['said close'] += 1
                    got += 1
                    if 'connection: close' in hl: raise ConnectionResetError('close')
            except (OSError, IndexError, ValueError) as e:
                with lock: stats['closed/' + type(e).__name__] += 1
                try: c.close()
                except Exception: pass
                c = None
    ths = [threading.Thread(target=run) for _ in range(T)]; [t.start() for t in ths]; [t.join() for t in ths]
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print('flooder: %s; its CPU %.2f s' % (dict(stats), ru.ru_utime + ru.ru_stime), flush=True)
    sys.exit(0)
bs = mcp10.Session(addr, tok['bob'])
btool = os.environ.get('BOBTOOL', 'search_tools')
def bob(phase, stop):
    lat = []; errs = collections.Counter(); i = 0
    while not stop():
        i += 1; t = time.time()
        if btool == 'route' or i % 2:
            tl, a = (btool, {'query': 'open a pull request on github'})
        else:
            tl, a = 'call_tool', {'server': 'everything', 'tool': 'echo', 'arguments': {'message': 'hi'}}
        try:
            code, r = bs.tool(tl, a)
            ok = code == 200 and isinstance(r, dict) and 'result' in r and not r['result'].get('isError')
            if not ok: errs[str(code) + ' ' + json.dumps(r)[:90]] += 1
        except Exception as e:
            errs[type(e).__name__] += 1
        lat.append((time.time() - t) * 1000); time.sleep(0.05)
    lat.sort(); q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
    print('%-6s bob: %d calls p50 %.1f p99 %.1f max %.0f ms errors %s' % (phase, len(lat), q(.5), q(.99), lat[-1], dict(errs)), flush=True)
c0 = st(); t0 = time.time(); bob('idle', lambda: time.time() - t0 > secs)
c1 = st(); print('idle: server CPU %.2f s in %.0f s, RSS %d MB, load %s' % (c1[0] - c0[0], secs, c1[1], open('/proc/loadavg').read().split()[0]), flush=True)
hog = subprocess.Popen([sys.executable] + sys.argv, env=dict(os.environ, ROLE='hog'))
time.sleep(1); t1 = time.time()
bob('flood', lambda: hog.poll() is not None or time.time() - t1 > secs)
hog.wait(); c2 = st()
print('flood: server CPU %.2f s in %.1f s, RSS %d MB (peak %d), load %s' % (c2[0] - c1[0], time.time() - t1 + 1, c2[1], c2[2], open('/proc/loadavg').read().split()[0]))
