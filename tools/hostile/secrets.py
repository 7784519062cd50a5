#!/usr/bin/env python3
"""Secret prompts the first pass's table may not hold: TrackInputEvent each
with a short typed value over Connect JSON, then GetSessionHistory and
InferExpectedInput; prints the prompts whose value came back in clear, and
greps the SQLite files for the values. Reads var/h/env and var/h/tokens."""
import json, os, sys, subprocess, urllib.request
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
d = os.environ.get("DIR", os.path.join(root, "var/h"))
env = dict(l.strip().split("=", 1) for l in open(os.path.join(d, "env")))
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, "tokens"))}
def call(m, body, who="alice"):
    req = urllib.request.Request(f"http://{env['HTTP']}/terminal.v1.TerminalService/{m}", json.dumps(body).encode(),
        {"Content-Type": "application/json", "Connect-Protocol-Version": "1", "Authorization": "Bearer " + tok[who]})
    try:
        return json.load(urllib.request.urlopen(req, timeout=20))
    except urllib.error.HTTPError as e:
        return {"error": e.code, "body": e.read().decode()}
prompts = [
 "पासवर्ड दर्ज करें:", "Şifre:", "비밀번호:", "Mật khẩu:", "Hasło:", "Κωδικός πρόσβασης:", "סיסמה:", "รหัสผ่าน:",
 "Kata sandi:", "Wachtwoord:", "Lösenord:", "Adgangskode:", "Salasana:", "Jelszó:", "Heslo:", "Parolă:", "Lozinka:",
 "Пароль:", "Құпия сөз:", "গোপন নম্বর:", "رمز عبور:", "پاس ورڈ:", "Nenosiri:", "Contrasenya:", "Pasahitza:",
 "Раssword:",            # Cyrillic Р, а
 "Ｐａｓｓｗｏｒｄ：",      # fullwidth
 "Pass\u200bword:", "P a s s w o r d:", "p@ssw0rd:", "passwd:", "PASSWD for root:", "Enter PIN code:",
 "Security answer (mother's maiden name):", "Enter your 2FA code:", "OTP:", "Enter passcode:", "Passcode:",
 "Enter the secret:", "api_key=", "Enter API key:", "AWS_SECRET_ACCESS_KEY:", "Enter GITHUB_TOKEN:",
 "[sudo] password for root:", "root@host's password:", "Enter passphrase for key '/root/.ssh/id_ed25519':",
 "Bitte geben Sie Ihr Kennwort ein", "Введите пароль", "请输入密码", "パスワードを入力してください",
 "Password for 'https://user@github.com':", "Vault token:", "Master password:", "Enter seed phrase:",
 "Mnemonic:", "Recovery key:", "Private key:", "Credit card number:", "CVV:", "SSN:", "Social security number:",
 "Enter your card PIN", "Access code:", "Login code:", "Sicherheitscode:", "Código de verificación:",
 "Mot de passe :", "Contraseña", "Пин-код:", "PIN-Code:", "暗証番号:", "口令:", "密碼：", "암호:",
 "\x1b[1mPassword:\x1b[0m", "Pass\u00adword:", "PASSWORD\u0000:", "Pa\u0301ssword:",
]
sess = "sec-" + os.urandom(4).hex()
bad = []
vals = {}
for i, p in enumerate(prompts):
    v = f"hunter{i:02d}x"
    vals[p] = v
    r = call("TrackInputEvent", {"sessionId": sess, "promptText": p, "inputText": v, "success": True, "inputSource": "user_typed"})
    if "error" in r:
        print("track error", repr(p), str(r)[:200])
hist = json.dumps(call("GetSessionHistory", {"sessionId": sess, "limit": 1000}), ensure_ascii=False)
for p, v in vals.items():
    if v in hist:
        bad.append(("history", p))
    inf = json.dumps(call("InferExpectedInput", {"promptText": p, "sessionId": sess}), ensure_ascii=False)
    if v in inf:
        bad.append(("suggested", p))
    inf2 = json.dumps(call("InferExpectedInput", {"promptText": p, "sessionId": "other"}, who="alice"), ensure_ascii=False)
    if v in inf2:
        bad.append(("suggested-other-session", p))
for w, p in bad:
    print("LEAK", w, repr(p), vals[p])
print(f"{len(prompts)} prompts, {len(set(p for _, p in bad))} kept in clear")
db = os.path.join(d, "terminal.db")
for f in [db, db + "-wal"]:
    if os.path.exists(f):
        data = open(f, "rb").read()
        n = sum(1 for v in vals.values() if v.encode() in data)
        print(f, oct(os.stat(f).st_mode & 0o777), "values in file:", n)
