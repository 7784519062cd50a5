"""Shared helpers of the third hostile pass: env and tokens of var/h3,
Connect-JSON calls over --http-listen, the daemon's RSS and CPU."""
import json, os, time, urllib.request
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
d = os.environ.get("DIR", os.path.join(root, "var/h3"))
env = dict(l.strip().split("=", 1) for l in open(os.path.join(d, "env")))
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, "tokens"))}
def call(svc_method, body, who="alice", raw=None, headers=None, timeout=60, base=None):
    """POST svc_method (e.g. classifier.v1.ClassifierService/Route) as who; returns (status, parsed or text)."""
    h = {"Content-Type": "application/json"}
    if who:
        h["Authorization"] = "Bearer " + tok[who]
    h.update(headers or {})
    data = raw if raw is not None else json.dumps(body).encode()
    url = f"http://{base or env['HTTP']}/{svc_method}"
    req = urllib.request.Request(url, data, h)
    try:
        r = urllib.request.urlopen(req, timeout=timeout)
        txt = r.read()
        st = r.status
    except urllib.error.HTTPError as e:
        txt, st = e.read(), e.code
    except (urllib.error.URLError, ConnectionError) as e:
        return "reset", str(e)
    try:
        return st, json.loads(txt)
    except Exception:
        return st, txt.decode(errors="replace")
def c(m, body, who="alice", **kw):
    return call("classifier.v1.ClassifierService/" + m, body, who, **kw)
def t(m, body, who="alice", **kw):
    return call("terminal.v1.TerminalService/" + m, body, who, **kw)
def proc(pid=None):
    pid = pid or env["PID"]
    s = open(f"/proc/{pid}/status").read()
    g = lambda k: int(s.split(k + ":")[1].split()[0]) // 1024
    st = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    cpu = (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
    return {"rss": g("VmRSS"), "hwm": g("VmHWM"), "cpu": cpu, "threads": int(s.split("Threads:")[1].split()[0]),
            "load": open("/proc/loadavg").read().split()[0]}
