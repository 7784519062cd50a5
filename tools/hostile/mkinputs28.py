#!/usr/bin/env python3
"""mkinputs28.py OUTDIR (twenty-eighth pass): the pass's request bodies.
gpempty48.bin / gpempty64.bin: a gRPC envelope whose GetSessionRequest is the known field 1 (session_id) sent
empty 24,573 / 32,765 times (`0a 00` repeated, 48 / 64 KiB): every value known to the type, under MaxValues;
decoded, it re-encodes to 0 bytes (proto3's empty string is not written), which is what --listen charges.
gpwgrp48.bin: the same with `0b 0c` (field 1 as an empty group: a known number with the wrong wire type, which
protobuf-go keeps as an unknown field and countProto does not count as one).
ping_params.json: an MCP ping whose params (not _meta) hold "x": 32,700 zeros. init_exp.json: an MCP initialize
whose capabilities.experimental holds the same."""
import json, os, struct, sys
o = sys.argv[1]
def env(pb): return b'\x00' + struct.pack('>I', len(pb)) + pb
for name, unit, n in [('gpempty48.bin', b'\x0a\x00', 24573), ('gpempty64.bin', b'\x0a\x00', 32765), ('gpwgrp48.bin', b'\x0b\x0c', 24573)]:
    open(os.path.join(o, name), 'wb').write(env(unit * n))
v = [0] * 32700
for name, b in [('ping_params.json', {'jsonrpc': '2.0', 'id': 1, 'method': 'ping', 'params': {'x': v}}),
                ('init_exp.json', {'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {'protocolVersion': '2025-06-18',
                    'capabilities': {'experimental': {'x': v}}, 'clientInfo': {'name': 'a', 'version': '1'}}})]:
    open(os.path.join(o, name), 'w').write(json.dumps(b, separators=(',', ':')))
