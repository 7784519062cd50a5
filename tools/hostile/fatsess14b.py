#!/usr/bin/env python3
"""fatsess14b.py DIR S [WHO...]: each WHO (default caller) opens S sessions on the proxy, each calls
hub__analyze_prompt for a GitHub request (exposing the categories that match, such as evilmcp14b.py's
"fat" tools) and tools/list (size read); the sessions are left open. Prints the proxy's RSS, CPU and
goroutines every 10 sessions, and what each tools/list answered."""
import os, sys, json, time, urllib.request
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, S = sys.argv[1], int(sys.argv[2]); whos = sys.argv[3:] or ['caller']
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
pid = env['PROXY_PID']; met = env['PROXY_METRICS']
def st():
    s = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open(f'/proc/{pid}/status') if l.startswith(('VmRSS', 'VmHWM'))}
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    try: g = [l.split()[1] for l in urllib.request.urlopen(f'http://{met}/metrics', timeout=5).read().decode().splitlines() if l.startswith('go_goroutines ')][0]
    except Exception: g = '?'
    return 'RSS %d MB (peak %d) cpu %.1fs goroutines %s load %s' % (s['VmRSS'], s['VmHWM'], (int(f[11]) + int(f[12])) / 100, g, open('/proc/loadavg').read().split()[0])
print('before', st(), flush=True); keep = []; t0 = time.time()
for i in range(S):
    for who in whos:
        try:
            s = mcp10.Session(env['PROXY'], tok[who], timeout=120)
            if not s.sid: print('no session', who, s.init); continue
            st1, r1 = s.tool('hub__analyze_prompt', {'prompt': 'open a pull request on github and merge it'})
            st2, r2, _ = s.post({'jsonrpc': '2.0', 'id': 99, 'method': 'tools/list'})
            n = len(r2['result']['tools']) if isinstance(r2, dict) and 'result' in r2 else repr(r2)[:150]
            keep.append(s)
            if i == 0: print(who, 'analyze', st1, repr(r1)[:150], 'list', st2, n, len(json.dumps(r2)), 'bytes', flush=True)
        except Exception as e:
            print('err', who, e)
    if (i + 1) % 10 == 0: print('%d sessions each, %.0fs' % (i + 1, time.time() - t0), st(), flush=True)
time.sleep(5); print('held 5s', st())
