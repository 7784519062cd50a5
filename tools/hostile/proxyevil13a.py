#!/usr/bin/env python3
"""proxyevil13a.py DIR: what a caller (ops) sees through the proxy while the hostile backend
evilmcp13a.py serves its mode: tools/list (names and size), search_tools for a GitHub request and
for "pong", call_tool on the memory server and on evil/echo, each with its latency; and the proxy's
RSS and CPU."""
import os, sys, json, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d = sys.argv[1]
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PROXY_PID']
def st():
    f = open(f'/proc/{pid}/stat').read().split()
    return 'proxy RSS %d MB CPU %.1fs load %s' % (int([l for l in open(f'/proc/{pid}/status') if l.startswith('VmRSS')][0].split()[1]) // 1024,
                                                  (int(f[13]) + int(f[14])) / 100, open('/proc/loadavg').read().split()[0])
def short(r):
    try:
        res = r['result']
        if 'tools' in res: return '%d tools %r' % (len(res['tools']), [t['name'][:40] for t in res['tools']][:8])
        txt = res['content'][0]['text']
        try:
            j = json.loads(txt); return ('isError ' if res.get('isError') else '') + repr([(t.get('exposed_name', '')[:50], round(t.get('confidence', 0), 2)) for t in j.get('tools', [])][:5])
        except Exception: return ('isError ' if res.get('isError') else '') + txt[:150]
    except Exception: return repr(r)[:200]
s = mcp10.Session(env['PROXY'], tok['ops'], timeout=120)
for name, f in [('tools/list', lambda: s.call('tools/list')), ('search github', lambda: s.tool('search_tools', {'query': 'open a pull request on github'})),
                ('search pong', lambda: s.tool('search_tools', {'query': 'answers pong'})),
                ('memory read_graph', lambda: s.tool('call_tool', {'server': 'memory', 'tool': 'read_graph', 'arguments': {}})),
                ('evil echo', lambda: s.tool('call_tool', {'server': 'evil', 'tool': 'echo', 'arguments': {'q': 'hi'}}))]:
    t = time.time()
    try: code, r = f(); print('%-18s %s %.2fs %s' % (name, code, time.time() - t, short(r)), flush=True)
    except Exception as e: print('%-18s %.2fs %r' % (name, time.time() - t, e), flush=True)
print(st())
