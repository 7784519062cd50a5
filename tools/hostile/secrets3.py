#!/usr/bin/env python3
"""The third pass's secret prompts: languages and forms the earlier tables
may lack, and secrets typed at ordinary prompts (shell command lines that
carry a credential, token-shaped values). TrackInputEvent each over Connect
JSON as alice, then reads GetSessionHistory and InferExpectedInput, and
greps the SQLite files; prints every value that came back or was stored in
clear. Reads var/h3/env and var/h3/tokens (DIR to change)."""
import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3 import t, d
H = {"Connect-Protocol-Version": "1"}
prompts = [
 "የይለፍ ቃል:", "პაროლი:", "Գաղտնաբառ:", "ពាក្យសម្ងាត់:", "စကားဝှက်:", "මුරපදය:", "கடவுச்சொல்:", "పాస్‌వర్డ్:",
 "પાસવર્ડ:", "ಪಾಸ್‌ವರ್ಡ್:", "പാസ്‌വേഡ്:", "ਪਾਸਵਰਡ:", "Нууц үг:", "Şifrə:", "Парола:", "Fjalëkalimi:", "Lykilorð:",
 "Pasfhocal:", "Cyfrinair:", "Wagwoord:", "Iphasiwedi:", "Kalmar sirri:", "ລະຫັດຜ່ານ:", "Contrasinal:", "Pasvorto:",
 "Clave:", "Clave de acceso:", "Ingrese su clave:", "Senha do cartão:", "Mã PIN:", "Geheimzahl:", "Code PIN :",
 "Kod PIN:", "Codice PIN:", "Пин:", "PIN 码:", "Parola d'ordine:", "Tunnuskoodi:", "Personal access token:",
 "Token:", "Bearer token:", "Client secret:", "Shared secret:", "Webhook secret:", "Encryption key:", "Decryption password:",
 "Keystore password:", "Enter keystore password:", "Enter PEM pass phrase:", "Enter Auth Password:", "Enter Bitwarden master password:",
 "Password (again):", "Retype new password:", "New UNIX password:", "Verification code sent to +1***:", "Enter the 6-digit code:",
 "MFA code:", "TOTP:", "Authenticator code:", "Recovery code:", "Backup code:", "Unlock code:", "Unlock passphrase for vault:",
 "Enter password for user postgres:", "Password for user admin: ", "mysql> Enter password:", "Enter host password for user 'bob':",
 "(current) UNIX password:", "Old password:", "Admin pass:", "Root pw:", "db_pass=", "DB_PASS:", "SECRET_KEY_BASE:", "JWT_SECRET:",
 "Enter value for MY_APP_SECRETKEY:", "apiKey:", "APIKEY:", "x-api-key:", "Enter OpenAI API key:", "HF token:", "npm token:",
 "Enter your license key:", "Product key:", "Serial number:", "Wi-Fi password:", "WPA key:", "Network key:", "PSK:",
 "Seed:", "12-word phrase:", "Wallet password:", "Card number:", "Expiry (MM/YY):", "Security code:", "CVC:", "Routing number:",
 "Account number:", "IBAN:", "Date of birth:", "Mother's maiden name:", "National ID:", "Passport number:", "Tax ID:",
]
commands = [  # a shell prompt; the command line carries a credential
 "mysql -u root -pHunter2Secret42 prod", "export GITHUB_TOKEN=ghp_16C7e42F292c6912E7710c838347Ae178B4a",
 "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.Zm9vYmFyYmF6cXV4' https://api",
 "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY aws s3 ls", "psql postgres://admin:S3cretPw9@db:5432/app",
 "sshpass -p 'TopSecret!9' ssh root@host", "echo sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD | llm keys set openai",
 "git clone https://oauth2:glpat-xxxxxxxxxxxxxxxxxxxx@gitlab.com/x/y", "docker login -u me -p dckr_pat_abcdefgh12345678",
 "htpasswd -b users bob Passw0rdBob", "redis-cli -a R3disPassw0rd", "openssl enc -k MyEncKey123 -in f",
]
values = {  # token-shaped values at a prompt with no secret words
 "Value:": "ghp_16C7e42F292c6912E7710c838347Ae178B4b", "Enter value:": "AKIAIOSFODNN7EXAMPLE",
 "Paste here:": "xoxb-1234567890-1234567890123-abcdefghijklmnopqrstuvwx", "Input:": "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345",
 "String:": "-----BEGIN OPENSSH PRIVATE KEY-----", "Answer:": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIyIn0.YmF6cXV4Zm9vYmFy",
}
sess = "sec3-" + os.urandom(4).hex()
cases = []
for i, p in enumerate(prompts):
    cases.append((p, f"hunter{i:03d}q"))
for cmd in commands:
    cases.append(("user@host:~$ ", cmd))
cases += list(values.items())
for p, v in cases:
    for _ in range(2):
        st, r = t("TrackInputEvent", {"sessionId": sess, "promptText": p, "inputText": v, "success": True, "inputSource": "user_typed"}, headers=H)
        if st != 200:
            print("track", st, repr(p), str(r)[:120])
st, hist = t("GetSessionHistory", {"sessionId": sess, "limit": 1000}, headers=H)
hist = json.dumps(hist, ensure_ascii=False)
leaks = []
def secretpart(v):  # the part of a command line that is the credential
    for k in ["Hunter2Secret42", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "eyJhbGciOiJIUzI1NiJ9", "wJalrXUtnFEMI", "S3cretPw9",
              "TopSecret!9", "sk-proj-abc", "glpat-", "dckr_pat_", "Passw0rdBob", "R3disPassw0rd", "MyEncKey123"]:
        if k in v:
            return k
    return v
for p, v in cases:
    s = secretpart(v)
    where = []
    if s in hist:
        where.append("history")
    st, inf = t("InferExpectedInput", {"promptText": p, "sessionId": sess}, headers=H)
    if s in json.dumps(inf, ensure_ascii=False):
        where.append("suggested")
    if where:
        leaks.append((p, v, where))
dbs = [os.path.join(d, "state", f) for f in ("terminal.db", "terminal.db-wal")]
blob = b"".join(open(f, "rb").read() for f in dbs if os.path.exists(f))
for p, v, where in leaks:
    if secretpart(v).encode() in blob:
        where.append("db")
    print("KEPT", ",".join(where), repr(p), repr(v)[:70])
print(f"{len(cases)} cases ({len(prompts)} prompts, {len(commands)} command lines, {len(values)} token values): {len(leaks)} kept in clear")
