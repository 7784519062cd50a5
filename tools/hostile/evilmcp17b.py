#!/usr/bin/env python3
"""evilmcp17b.py MODEFILE [ARG]: a hostile stdio MCP server for the seventeenth pass (B): listings just
under the proxy's bounds (mcpsrc.MaxListBytes 16 MiB, MaxTools 5000), then ways to be listed again
soon. Its mode is the first line of MODEFILE, read at each start and listing:
  normal                   one tool
  fatflood PAGES KB MS     tools/list in PAGES pages, each one tool of a KB KB inputSchema (the same
                           each time), and a notifications/tools/list_changed every MS ms once initialized
  fatdie PAGES KB          the same listing; the process exits 0.3 s after the last page is served
  fatstall PAGES KB        the same pages, but the last is never answered (the listing times out)
  over PAGES KB            the same pages and one more (breaks the 16 MiB bound when PAGES*KB is near it)
Each start appends a line to MODEFILE.starts; each page served one to MODEFILE.log."""
import json, os, sys, threading, time

MODEFILE = sys.argv[1]
LOG = open(MODEFILE + '.log', 'a', buffering=1)
wlock = threading.Lock()
with open(MODEFILE + '.starts', 'a') as f:
    f.write('%.3f %d %s\n' % (time.time(), os.getpid(), ' '.join(sys.argv[2:])))


def mode():
    try:
        return open(MODEFILE).read().split('\n')[0].split()
    except OSError:
        return ['normal']


def send(raw):
    with wlock:
        sys.stdout.write(raw + '\n')
        sys.stdout.flush()


FAT = {}


def page(k, kb):
    if kb not in FAT:
        FAT[kb] = json.dumps({'type': 'object', 'properties': {'p%d' % j: {'type': 'string', 'description': 'x' * 1000} for j in range(kb)}})
    return '{"tools":[{"name":"fat%d","description":"a fat tool","inputSchema":%s}]%s}' % (k, FAT[kb], '%s')


def flooder(ms):
    while True:
        time.sleep(ms / 1000)
        send('{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}')


flooding = False
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except Exception:
        continue
    meth, mid = msg.get('method'), msg.get('id')
    if meth == 'initialize':
        send(json.dumps({'jsonrpc': '2.0', 'id': mid, 'result': {'protocolVersion': msg['params'].get('protocolVersion', '2025-06-18'),
                         'capabilities': {'tools': {'listChanged': True}}, 'serverInfo': {'name': 'evil17', 'version': '1'}}}))
    elif meth == 'notifications/initialized':
        m = mode()
        if m[0] == 'fatflood' and not flooding:
            flooding = True
            threading.Thread(target=flooder, args=(int(m[3]),), daemon=True).start()
    elif meth == 'tools/list':
        m = mode()
        if m[0] == 'normal':
            send(json.dumps({'jsonrpc': '2.0', 'id': mid, 'result': {'tools': [{'name': 'ping17', 'description': 'pong', 'inputSchema': {'type': 'object'}}]}}))
            continue
        pages, kb = int(m[1]), int(m[2])
        if m[0] == 'over':
            pages += 1
        k = int((msg.get('params') or {}).get('cursor') or 0)
        LOG.write('%.3f page %d\n' % (time.time(), k))
        last = k == pages - 1
        if last and m[0] == 'fatstall':
            continue
        nxt = '' if last else ',"nextCursor":"%d"' % (k + 1)
        send('{"jsonrpc":"2.0","id":%s,"result":%s}' % (json.dumps(mid), page(k, kb) % nxt))
        if last and m[0] == 'fatdie':
            time.sleep(0.3)
            os._exit(0)
    elif meth == 'tools/call':
        send(json.dumps({'jsonrpc': '2.0', 'id': mid, 'result': {'content': [{'type': 'text', 'text': 'pong'}]}}))
    elif meth == 'ping':
        send(json.dumps({'jsonrpc': '2.0', 'id': mid, 'result': {}}))
    elif mid is not None:
        send(json.dumps({'jsonrpc': '2.0', 'id': mid, 'error': {'code': -32601, 'message': 'no'}}))
