#!/usr/bin/env python3
"""The fourth pass's secret prompts: forms of a secret prompt the third
pass's tables did not try (terminal escapes, zero-width and fullwidth
letters, homoglyphs, sudo/git/ssh prompts as programs print them, upper
case, multi-line prompts) and more command lines that carry a credential.
Like secrets3.py: TrackInputEvent each as alice, then GetSessionHistory,
InferExpectedInput and the SQLite files; prints what was kept in clear.
Then error answers: invalid requests that carry a secret, checking that the
answer does not echo it. Reads $DIR/env and $DIR/tokens."""
import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3 import t, d
H = {"Connect-Protocol-Version": "1"}
prompts = [
 "\x1b[1mPassword:\x1b[0m ", "\x1b[31mEnter password\x1b[0m: ", "Pass\u200bword:", "Pass\u00adword:", "Ｐａｓｓｗｏｒｄ:",
 "Раssword:", "PASSWORD:", "password :", "[sudo] password for bob: ", "Password for 'https://bob@github.com': ",
 "Enter passphrase for key '/home/u/.ssh/id_ed25519': ", "bob@host's password: ", "Login: bob\r\nPassword: ",
 "Enter PIN for 'PIV Card Holder pin (PIV_II)': ", "Verification code: ", "Enter the code from your authenticator app: ",
 "Vault token:", "Unseal Key (will be hidden): ", "Enter secret: ", "GPG passphrase:", "Enter Passphrase:",
 "P@ssword:", "Passwd:", "passwd:", "PW:", "Kennwort eingeben:", "Contraseña del usuario root:", "Mot de passe pour bob :",
 "パスワードを入力してください:", "请输入密码：", "비밀번호 입력:", "كلمة السر:", "סיסמה:", "Şifre girin:", "Hasło użytkownika:",
 "Пароль пользователя root:", "पासवर्ड दर्ज करें:", "Mật khẩu:", "รหัสผ่าน:", "Kata sandi:", "Lösenord:", "Adgangskode:",
]
commands = [
 "mysql --password=Hunter2Secret42 prod", "PGPASSWORD=S3cretPw9 psql -U admin", "git remote add origin https://bob:ghp_16C7e42F292c6912E7710c838347Ae178B4a@github.com/x/y",
 "az login -u bob -p TopSecret!9", "kubectl --token=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.Zm9vYmFyYmF6cXV4 get pods",
 "vault login hvs.CAESIJlvR3disPassw0rdXXXXXXXX", "echo 'Passw0rdBob' | sudo -S apt update", "ssh-keygen -N MyEncKey123 -f k",
 "gpg --batch --passphrase R3disPassw0rd -d f.gpg", "app --client-secret=dckr_pat_abcdefgh12345678", "wget --password=S3cretPw9 http://x/",
 "smbclient //h/s -U bob%TopSecret!9", "mongo mongodb://admin:S3cretPw9@db/app", "ldapsearch -w Hunter2Secret42 -D cn=admin",
 "heroku config:set API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD", "set -x; TOKEN=glpat-xxxxxxxxxxxxxxxxxxxx make deploy",
]
keys = ["Hunter2Secret42", "S3cretPw9", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "TopSecret!9", "eyJhbGciOiJIUzI1NiJ9",
        "hvs.CAESIJ", "Passw0rdBob", "MyEncKey123", "R3disPassw0rd", "dckr_pat_", "sk-proj-abc", "glpat-"]
def secretpart(v):
    for k in keys:
        if k in v: return k
    return v
sess = "sec4-" + os.urandom(4).hex()
cases = [(p, f"hunter{i:03d}z") for i, p in enumerate(prompts)] + [("user@host:~$ ", c) for c in commands]
for p, v in cases:
    for _ in range(2):
        st, r = t("TrackInputEvent", {"sessionId": sess, "promptText": p, "inputText": v, "success": True, "inputSource": "user_typed"}, headers=H)
        if st != 200: print("track", st, repr(p), str(r)[:120])
st, hist = t("GetSessionHistory", {"sessionId": sess, "limit": 1000}, headers=H)
hist = json.dumps(hist, ensure_ascii=False)
dbs = [os.path.join(d, "state", f) for f in ("terminal.db", "terminal.db-wal")]
blob = b"".join(open(f, "rb").read() for f in dbs if os.path.exists(f))
n = 0
for p, v in cases:
    s = secretpart(v); where = []
    if s in hist: where.append("history")
    st, inf = t("InferExpectedInput", {"promptText": p, "sessionId": sess}, headers=H)
    if s in json.dumps(inf, ensure_ascii=False): where.append("suggested")
    if s.encode() in blob: where.append("db")
    if where:
        n += 1; print("KEPT", ",".join(where), repr(p), repr(v)[:70])
print(f"{len(cases)} cases ({len(prompts)} prompts, {len(commands)} command lines): {n} kept in clear")
# Error answers: invalid requests carrying a secret must not echo it.
sec = "Zq9SecretEcho77"
bad = [
 {"sessionId": "x" * 200, "promptText": "Password:", "inputText": sec},
 {"sessionId": sess, "promptText": "Password:", "inputText": sec, "inputSource": "bogus_" + sec},
 {"sessionId": sess, "promptText": "Password:" + "\xff", "inputText": sec + "x" * 100000},
 {"sessionId": sess, "promptText": "P" * 300000, "inputText": sec},
 {"sessionId": sess, "promptText": "Password:", "inputText": sec * 50000},
 {"sessionId": "", "promptText": "Password:", "inputText": sec},
]
for b in bad:
    st, r = t("TrackInputEvent", b, headers=H)
    print("error", st, "echoes secret" if sec in json.dumps(r) else "no echo", str(r)[:100])
st, r = t("TrackInputEvent", {"sessionId": sess, "promptText": "Password:", "inputText": sec, "extra_" + sec: 1}, headers=H)
print("error unknown field", st, "echoes secret" if sec in json.dumps(r) else "no echo", str(r)[:140])
st, r = t("TrackInputEvent", None, raw=b'{"sessionId":"s","inputText":"' + sec.encode() + b'", "promptText": 5}', headers=H)
print("error bad type", st, "echoes secret" if sec in json.dumps(r) else "no echo", str(r)[:140])
