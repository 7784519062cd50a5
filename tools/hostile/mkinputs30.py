#!/usr/bin/env python3
"""mkinputs30.py OUTDIR (thirtieth pass): small request bodies, each at most 1 KiB (httpguard.SmallBody, so
never refused for the rates of body bytes on the HTTP listeners since 7f55651), built to weigh the most.
s_empty.bin: a gRPC envelope (5 bytes) of a GetSessionRequest of field 1 (session_id) sent empty 509 times
(`0a 00`, 1,023 bytes in all): 509 known values, 8 KiB more to the rates (ValueCost 16 each), NOT_FOUND.
s_info0.bin: GetIndexInfo's empty envelope (5 bytes). s_vals.json: a JSON GetSession body whose unknown-free
object holds a 1,000-byte session id (one value). s_mcpvals.json: an MCP tools/call of `route` whose arguments
hold "x": 458 zeros (1,020 bytes, 458 values: 29 KiB more at MCPValueCost 64)."""
import json, os, struct, sys
o = sys.argv[1]
def env(pb): return b'\x00' + struct.pack('>I', len(pb)) + pb
open(os.path.join(o, 's_empty.bin'), 'wb').write(env(b'\x0a\x00' * 509))
open(os.path.join(o, 's_info0.bin'), 'wb').write(env(b''))
open(os.path.join(o, 's_vals.json'), 'w').write(json.dumps({'sessionId': 'a' * 1000}))
m = {'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call', 'params': {'name': 'route', 'arguments': {'query': 'q', 'x': [0] * 458}}}
open(os.path.join(o, 's_mcpvals.json'), 'w').write(json.dumps(m, separators=(',', ':')))
for f in sorted(os.listdir(o)):
    if f.startswith('s_'): print(f, os.path.getsize(os.path.join(o, f)))
