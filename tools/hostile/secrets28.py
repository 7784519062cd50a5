#!/usr/bin/env python3
"""secrets28.py (secrets19.py's loop, TLS when DIR/env has CERT=, certificate not verified): the twenty-eighth pass's
secret shapes through a start13a.sh daemon (DIR): prompts in languages no pass tried (Tamil, Telugu, Kannada,
Malayalam, Lao, Armenian, Kazakh, Azerbaijani, Icelandic, Irish, Albanian, Lithuanian, Latvian, Estonian,
Slovenian, Serbian, Catalan, Galician, Italian, Portuguese of Portugal, Malay, Filipino), tool prompts
(openssl, keytool, git credential, curl -u, psql, kinit, ansible-vault, doas, BIP39), and command lines
(redis-cli -a, openssl -passin, wget --password, htpasswd -b, mysql -p glued, curl -u, URL userinfo in psql).
Each value is written by alice with TrackInputEvent in a session of its own; prints the values that
come back in clear from GetSessionHistory, that InferExpectedInput suggests (alice, bob), or that
are in terminal.db*/daemon.log."""
import json, os, sys, urllib.request, uuid, glob
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
D = os.environ.get("DIR", os.path.join(ROOT, "var/h16p"))
env = dict(l.strip().split("=", 1) for l in open(os.path.join(D, "env")) if "=" in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(D, "tokens")) if l.strip() and not l.startswith("#")}
import ssl
SCHEME = "https" if "CERT" in env else "http"
CTX = ssl.create_default_context(); CTX.check_hostname = False; CTX.verify_mode = ssl.CERT_NONE
def t(method, body, who="alice"):
    req = urllib.request.Request(f"{SCHEME}://{env['HTTP']}/terminal.v1.TerminalService/{method}", json.dumps(body).encode(),
        {"Content-Type": "application/json", "Connect-Protocol-Version": "1", "Authorization": "Bearer " + tok[who]})
    try:
        with urllib.request.urlopen(req, timeout=30, context=CTX) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()[:200]
R = uuid.uuid4().hex[:6]
P = [("கடவுச்சொல்: ", "TamSecr3t01", None), ("పాస్‌వర్డ్: ", "TelSecr3t02", None), ("ಪಾಸ್‌ವರ್ಡ್: ", "KanSecr3t03", None),
  ("പാസ്‌വേഡ്: ", "MalSecr3t04", None), ("ລະຫັດຜ່ານ: ", "LaoSecr3t05", None), ("Գաղտնաբառ: ", "ArmSecr3t06", None),
  ("Құпия сөз: ", "KazSecr3t07", None), ("Şifrə: ", "AzeSecr3t08", None), ("Lykilorð: ", "IslSecr3t09", None),
  ("Pasfhocal: ", "GleSecr3t10", None), ("Fjalëkalimi: ", "SqiSecr3t11", None), ("Slaptažodis: ", "LitSecr3t12", None),
  ("Parole: ", "LavSecr3t13", None), ("Parool: ", "EstSecr3t14", None), ("Geslo: ", "SloSecr3t15", None),
  ("Лозинка: ", "SrpSecr3t16", None), ("Contrasenya: ", "CatSecr3t17", None), ("Contrasinal: ", "GlgSecr3t18", None),
  ("Parola d'ordine: ", "ItaSecr3t19", None), ("Palavra-passe: ", "PorSecr3t20", None), ("Kata laluan: ", "MsaSecr3t21", None),
  ("Pasword: ", "FilSecr3t22", None), ("Codice PIN: ", "ItaPinSecr3t23", None), ("Enter PEM pass phrase:", "PemSecr3t24", None),
  ("Enter Export Password:", "P12Secr3t25", None), ("Enter keystore password:  ", "JksSecr3t26", None),
  ("Password for 'https://alice@github.com': ", "GitCredSecr3t27", None), ("Enter host password for user 'alice':", "CurlUSecr3t28", None),
  ("Password for user postgres: ", "PsqlSecr3t29", None), ("Password for alice@CORP.EXAMPLE: ", "KinitSecr3t30", None),
  ("Vault password: ", "AnsVaultSecr3t31", None), ("doas (alice@box) password: ", "DoasSecr3t32", None),
  ("BECOME password: ", "BecomeSecr3t33", None), ("Enter your BIP39 passphrase: ", "Bip39Secr3t34", None),
  ("Recovery phrase: ", "abandon ability able about above absent absorb abstract absurd abuse access accident", None),
  ("Master password: ", "MasterSecr3t36", None), ("Unlock code: ", "UnlockSecr3t37", None), ("Enter PAT: ", "PatSecr3t38", None),
  ("secret> ", "SecretGtSecr3t39", None), ("token=", "TokEqSecr3t40", None), ("Clave: ", "ClaveSecr3t41", None),
  ("Mot de passe du trousseau : ", "FrKeySecr3t42", None), ("Zugangscode: ", "DeZugSecr3t43", None), ("Geheimzahl: ", "DeGeheimSecr3t44", None),
  ("Project name: ", "ctrlproject28", None)]  # the control: not a secret, must be kept
SH = "alice@box:~$ "
C = [("redis-cli -a RedisSecr3t60 ping", "RedisSecr3t60"), ("openssl pkcs12 -in a.p12 -passin pass:OsslSecr3t61", "OsslSecr3t61"),
  ("wget --password=WgetSecr3t62 https://x/f", "WgetSecr3t62"), ("htpasswd -b .htpasswd alice HtpSecr3t63", "HtpSecr3t63"),
  ("mysql -uroot -pMyGlueSecr3t64 db", "MyGlueSecr3t64"), ("curl -u alice:CurlSecr3t65 https://x", "CurlSecr3t65"),
  ("psql postgresql://alice:PsqlUrlSecr3t66@db/x", "PsqlUrlSecr3t66"), ("export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCYSecr3t67", "wJalrXUtnFEMIK7MDENGbPxRfiCYSecr3t67"),
  ("$env:DB_PASSWORD = 'PwshSecr3t68'", "PwshSecr3t68"), ("set -x API_KEY FishSecr3t69", "FishSecr3t69"),
  ("http -a alice:HttpieSecr3t70 GET x", "HttpieSecr3t70"), ("gh auth login --with-token <<< ghp_Zyxwvutsrqponmlkjihgfedcba9876543210", "ghp_Zyxwvutsrqponmlkjihgfedcba9876543210")]
for i, (p, a, eo) in enumerate(P):
    b = {"sessionId": f"p{i}-{R}", "promptText": p, "inputText": a, "success": True, "inputSource": "user_typed"}
    if eo is not None: b["echoOff"] = eo
    st, r = t("TrackInputEvent", b)
    if st != 200: print("track", p, st, r)
for i, (c, v) in enumerate(C):
    st, r = t("TrackInputEvent", {"sessionId": f"c{i}-{R}", "promptText": SH, "inputText": c, "success": True, "inputSource": "user_typed"})
    if st != 200: print("track", c, st, r)
kept, sug = [], []
for i, (p, a, eo) in enumerate(P):
    st, h = t("GetSessionHistory", {"sessionId": f"p{i}-{R}", "limit": 10})
    if a in json.dumps(h, ensure_ascii=False): kept.append((p, a, eo))
    for who in ("alice", "bob"):
        st, r = t("InferExpectedInput", {"promptText": p, "sessionId": f"o-{who}-{R}"}, who)
        if a in json.dumps(r, ensure_ascii=False): sug.append((who, p, a))
for i, (c, v) in enumerate(C):
    st, h = t("GetSessionHistory", {"sessionId": f"c{i}-{R}", "limit": 10})
    if v in json.dumps(h, ensure_ascii=False): kept.append((c, v, "command"))
files = glob.glob(os.path.join(D, "state", "terminal.db*")) + [os.path.join(D, "daemon.log")]
blob = b"".join(open(f, "rb").read() for f in files if os.path.exists(f))
disk = [a for _, a, _ in P if a.encode() in blob] + [v for _, v in C if v.encode() in blob]
print(f"secrets28: {len(P)} prompts, {len(C)} commands; kept in clear in GetSessionHistory: {len(kept)}")
for k in kept: print("   kept", repr(k))
print(f"suggested: {len(sug)}"); [print("   sug", repr(k)) for k in sug]
print(f"in terminal.db*/daemon.log: {len(disk)}", disk)
