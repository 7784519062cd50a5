#!/usr/bin/env python3
"""burn30.py SECS FRACTION (thirtieth pass): a CPU burner of FRACTION of one core (busy that share of each 10 ms)
for SECS, to run under nice -n 10 beside bob's victim in place of an attacker of the same CPU: how much of the
victim's slowdown is the attacker's own CPU on the same cores. Prints the CPU it used."""
import sys, time, os
secs, frac = float(sys.argv[1]), float(sys.argv[2]); end = time.time() + secs
while time.time() < end:
    t = time.time(); b = t + 0.01 * frac
    while time.time() < b: pass
    time.sleep(max(0, 0.01 * (1 - frac)))
u = os.times(); print('burn30: %.2f s CPU in %.0f s' % (u.user + u.system, secs))
