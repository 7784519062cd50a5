# hxstream20.py DIR R N S (twentieth pass): httpx over HTTP/2 (pip install "httpx[http2]"), one client (one connection): R Route requests each with a body streamed in N chunks of S bytes
import sys, json, httpx
env = dict(l.strip().split('=', 1) for l in open(sys.argv[1] + '/env') if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(sys.argv[1] + '/tokens')}
base = 'https://' + env['HTTP']; R, N, S = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
c = httpx.Client(http2=True, verify=False, timeout=30)
H = {'Authorization': 'Bearer ' + tok['alice'], 'Content-Type': 'application/json'}
b = json.dumps({'query': ('open a pull request on github ' * (N * S // 30 + 1))[:N * S - 13]}).encode()
ok = 0
for i in range(R):
    def gen():
        for k in range(N):
            yield b[k * S:(k + 1) * S] if k < N - 1 else b[k * S:]
    try:
        r = c.post(base + '/classifier.v1.ClassifierService/Route', content=gen(), headers=H)
        if r.status_code == 200: ok += 1
        else: print('req', i, r.status_code, r.text[:100]); 
    except Exception as e:
        print('req', i, 'ERROR', type(e).__name__, str(e)[:100]); break
print('%d x (%d chunks of %d bytes, %d body bytes): %d answered 200' % (R, N, S, len(b), ok))
