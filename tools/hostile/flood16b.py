#!/usr/bin/env python3
"""flood16b.py DIR WHO VARIANT T SECS: bob's small calls (search_tools, and call_tool of everything's
echo) on the proxy, SECS s idle, then SECS s while WHO (a process of its own at nice 10) keeps T
threads posting VARIANT, prebuilt once and sent raw on kept-alive connections (answers read, not
parsed): big (call_tool evil/echo, 3.5 MB string argument), many (call_tool evil/echo, 60,000 small
values), deep (call_tool evil/echo, arguments nested 9,000 deep), wide (call_tool evil/echo, 60,000
keys), search (search_tools, 240 KB query of distinct words, under the 256 KiB limit), analyze
(hub__analyze_prompt, 240 KB prompt), hbig (call_tool everything/echo, an honest server, 3.5 MB message), small (search_tools of a short query, a flood of small calls), echo (call_tool
everything/echo "hi"), swide (search_tools with 60,000 keys besides its query: scope route), evil (call_tool evil/echo, small: the backend's mode decides), evilpi (the same on
the caller's own evilpi). Prints bob's p50/p99/max and errors per phase, the proxy's CPU and RSS, the
flooder's own CPU and statuses, the load."""
import os, sys, json, time, threading, subprocess, http.client, resource, random
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, who, variant, T, secs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PROXY_PID']
def st():
    s = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith(('VmRSS', 'VmHWM'))}
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / 100, s['VmRSS'], s['VmHWM']
def body(variant, i):
    ct = lambda a: {'name': 'call_tool', 'arguments': {'server': 'evil', 'tool': 'echo', 'arguments': a}}
    r = random.Random(i)
    p = {'big': lambda: ct({'q': 'a' * (3500 << 10)}),
         'hbig': lambda: {'name': 'call_tool', 'arguments': {'server': 'everything', 'tool': 'echo', 'arguments': {'message': 'a' * (3500 << 10)}}},
         'evil': lambda: ct({'q': 'hi'}),
         'evilpi': lambda: {'name': 'call_tool', 'arguments': {'server': 'evilpi', 'tool': 'echo', 'arguments': {'q': 'hi'}}},
         'swide': lambda: {'name': 'search_tools', 'arguments': dict({'query': 'open a pull request'}, **{'k%d' % j: 1 for j in range(60000)})},
         'many': lambda: ct({'q': [1] * 60000}),
         'deep': lambda: '@DEEP@',
         'wide': lambda: ct({'k%d' % j: 1 for j in range(60000)}),
         'search': lambda: {'name': 'search_tools', 'arguments': {'query': ' '.join('w%x' % r.getrandbits(40) for _ in range(19000))}},
         'analyze': lambda: {'name': 'hub__analyze_prompt', 'arguments': {'prompt': ' '.join('w%x' % r.getrandbits(40) for _ in range(19000))}},
         'small': lambda: {'name': 'search_tools', 'arguments': {'query': 'open a pull request on github'}},
         'echo': lambda: {'name': 'call_tool', 'arguments': {'server': 'everything', 'tool': 'echo', 'arguments': {'message': 'hi'}}}}[variant]()
    m = json.dumps({'jsonrpc': '2.0', 'id': i, 'method': 'tools/call', 'params': p})
    if p == '@DEEP@':
        n = 9000
        m = m.replace('"@DEEP@"', '{"name":"call_tool","arguments":{"server":"evil","tool":"echo","arguments":{"q":' + '[' * n + '1' + ']' * n + '}}}')
    return m.encode()
if os.environ.get('ROLE') == 'hog':
    os.nice(10)
    host, port = env['PROXY'].split(':'); s = mcp10.Session(env['PROXY'], tok[who])
    one = body(variant, 0); bodies = [one.replace(b'"id": 0,', b'"id": %d,' % (k + 1), 1) for k in range(T)]  # one id per thread: one call each in flight
    stats = {}; lock = threading.Lock(); t0 = time.time(); sizes = [0]
    def run(k):
        c = http.client.HTTPConnection(host, int(port), timeout=60); j = 0
        while time.time() - t0 < secs:
            j += 1
            try:
                c.request('POST', '/mcp', bodies[k], s.h); r = c.getresponse(); b = r.read(); code = r.status
                if code == 200 and b'"isError":true' in b: code = '200-isError:' + b.split(b'"text":"', 1)[-1][:40].decode('utf-8', 'replace')
                elif code == 200 and b'"error"' in b[:400]: code = '200-err:' + b[:200].decode('utf-8', 'replace')[-80:]
                sizes[0] = max(sizes[0], len(b))
            except Exception as e:
                code = type(e).__name__; c = http.client.HTTPConnection(host, int(port), timeout=60)
            with lock: stats[code] = stats.get(code, 0) + 1
    ths = [threading.Thread(target=run, args=(k,)) for k in range(T)]; [t.start() for t in ths]; [t.join() for t in ths]
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print('  flooder %s %s: %s; largest answer %d bytes; its CPU %.1f s (body %d bytes)' % (who, variant, stats, sizes[0], ru.ru_utime + ru.ru_stime, len(bodies[0])), flush=True)
    sys.exit()
def bob(secs):
    s = mcp10.Session(env['PROXY'], tok['bob']); lat = {'search': [], 'echo': []}; errs = {}; t0 = time.time()
    calls = [('search', 'search_tools', {'query': 'open a pull request on github'}),
             ('echo', 'call_tool', {'server': 'everything', 'tool': 'echo', 'arguments': {'message': 'hi'}})]
    i = 0
    while time.time() - t0 < secs:
        k, tool, args = calls[i % 2]; i += 1; t = time.time()
        try: code, r = s.tool(tool, args); ok = code == 200 and isinstance(r, dict) and 'result' in r and not r['result'].get('isError')
        except Exception as e: code, r, ok = type(e).__name__, None, False
        lat[k].append((time.time() - t) * 1000)
        if not ok:
            errs[k] = errs.get(k, 0) + 1
            if sum(errs.values()) <= 2: print('  bob error', k, code, repr(r)[:200])
        time.sleep(0.02)
    out = []
    for k, l in lat.items():
        l.sort(); q = lambda p: l[min(len(l) - 1, int(p * len(l)))]
        out.append('%s %d p50 %.1f p99 %.1f max %.0f' % (k, len(l), q(.5), q(.99), l[-1]))
    return '; '.join(out) + ' ms; errors %s' % errs
for phase in ('idle', 'flood'):
    c0, r0, _ = st(); l0 = open('/proc/loadavg').read().split()[0]
    p = subprocess.Popen([sys.executable] + sys.argv, env=dict(os.environ, ROLE='hog')) if phase == 'flood' else None
    if p: time.sleep(1 if variant in ('search', 'analyze') else 0.3)
    out = bob(secs)
    if p: p.wait()
    c1, r1, hwm = st()
    print('%-5s bob %s\n      proxy CPU %.1f s in %.0f s, RSS %d -> %d MB (peak %d), load %s -> %s' % (phase, out, c1 - c0, secs, r0, r1, hwm, l0, open('/proc/loadavg').read().split()[0]), flush=True)
