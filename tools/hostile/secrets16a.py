#!/usr/bin/env python3
"""secrets16a.py: the sixteenth pass's (A) secret shapes, through a plaintext start13a.sh daemon
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
P = [("የይለፍ ቃል: ", "AmhSecr3t71", None), ("პაროლი: ", "GeoSecr3t72", None), ("Գաղտնաբառ: ", "ArmSecr3t73", None),
  ("ពាក្យសម្ងាត់: ", "KhmSecr3t74", None), ("ລະຫັດຜ່ານ: ", "LaoSecr3t75", None), ("මුරපදය: ", "SinSecr3t76", None),
  ("စကားဝှက်: ", "BurSecr3t77", None), ("Нууц үг: ", "MonSecr3t78", None), ("Құпия сөз: ", "KazSecr3t79", None),
  ("Şifrə: ", "AzeSecr3t80", None), ("Fjalëkalimi: ", "AlbSecr3t81", None), ("Lykilorð: ", "IceSecr3t82", None),
  ("Cyfrinair: ", "WelSecr3t83", None), ("Pasfhocal: ", "IriSecr3t84", None), ("Pasahitza: ", "BasSecr3t85", None),
  ("Contrasinal: ", "GalSecr3t86", None), ("Nenosiri: ", "SwaSecr3t87", None), ("Iphasiwedi: ", "ZulSecr3t88", None),
  ("Kalmar sirri: ", "HauSecr3t89", None), ("Kupuhipa: ", "MaoSecr3t90", None), ("Pasvorto: ", "EspSecr3t91", None),
  ("கடவுச்சொல்: ", "TamSecr3t92", None), ("పాస్‌వర్డ్: ", "TelSecr3t93", None), ("ಪಾಸ್‌ವರ್ಡ್: ", "KanSecr3t94", None),
  ("സങ്കേതപദം: ", "MalSecr3t95", None), ("ਪਾਸਵਰਡ: ", "PunSecr3t96", None), ("संकेतशब्द: ", "MarSecr3t97", None),
  ("Slaptažodis: ", "LitSecr3t98", None), ("Parool: ", "EstSecr3t99", None), ("Geslo: ", "SloSecr3t01", None),
  ("Passwuert: ", "LuxSecr3t02", None), ("Сырсөз: ", "KyrSecr3t03", None), ("Teny miafina: ", "MlgSecr3t04", None),
  ("Furaha sirta: ", "SomSecr3t05", None), ("Tessera: ", "LatSecr3t06", None),
  ("MASTERKEY> ", "GlueSecr3t07", None), ("dbpasswd>", "GlueSecr3t08", None), ("P@ssw0rd: ", "GlueSecr3t09", None),
  ("pw? ", "GlueSecr3t10", None), ("vault-token: ", "GlueSecr3t11", None), ("Client secret: ", "GlueSecr3t12", None),
  ("AWS Secret Access Key [None]: ", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYNEWKEY16", None), ("Seed phrase: ", "abandon ability able about above absent absorb abstract absurd abuse access accident", None),
  ("Please enter passphrase for disk cryptroot: ", "LuksSecr3t13", None), ("Enter PIN for 'PIV Card Holder pin (PIV_II)': ", "849302", None),
  ("Duo passcode or option (1-3): ", "9384021", None), ("Enter host password for user 'bob': ", "CurlSecr3t14", None),
  ("Encryption key (hex): ", "9f86d081884c7d659a2feaa0c55ad015", None), ("Cookie: ", "session=eyJhbGciOiJIUzI1NiJ9.e30.abcdEFGH", None),
  ("Enter value: ", "EchoOffSecr3t15", True), ("> ", "EchoOffSecr3t16", True), ("Name: ", "EchoOffSecr3t17", True),
  ("Value for KEY [default]: ", "EchoOffSecr3t18", True), ("Input: ", "NoEchoSecr3t19", None),
  ("U\u200bs\u200be\u200br\u200bn\u200ba\u200bm\u200be / P\u200ba\u200bs\u200bs\u200bw\u200bo\u200br\u200bd: ", "ZwspSecr3t20", None),
  ("Пароль (Username): ", "MixSecr3t21", None), ("Username or p a s s w o r d: ", "SpacedSecr3t22", None),
  ("\x1b[1mPass\x1b[0mword: ", "AnsiSecr3t23", None), ("PASS WORD: ", "SplitSecr3t24", None), ("Pass-word: ", "HyphSecr3t25", None),
  ("Пaрoль: ", "HomoSecr3t26", None), ("Ｐａｓｓｗｏｒｄ: ", "FullSecr3t27", None)]
SH = "alice@box:~$ "
C = [("set -x DB_PASSWORD FishSecr3t30", "FishSecr3t30"), ("$env:API_KEY = 'PwshSecr3t31'", "PwshSecr3t31"),
  ("setx API_TOKEN CmdSecr3t32", "CmdSecr3t32"), ("cmdkey /add:srv /user:u /pass:CmdkSecr3t33", "CmdkSecr3t33"),
  ("net use \\\\srv\\share /user:alice NetuSecr3t34", "NetuSecr3t34"), ("http -a alice:HttpieSecr3t35 example.org", "HttpieSecr3t35"),
  ("htpasswd -b .htpasswd alice HtpwSecr3t36", "HtpwSecr3t36"), ("openssl enc -aes256 -k OsslSecr3t37 -in a", "OsslSecr3t37"),
  ("gpg --batch --passphrase GpgSecr3t38 -c f", "GpgSecr3t38"), ("vault login s.VaultTok3nSecr3t39", "s.VaultTok3nSecr3t39"),
  ("aws configure set aws_secret_access_key AwsSecr3t40", "AwsSecr3t40"), ("docker run -e POSTGRES_PASSWORD=DockSecr3t41 postgres", "DockSecr3t41"),
  ("az login -u a@b.c -p AzSecr3t42", "AzSecr3t42"), ("sqlcmd -S srv -U sa -P SqlcSecr3t43", "SqlcSecr3t43"),
  ("mongosh mongodb://u:MongoSecr3t44@h/db", "MongoSecr3t44"), ("wget --password=WgetSecr3t45 ftp://h/f", "WgetSecr3t45"),
  ("curl --oauth2-bearer CurlBearSecr3t46 https://x", "CurlBearSecr3t46"), ("git remote set-url origin https://x-access-token:ghs_GhsSecr3t47abcdefghijklmnop@github.com/a/b", "ghs_GhsSecr3t47abcdefghijklmnop"),
  ("wpa_cli set_network 0 psk '\"WpaSecr3t48\"'", "WpaSecr3t48"), ("iwconfig wlan0 key s:IwcSecr3t49", "IwcSecr3t49"),
  ("SECRET=PlainSecr3t50 ./run.sh", "PlainSecr3t50"), ("echo PipeSecr3t51 | sudo -S ls", "PipeSecr3t51"),
  ("psql 'host=db user=a password=LibpqSecr3t52'", "LibpqSecr3t52"), ("redis-cli -u redis://:RedisSecr3t53@h:6379", "RedisSecr3t53"),
  ("smbclient //h/s -U alice%SmbSecr3t54", "SmbSecr3t54"), ("7z a -pSevenSecr3t55 a.7z f", "SevenSecr3t55"),
  ("export ANTHROPIC_API_KEY=sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv", "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv"),
  ("stripe login --api-key sk_live_StripeSecr3t56abcdef", "sk_live_StripeSecr3t56abcdef"), ("npm login --auth-type=legacy --password NpmSecr3t57", "NpmSecr3t57"),
  ("pip install --index-url https://u:PipSecr3t58@pypi.corp/simple x", "PipSecr3t58"), ("ldapsearch -x -w LdapSecr3t59 -D cn=admin", "LdapSecr3t59"),
  ("printf 'PrintfSecr3t60\\n' | passwd --stdin alice", "PrintfSecr3t60"), ("mysql -uroot -p'QuotedSecr3t61'", "QuotedSecr3t61")]
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
print(f"secrets16a: {len(P)} prompts, {len(C)} commands; kept in clear in GetSessionHistory: {len(kept)}")
for k in kept: print("   kept", repr(k))
print(f"suggested: {len(sug)}"); [print("   sug", repr(k)) for k in sug]
print(f"in terminal.db*/daemon.log: {len(disk)}", disk)
