#!/usr/bin/env python3
"""mcpfair14b.py DIR MODE T SECS: fairness on an MCP listener (TARGET=MCP, the daemon's, or PROXY).
bob (his own process) calls a small MCP tool (daemon: route; proxy: search_tools) on one session back
to back: SECS s idle, then SECS s while the hog identity (HOG, default carol; a separate process at
nice NICE, default 0) keeps T threads sending MODE: init (initialize, new session each, never
deleted), ping (in one session), list (tools/list single), badinit (initialize with a 60 KB
clientInfo), notif (notifications/initialized floods); prints bob's p50/p99/max and errors (any
refusal) per phase, the hog's statuses, the target's CPU, RSS and goroutines."""
import os, sys, json, time, threading, http.client, subprocess, urllib.request
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, mode, T, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
target = os.environ.get('TARGET', 'MCP'); hog = os.environ.get('HOG', 'carol')
pid = env['PROXY_PID'] if target == 'PROXY' else env['PID']
met = env['PROXY_METRICS'] if target == 'PROXY' else env['METRICS']
def st():
    s = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith(('VmRSS',))}
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    try: g = [l.split()[1] for l in urllib.request.urlopen(f'http://{met}/metrics', timeout=5).read().decode().splitlines() if l.startswith('go_goroutines ')][0]
    except Exception: g = '?'
    return (int(f[11]) + int(f[12])) / 100, s['VmRSS'], g
if os.environ.get('ROLE') == 'hog':
    os.nice(int(os.environ.get('NICE', '0')))
    host, port = env[target].split(':'); stats = {}; lock = threading.Lock(); t0 = time.time()
    base = mcp10.Session(env[target], tok[hog])
    def run():
        c = http.client.HTTPConnection(host, int(port), timeout=60); i = 0
        while time.time() - t0 < secs:
            i += 1
            h = {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream', 'Authorization': 'Bearer ' + tok[hog]}
            if mode in ('init', 'badinit'):
                ci = {'name': 'h' + ('x' * 60000 if mode == 'badinit' else ''), 'version': '0'}
                m = {'jsonrpc': '2.0', 'id': i, 'method': 'initialize', 'params': {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': ci}}
            else:
                h['Mcp-Session-Id'] = base.sid; h['MCP-Protocol-Version'] = '2025-06-18'
                m = {'jsonrpc': '2.0', 'id': i, 'method': {'ping': 'ping', 'list': 'tools/list'}.get(mode)} if mode != 'notif' else {'jsonrpc': '2.0', 'method': 'notifications/initialized'}
            try:
                c.request('POST', '/mcp', json.dumps(m), h); r = c.getresponse(); b = r.read(); k = r.status
                if k == 200 and b'"error"' in b[:300]: k = '200-err'
            except Exception as e:
                k = type(e).__name__; c = http.client.HTTPConnection(host, int(port), timeout=60)
            with lock: stats[k] = stats.get(k, 0) + 1
    ths = [threading.Thread(target=run) for _ in range(T)]; [t.start() for t in ths]; [t.join() for t in ths]
    print('hog', hog, mode, stats); sys.exit()
def bob(secs):
    s = mcp10.Session(env[target], tok['bob']); lat = []; errs = {}; t0 = time.time()
    tool, args = ('route', {'query': 'open a pull request on github'}) if target == 'MCP' else ('search_tools', {'query': 'open a pull request on github'})
    while time.time() - t0 < secs:
        t = time.time()
        try: code, r = s.tool(tool, args); ok = code == 200 and isinstance(r, dict) and 'result' in r and not r['result'].get('isError')
        except Exception as e: code, ok = type(e).__name__, False
        lat.append((time.time() - t) * 1000)
        if not ok:
            errs[code] = errs.get(code, 0) + 1
            if sum(errs.values()) <= 2: print('bob error', code, repr(r)[:200] if code == 200 else '')
        time.sleep(0.02)
    lat.sort(); q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
    return '%d calls p50 %.1f p99 %.1f max %.1f ms errors %s' % (len(lat), q(.5), q(.99), lat[-1], errs)
for phase in ('idle', 'hog'):
    c0, r0, g0 = st()
    p = subprocess.Popen([sys.executable] + sys.argv, env=dict(os.environ, ROLE='hog')) if phase == 'hog' else None
    out = bob(secs)
    if p: p.wait()
    c1, r1, g1 = st()
    print('%-5s bob %s; %s CPU %.1f s in %.0f s, RSS %d -> %d MB, goroutines %s -> %s, load %s' % (phase, out, target, c1 - c0, secs, r0, r1, g0, g1, open('/proc/loadavg').read().split()[0]), flush=True)
