#!/usr/bin/env python3
"""evilcall14b.py DIR [WHO]: one call_tool evil/echo through the proxy (with a progressToken),
printing status, time, the answer's size and head (what the proxy passed back from evilmcp14b.py)."""
import os, sys, json, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'amp10a')); import mcp10
d = sys.argv[1]; who = sys.argv[2] if len(sys.argv) > 2 else 'caller'
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
s = mcp10.Session(env['PROXY'], tok[who], timeout=120); t = time.time()
st, r, _ = s.post({'jsonrpc': '2.0', 'id': 7, 'method': 'tools/call', 'params': {'_meta': {'progressToken': 'pt1'}, 'name': 'call_tool', 'arguments': {'server': 'evil', 'tool': os.environ.get('TOOL', 'echo'), 'arguments': {}}}})
print(st, '%.2f s' % (time.time() - t), 'messages' if isinstance(r, list) else '', len(r) if isinstance(r, list) else '', len(json.dumps(r)), json.dumps(r if not isinstance(r, list) else r[-1])[:700])
