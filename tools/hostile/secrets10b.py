#!/usr/bin/env python3
"""secrets10b.py: the tenth pass's (B) secret shapes through a running
start10b.sh daemon (reads var/h10b/env and tokens): answers that are short
numbers or match a shown default or option under a secret prompt (PINs,
one-time codes, CVV), and command lines with credentials in new places
(URLs, libpq strings, -e VAR=, --from-literal, user%pass...). Each value is
written by alice with TrackInputEvent into its own session; then it says
which values come back in clear from GetSessionHistory, are suggested by
InferExpectedInput (alice and bob), or appear in terminal.db, its -wal and
the daemon log."""
import json, os, sys, urllib.request, uuid, glob
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
D = os.environ.get("DIR", os.path.join(ROOT, "var/h10b"))
env = dict(l.strip().split("=", 1) for l in open(os.path.join(D, "env")) if "=" in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(D, "tokens")) if l.strip() and not l.startswith("#")}

def t(method, body, who="alice"):
    req = urllib.request.Request(f"http://{env['HTTP']}/terminal.v1.TerminalService/{method}", json.dumps(body).encode(),
        {"Content-Type": "application/json", "Connect-Protocol-Version": "1", "Authorization": "Bearer " + tok[who]})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()[:200]

R = uuid.uuid4().hex[:6]
# (prompt, answer, secret value to look for)
P = [
    ("Enter PIN: ", "7391", "7391"),
    ("PIN for card ending 4242: ", "8264", "8264"),
    ("Verification code: ", "482913", "482913"),
    ("Enter the 6-digit code from your authenticator app: ", "615204", "615204"),
    ("CVV: ", "913", "913"),
    ("CVC/CVV2 (3 digits): ", "527", "527"),
    ("Security code: ", "4096", "4096"),
    ("SIM PIN: ", "1928", "1928"),
    ("Enter passcode: ", "55123", "55123"),
    ("Password [Sunflower42]: ", "Sunflower42", "Sunflower42"),
    ("New password (default: Winter2026!): ", "Winter2026!", "Winter2026!"),
    ("Password? (yes/no) ", "yes", None),
    ("Passphrase [alpha/bravo7x]: ", "bravo7x", "bravo7x"),
    ("Enter password (or 'skip'): ", "skip", None),
    ("Unlock code [1-999999]: ", "284133", "284133"),
    ("Port [5432]: ", "5432", None),
    ("2FA token: ", "039112", "039112"),
    ("Enter one-time password: ", "881204", "881204"),
    ("Passwort: ", "12345678", "12345678"),
    ("Geheimzahl: ", "4711", "4711"),
    ("Kode OTP: ", "772019", "772019"),
    ("Codice di sicurezza: ", "3391", "3391"),
    ("請輸入驗證碼: ", "556677", "556677"),
    ("Recovery PIN (4 digits): ", "0420", "0420"),
    ("Username: ", "hunter2:Xy9!pass", "Xy9!pass"),
    ("Email: ", "bob@example.com:Pa55w0rd!", "Pa55w0rd!"),
    ("Username (user:password): ", "root:toor1234", "toor1234"),
]
SH = "alice@box:~$ "
C = [
    "git clone https://alice:ghp_R4nd0mT0kenV4lue1234567890abcd@github.com/acme/x.git",
    "git remote add origin https://oauth2:glpat-AbCdEf1234567890xyz@gitlab.com/a/b.git",
    "psql 'host=db.internal user=app password=S3cr3tPg! dbname=prod'",
    "psql postgresql://app:Pg9SecretVal@db:5432/prod",
    "mongosh 'mongodb+srv://admin:M0ng0Pass77@cluster0.x.mongodb.net/db'",
    "redis-cli -u redis://default:R3disPwd99@cache:6379",
    "docker run -e POSTGRES_PASSWORD=DockPw123 postgres",
    "kubectl create secret generic db --from-literal=password=KubeS3cret9",
    "smbclient //fs/share -U alice%SmbPass321",
    "xfreerdp /u:admin /p:RdpPass4567 /v:10.0.0.5",
    "sqlcmd -S db -U sa -P SqlSaPass1!",
    "ldapsearch -x -D cn=admin -w LdapPw8877 -b dc=x",
    "mount -t cifs //fs/s /mnt -o username=alice,password=CifsPw2468",
    "htpasswd -b .htpasswd alice HtPass1357",
    "openssl pkcs12 -export -passout pass:P12PassOut9 -in a.pem -out a.p12",
    "gpg --batch --passphrase GpgPhr4se55 -c secret.txt",
    "7z a -pSevenZip999 backup.7z dir",
    "aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "vault login s.Xy7Zq9Wv2Lm4Np8Rt6Ks3Jd1",
    "wget --user=alice --password=WgetPw7531 https://x/y",
    "az login -u alice@x.com -p AzPass2468!",
    "usermod -p '$6$salt$hashhashhash' bob",
    "echo 'bob:ChpassPw11' | chpasswd",
    "ansible-playbook site.yml -e ansible_become_password=AnsBecome42",
    "curl -H 'X-Api-Key: xk_live_51HmYApiKeyValue77' https://api/x",
    "curl 'https://api.example.com/v1?token=QueryTok3n998877'",
    "export OPENAI_API_KEY=sk-proj-AbCdEfGhIjKlMnOpQrSt1234",
    "HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWx python run.py",
    "npm config set //registry.npmjs.org/:_authToken npm_AbCdEfGhIj0123456789",
    "docker login -u alice --password DockLogin66 registry.x",
    "heroku config:set SECRET_KEY_BASE=HerokuSkb4455",
    "java -Djavax.net.ssl.keyStorePassword=JksPw3344 -jar a.jar",
    "mysql --user=root --password=MyCnfPw2020",
    "rclone config create s3 s3 secret_access_key RcloneSak77",
]
sess = {}
for i, (p, a, v) in enumerate(P):
    s = f"p{i}-{R}"; sess[s] = v
    t("TrackInputEvent", {"sessionId": s, "promptText": p, "inputText": a, "success": True, "inputSource": "user_typed"})
for i, c in enumerate(C):
    s = f"c{i}-{R}"
    sess[s] = None
    st, r = t("TrackInputEvent", {"sessionId": s, "promptText": SH, "inputText": c, "success": True, "inputSource": "user_typed"})
# which secret values come back
import re
def secret_of_cmd(c):
    m = re.findall(r"(?:[:=/% ]|pass:|-p|-w |-P )([A-Za-z0-9_\-!$/.]{7,})", c)
    return None
kept = []
for i, (p, a, v) in enumerate(P):
    if v is None:
        continue
    s = f"p{i}-{R}"
    st, h = t("GetSessionHistory", {"sessionId": s, "limit": 10})
    if v in json.dumps(h, ensure_ascii=False):
        kept.append(("prompt", p, v))
CV = ["ghp_R4nd0mT0kenV4lue1234567890abcd", "glpat-AbCdEf1234567890xyz", "S3cr3tPg!", "Pg9SecretVal", "M0ng0Pass77", "R3disPwd99", "DockPw123",
      "KubeS3cret9", "SmbPass321", "RdpPass4567", "SqlSaPass1!", "LdapPw8877", "CifsPw2468", "HtPass1357", "P12PassOut9", "GpgPhr4se55", "SevenZip999",
      "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "s.Xy7Zq9Wv2Lm4Np8Rt6Ks3Jd1", "WgetPw7531", "AzPass2468!", "$6$salt$hashhashhash", "ChpassPw11", "AnsBecome42",
      "xk_live_51HmYApiKeyValue77", "QueryTok3n998877", "sk-proj-AbCdEfGhIjKlMnOpQrSt1234", "hf_AbCdEfGhIjKlMnOpQrStUvWx", "npm_AbCdEfGhIj0123456789",
      "DockLogin66", "HerokuSkb4455", "JksPw3344", "MyCnfPw2020", "RcloneSak77"]
for i, c in enumerate(C):
    s = f"c{i}-{R}"
    st, h = t("GetSessionHistory", {"sessionId": s, "limit": 10})
    if CV[i] in json.dumps(h, ensure_ascii=False):
        kept.append(("command", c, CV[i]))
# suggestions
sug = []
for i, (p, a, v) in enumerate(P):
    if v is None:
        continue
    for who in ("alice", "bob"):
        st, r = t("InferExpectedInput", {"promptText": p, "sessionId": f"other-{who}-{R}"}, who)
        if v in json.dumps(r, ensure_ascii=False):
            sug.append((who, p, v))
files = glob.glob(os.path.join(D, "state", "terminal.db*")) + [os.path.join(D, "daemon.log")]
blob = b"".join(open(f, "rb").read() for f in files if os.path.exists(f))
on_disk = [v for _, _, v in P if v and v.encode() in blob and len(v) > 4] + [v for v in CV if v.encode() in blob]
print(f"prompts: {sum(1 for x in P if x[2])} secret cases, commands: {len(C)}")
print(f"kept in clear in GetSessionHistory: {len(kept)}")
for k in kept:
    print("  ", k)
print(f"suggested: {len(sug)}")
for k in sug:
    print("  ", k)
print(f"in terminal.db*/daemon.log (values over 4 chars): {len(on_disk)}", on_disk)
