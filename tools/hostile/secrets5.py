#!/usr/bin/env python3
"""The fifth pass's secret cases: prompt forms and command lines the earlier
tables did not try (connection strings, env exports, HTTP auth headers,
registry tokens, -passout/-storepass style flags, heredocs, secrets typed at
ordinary prompts, prompts in more scripts). As secrets4.py: TrackInputEvent
each as alice, GetSessionHistory, InferExpectedInput and the SQLite files;
prints what was kept in clear. Reads $DIR/env and $DIR/tokens."""

import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3 import t, d
H = {"Connect-Protocol-Version": "1"}
prompts = [
 "Database URL:", "Enter API key:", "Access key ID:", "Secret access key:", "AWS Secret Access Key [None]:",
 "Client secret:", "Bearer token:", "Personal access token:", "Recovery code:", "Backup code:", "One-time password:",
 "OTP:", "2FA code:", "Security answer:", "Mother's maiden name:", "Seed phrase:", "Private key:", "Encryption key:",
 "Master password:", "Keystore password:", "Enter keystore password:", "Key password for <mykey>:", "Enter Auth Password:",
 "Enter import password:", "Enter PEM pass phrase:", "Verifying - Enter PEM pass phrase:", "Enter pass phrase for server.key:",
 "Bitte Passwort eingeben:", "Geheimnis:", "Wachtwoord:", "Salasana:", "Jelszó:", "Heslo:", "Parola:", "Κωδικός πρόσβασης:",
 "Лозинка:", "Құпия сөз:", "گذرواژه:", "پاس ورڈ:", "পাসওয়ার্ড:", "கடவுச்சொல்:", "పాస్‌వర్డ్:", "ពាក្យសម្ងាត់:", "የይለፍ ቃል:",
 "Nenosiri:", "Ọrọ igbaniwọle:", "Sandi:", "暗証番号:", "口令:", "密碼：", "token>", "pass>", "password?", "Password (again):",
 "Retype new UNIX password:", "New password:", "Current password:", "Old password:", "LDAP Password:", "Okta password:",
]
commands = [
 "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY", "export GITHUB_TOKEN=ghp_AbCdEf0123456789AbCdEf0123456789AbCd",
 "curl -H 'Authorization: Bearer eyJraWQiOiJ4In0.eyJzdWIiOiJ5In0.c2lnbmF0dXJlMTIz' https://api/x",
 "curl -H \"X-Api-Key: 9f8e7d6c5b4a39281706f5e4d3c2b1a0\" https://api/x", "docker login -u bob -p Dk9PassWord77 registry.io",
 "echo Dk9PassWord77 | docker login --password-stdin", "htpasswd -b .htpasswd bob Ht9PassWord77",
 "openssl pkcs12 -export -passout pass:Os9PassWord77 -in c.pem", "keytool -list -storepass Ks9PassWord77",
 "psql postgresql://admin:Pg9PassWord77@db:5432/app", "redis-cli -u redis://:Rd9PassWord77@cache:6379",
 "npm config set //registry.npmjs.org/:_authToken npm_AbCdEf0123456789AbCdEf0123456789AbCd",
 "MYSQL_PWD=My9PassWord77 mysql -u root", "sqlcmd -S db -U sa -P Sq9PassWord77", "mount -t cifs //h/s /mnt -o username=bob,password=Mt9PassWord77",
 "git clone https://oauth2:glpat-AbCdEf0123456789AbCd@gitlab.com/x/y.git", "gh auth login --with-token <<< ghs_AbCdEf0123456789AbCdEf0123456789AbCd",
 "aws configure set aws_secret_access_key wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY", "sshpass -pSs9PassWord77 ssh bob@h",
 "ftp ftp://bob:Ft9PassWord77@ftp.example.com", "rclone config create r s3 secret_access_key=Rc9PassWord77",
 "stripe login --api-key sk_live_AbCdEf0123456789AbCdEf01", "SLACK_TOKEN=xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp ./notify",
 "openssl enc -aes256 -k En9PassWord77 -in f", "7z a -pZz9PassWord77 a.7z f", "zip -P Zp9PassWord77 a.zip f", "unzip -P Zp9PassWord77 a.zip",
 "mysqldump -uroot -pMd9PassWord77 db", "pg_dump 'host=db user=a password=Pd9PassWord77 dbname=x'", "cryptsetup luksOpen /dev/sdb x --key-file=- <<< Cs9PassWord77",
]
keys = ["wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY", "ghp_AbCdEf", "eyJraWQi", "9f8e7d6c5b4a39281706f5e4d3c2b1a0", "Dk9PassWord77", "Ht9PassWord77",
        "Os9PassWord77", "Ks9PassWord77", "Pg9PassWord77", "Rd9PassWord77", "npm_AbCdEf", "My9PassWord77", "Sq9PassWord77", "Mt9PassWord77",
        "glpat-AbCdEf", "ghs_AbCdEf", "Ss9PassWord77", "Ft9PassWord77", "Rc9PassWord77", "sk_live_AbCdEf", "xoxb-1234567890", "En9PassWord77",
        "Zz9PassWord77", "Zp9PassWord77", "Md9PassWord77", "Pd9PassWord77", "Cs9PassWord77"]
# secrets typed at an ordinary prompt: value shape is the only evidence
shapes = ["sk-proj-Zx9AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AKIAIOSFODNN7EXAMPLE", "-----BEGIN OPENSSH PRIVATE KEY-----",
          "xoxp-1234567890-0987654321-AbCdEfGhIjKl", "ghp_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210", "postgres://u:Pq8ShapeSecret@h/db",
          "AIzaSyA-AbCdEfGhIjKlMnOpQrStUvWxYz01234"]
keys += shapes
def secretpart(v):
    for k in keys:
        if k in v: return k
    return v
sess = "sec5-" + os.urandom(4).hex()
cases = [(p, f"hunter{i:03d}z") for i, p in enumerate(prompts)] + [("user@host:~$ ", c) for c in commands] + [("Name:", s) for s in shapes] + [("> ", s) for s in shapes]
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
