#!/usr/bin/env python3
"""secrets19.py (from secrets16a.py): the nineteenth pass's (A) secret shapes, through a plaintext start13a.sh daemon
(DIR, default var/h16p): prompts in languages and wordings the earlier passes did not try (Amharic,
Georgian, Khmer, Sinhala, Burmese, Mongolian, Welsh, Basque, Swahili, Zulu, Maori, Esperanto, ...),
glued and decorated keywords, tool prompts (aws configure, LUKS, PIV, Duo), unknown wordings typed with
echo off, and command lines in shells and tools not listed before (fish, PowerShell, cmd, httpie).
Each value is written by alice with TrackInputEvent in a session of its own; prints the values that
come back in clear from GetSessionHistory, that InferExpectedInput suggests (alice, bob), or that
are in terminal.db*/daemon.log."""
import json, os, sys, urllib.request, uuid, glob
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
D = os.environ.get("DIR", os.path.join(ROOT, "var/h16p"))
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
# (prompt, answer, echo_off or None)
P = [("비밀번호: ", "KorSecr3t01", None), ("पासवर्ड: ", "HinSecr3t02", None), ("كلمة المرور: ", "AraSecr3t03", None),
  ("Mật khẩu: ", "VieSecr3t04", None), ("Hasło: ", "PolSecr3t05", None), ("סיסמה: ", "HebSecr3t06", None),
  ("รหัสผ่าน: ", "ThaSecr3t07", None), ("Kata sandi: ", "IndSecr3t08", None), ("رمز عبور: ", "PerSecr3t09", None),
  ("Κωδικός πρόσβασης: ", "GreSecr3t10", None), ("Şifre: ", "TurSecr3t11", None), ("Heslo: ", "CzeSecr3t12", None),
  ("Wachtwoord: ", "DutSecr3t13", None), ("Lösenord: ", "SweSecr3t14", None), ("Salasana: ", "FinSecr3t15", None),
  ("Jelszó: ", "HunSecr3t16", None), ("পাসওয়ার্ড: ", "BenSecr3t17", None), ("پاس ورڈ: ", "UrdSecr3t18", None),
  ("Пароль користувача: ", "UkrSecr3t19", None), ("Parolă: ", "RomSecr3t20", None), ("Adgangskode: ", "DanSecr3t21", None),
  ("Passord: ", "NorSecr3t22", None), ("Lozinka: ", "CroSecr3t23", None), ("Парола: ", "BulSecr3t24", None),
  ("[sudo] password for alice: ", "SudoSecr3t25", None), ("Enter passphrase for key '/home/a/.ssh/id_ed25519': ", "SshSecr3t26", None),
  ("OTP: ", "482913", None), ("Verification code: ", "739201", None), ("2FA code: ", "102938", None),
  ("Enter your token: ", "TokSecr3t27", None), ("API key: ", "ApiSecr3t28", None), ("Private key password: ", "PkSecr3t29", None),
  ("p\u0430ssword: ", "CyrASecr3t30", None), ("PASSW\u039fRD: ", "GrkOSecr3t31", None), ("Pass\u00adword: ", "ShySecr3t32", None),
  ("Pass\u2060word: ", "WjSecr3t33", None), ("P\u0301assword: ", "CombSecr3t34", None), ("pAsSwOrD:", "CaseSecr3t35", None),
  ("Enter the 🔑: ", "EmojiSecr3t36", None), ("🔒 Password: ", "LockSecr3t37", None), ("Password\t: ", "TabSecr3t38", None),
  ("Password\r\n: ", "CrlfSecr3t39", None), ("Enter password (will not echo)\n> ", "NlSecr3t40", None),
  ("Repeat for confirmation: ", "ConfSecr3t41", None), ("Retype new UNIX password: ", "UnixSecr3t42", None),
  ("Enter Auth Password: ", "SnmpSecr3t43", None), ("Bitte geben Sie das Kennwort ein: ", "DeSentSecr3t44", None),
  ("请输入密码：", "ZhSentSecr3t45", None), ("パスワードを入力してください: ", "JaSentSecr3t46", None),
  ("Введите пароль: ", "RuSentSecr3t47", None), ("Entrez votre code secret : ", "FrSentSecr3t48", None),
  ("Nhập mã PIN: ", "VieSecr3t49", None), ("رمز: ", "ArShortSecr3t50", None), ("暗証番号: ", "JaPinSecr3t51", None),
  ("口令: ", "ZhKouSecr3t52", None), ("Kod PIN: ", "PlPinSecr3t53", None), ("PIN-Code: ", "998877", None)]
SH = "alice@box:~$ "
C = [("export GH_TOKEN=ghp_Abcdefghijklmnopqrstuvwxyz0123456789", "ghp_Abcdefghijklmnopqrstuvwxyz0123456789"),
  ("curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sigSecr3t60' https://x", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sigSecr3t60"),
  ("kubectl create secret generic x --from-literal=password=KubeSecr3t61", "KubeSecr3t61"),
  ("docker login -u a -p DockLogSecr3t62 registry", "DockLogSecr3t62"), ("sshpass -p SshpSecr3t63 ssh h", "SshpSecr3t63"),
  ("mysql --password=MyEqSecr3t64 db", "MyEqSecr3t64"), ("PGPASSWORD=PgEnvSecr3t65 psql", "PgEnvSecr3t65"),
  ("echo 'machine h login a password NetrcSecr3t66' >> ~/.netrc", "NetrcSecr3t66"),
  ("git clone https://alice:GitUrlSecr3t67@git.corp/x", "GitUrlSecr3t67"), ("set PASSWORT=DeEnvSecr3t68", "DeEnvSecr3t68"),
  ("export CONTRASEÑA=EsEnvSecr3t69", "EsEnvSecr3t69"), ("export 密码=ZhEnvSecr3t70", "ZhEnvSecr3t70")]
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
print(f"secrets19: {len(P)} prompts, {len(C)} commands; kept in clear in GetSessionHistory: {len(kept)}")
for k in kept: print("   kept", repr(k))
print(f"suggested: {len(sug)}"); [print("   sug", repr(k)) for k in sug]
print(f"in terminal.db*/daemon.log: {len(disk)}", disk)
