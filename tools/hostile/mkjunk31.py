#!/usr/bin/env python3
"""mkjunk31.py OUTDIR (thirty-first pass): bodies for h2ctl20 -bodyfile on --listen whose DATA 77b5074 does not
count as unread: an empty GetIndexInfo message (5-byte envelope, read and answered by the call) followed by a
second envelope of random bytes, which grpc-go's unary cardinality check reads and decodes before failing the call
INTERNAL (the interceptors never see it), the whole under the stream's 64 KiB window:
  junk48.bin   49,152 bytes (send as -frame 1024 -per 48 or -frame 16384 -per 3)
  junk56.bin   57,344 bytes (-frame 1024 -per 56)
  junk63.bin   64,512 bytes (-frame 1024 -per 63; the pass's copy, whose second message began with a 10 KiB unknown field, grew the heap ~12 KB a call: finding 2)
  junk63f.bin  64,512 bytes (-frame 4032 -per 16)
Further arguments N: junk_N.bin of N bytes as well (61440, 63488, 65535 in the pass). Also two0.bin: two empty
messages (10 bytes, -frame 10 -per 1), which grpc-go fails 'cardinality violation' after decoding both."""
import os, sys, struct
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
sizes = [('junk48', 49152), ('junk56', 57344), ('junk63', 64512), ('junk63f', 64512)]
sizes += [('junk_%s' % a, int(a)) for a in sys.argv[2:]]
for name, n in sizes:
    j = os.urandom(n - 10)
    open(os.path.join(d, name + '.bin'), 'wb').write(b'\x00' + struct.pack('>I', 0) + b'\x00' + struct.pack('>I', len(j)) + j)
open(os.path.join(d, 'two0.bin'), 'wb').write(b'\x00' * 10)
