#!/usr/bin/env python3
"""memgrow14b.py DIR N KB [WHO]: WHO (default caller) writes N create_entities of about KB KB each to
its own per-identity memory server through the proxy (call_tool memory/create_entities), then times
one read_graph and prints the answer's size: a caller-made large backend answer with an honest server."""
import os, sys, json, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d, N, KB = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]); who = sys.argv[4] if len(sys.argv) > 4 else 'caller'
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
s = mcp10.Session(env['PROXY'], tok[who], timeout=120)
for i in range(N):
    ents = [{'name': 'e%d_%d' % (i, j), 'entityType': 't', 'observations': ['o' * 1000]} for j in range(KB)]
    st, r = s.tool('call_tool', {'server': 'memory', 'tool': 'create_entities', 'arguments': {'entities': ents}})
    if i == 0 or st != 200 or (isinstance(r, dict) and r.get('result', {}).get('isError')): print(i, st, repr(r)[:200])
t = time.time(); st, r = s.tool('call_tool', {'server': 'memory', 'tool': 'read_graph', 'arguments': {}})
print('read_graph', st, '%.2f s' % (time.time() - t), len(json.dumps(r)), repr(r)[:200])
