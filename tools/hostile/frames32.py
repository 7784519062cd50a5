#!/usr/bin/env python3
"""frames32.py DIR MODE CONNS SECS [SIZE] (thirty-second pass): raw HTTP/2 frames the daemon reads and no call
does, on DIR/env's GRPC listener (TLS when DIR/env has CERT=), CONNS connections (one thread each), reconnecting
when closed, for SECS s. After the preface and an empty SETTINGS, each connection writes prebuilt batches of
frames of SIZE payload bytes (default 16384): MODE 'unknown' (type 0xfa on stream 0), 'unknown1' (type 0xfa on
stream 1, never opened), 'goaway' (GOAWAY with SIZE-8 bytes of debug data, again and again), 'settings' (SETTINGS
of SIZE/6 entries of an unknown identifier, each owed an ACK), 'settingsw' (SETTINGS_INITIAL_WINDOW_SIZE toggled,
SIZE/6 entries), 'ping' (PING, SIZE ignored), 'priority' (PRIORITY frames on fresh stream ids), 'wupd' (WINDOW_UPDATE
of 1 on stream 0). Prints bytes and frames written, connections made and closed by the daemon, the client's and
the daemon's CPU, the daemon's RSS, and the unread-DATA and penalty metrics before and after."""
import os, sys, ssl, socket, time, threading, struct, resource, urllib.request
d, mode, nc, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
size = int(sys.argv[5]) if len(sys.argv) > 5 else 16384
env = dict(l.strip().split('=', 1) for l in open(d + '/env') if '=' in l)
pid = env['PID']; host, port = env['GRPC'].split(':')
def cpu(): f = open('/proc/%s/stat' % pid).read().split(); return (int(f[13]) + int(f[14])) / os.sysconf('SC_CLK_TCK')
def rss(): return int([l for l in open('/proc/%s/status' % pid) if l.startswith('VmRSS')][0].split()[1]) // 1024
def met():
    m = urllib.request.urlopen('http://%s/metrics' % env['METRICS']).read().decode().splitlines()
    keep = ('classifierd_grpc_unread_data_bytes_total', 'classifierd_grpc_reset_penalties_total', 'classifierd_grpc_unread_data_held_reads_total', 'classifierd_grpc_early_reset_closes_total', 'classifierd_grpc_penalized',
            'classifierd_grpc_cheap_frames', 'classifierd_grpc_early')
    return ' '.join(l for l in m if l.startswith(keep))
def fr(t, fl, sid, p): return struct.pack('>I', len(p))[1:] + bytes([t, fl]) + struct.pack('>I', sid) + p
pre = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' + fr(4, 0, 0, b'')
n = max(1, size // 6)
if mode == 'unknown': one = fr(0xfa, 0, 0, os.urandom(size))
elif mode == 'unknown1': one = fr(0xfa, 0, 1, os.urandom(size))
elif mode == 'goaway': one = fr(7, 0, 0, struct.pack('>II', 0, 0) + os.urandom(size - 8))
elif mode == 'settings': one = fr(4, 0, 0, b''.join(struct.pack('>HI', 0x7f00 + i % 200, i) for i in range(n)))
elif mode == 'settingsw': one = fr(4, 0, 0, b''.join(struct.pack('>HI', 4, 65535 + (i & 1)) for i in range(n)))
elif mode == 'ping': one = fr(6, 0, 0, b'12345678')
elif mode == 'wupd': one = fr(8, 0, 0, struct.pack('>I', 1))
elif mode != 'priority': sys.exit('mode?')
batch = (one * max(1, 65536 // len(one))) if mode != 'priority' else None
stats = {'bytes': 0, 'frames': 0, 'conns': 0, 'closed': 0, 'errors': {}}
lock = threading.Lock(); stop = time.time() + secs
def run():
    while time.time() < stop:
        try:
            s = socket.create_connection((host, int(port)), timeout=5)
            if 'CERT' in env:
                cx = ssl.create_default_context(); cx.check_hostname = False; cx.verify_mode = ssl.CERT_NONE
                cx.set_alpn_protocols(['h2']); s = cx.wrap_socket(s, server_hostname=host)
            s.sendall(pre)
            with lock: stats['conns'] += 1
            sid = 1
            def drain():
                try:
                    while s.recv(1 << 16): pass
                except OSError: pass
            threading.Thread(target=drain, daemon=True).start()
            while time.time() < stop:
                if mode == 'priority':
                    b = b''.join(fr(2, 0, sid + 2 * i, struct.pack('>IB', 0, 15)) for i in range(4096)); sid += 8192
                    k = 4096
                else:
                    b = batch; k = len(batch) // len(one)
                s.sendall(b)
                with lock: stats['bytes'] += len(b); stats['frames'] += k
            s.close()
        except OSError as e:
            with lock:
                stats['closed'] += 1; k = type(e).__name__; stats['errors'][k] = stats['errors'].get(k, 0) + 1
            time.sleep(0.01)
print('before: %s; RSS %d MB, load %s' % (met(), rss(), open('/proc/loadavg').read().split()[0]), flush=True)
c0 = cpu(); r0 = resource.getrusage(resource.RUSAGE_SELF); t0 = time.time()
ths = [threading.Thread(target=run) for _ in range(nc)]
for t in ths: t.start()
for t in ths: t.join()
r1 = resource.getrusage(resource.RUSAGE_SELF); dc = cpu() - c0; cc = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
print('%s x%d %d B frames: %d MB, %d frames in %.1f s; %d connections, %d closed %s; client CPU %.2f s, daemon %.2f s (%.2fx); RSS %d MB, load %s' % (
    mode, nc, size, stats['bytes'] >> 20, stats['frames'], time.time() - t0, stats['conns'], stats['closed'], stats['errors'], cc, dc, dc / max(cc, 0.01),
    rss(), open('/proc/loadavg').read().split()[0]), flush=True)
print('after: %s' % met(), flush=True)
