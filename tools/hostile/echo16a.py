#!/usr/bin/env python3
"""echo16a.py DIR [N]: every string field of every method on --http-listen (Connect JSON) set in
turn to N (default 60,000) DEL bytes (\\x7f: escaped in JSON, a 6x growth if quoted back), as ops
(every scope); prints each answer's status and size where the answer is over 2 KB or quotes more
than 200 bytes of the value: error messages echoing input."""
import os, sys, json, http.client, ssl
d = sys.argv[1]; n = int(sys.argv[2]) if len(sys.argv) > 2 else 60000
env = dict(l.strip().split('=', 1) for l in open(os.path.join(d, 'env')) if '=' in l)
tok = {l.split()[0]: l.split()[2] for l in open(os.path.join(d, 'tokens'))}
h, p = env['HTTP'].split(':'); v = '\x7f' * n
C = 'classifier.v1.ClassifierService'; T = 'terminal.v1.TerminalService'
cases = [(C, 'Classify', {'text': v}), (C, 'Route', {'query': 'hi', 'include_servers': [v]}), (C, 'Route', {'query': 'hi', 'exclude_servers': [v]}),
  (C, 'Route', {'query': 'hi', 'messages': [{'role': 'user', 'content': v}]}), (C, 'Route', {'query': 'hi', 'on_no_match': v}),
  (C, 'Embed', {'texts': [v]}), (C, 'ReportUse', {'request_id': v}), (C, 'ReportUse', {'query': 'hi', 'servers': [v]}),
  (C, 'ReportUse', {'query': 'hi', 'tools': [{'server': v, 'tool': v}]}), (C, 'ReportUse', {'query': 'hi', 'servers': ['github'], 'shown_servers': [v]}),
  (C, 'ExportLearning', {'identity': v}), (C, 'AnalyzePrompt', {'prompt': 'hi', 'valid_categories': [v]}), (C, 'AnalyzePrompt', {'prompt': 'hi', 'mode': v}),
  (C, 'AnalyzePrompt', {'prompt': 'hi', 'session_id': v}), (C, 'CreateSession', {'session_id': v}), (C, 'CreateSession', {'default_exposure': v}),
  (C, 'GetSession', {'session_id': v}), (C, 'UpdateExposure', {'session_id': v}), (C, 'UpdateExposure', {'session_id': 's16', 'categories': [v]}),
  (C, 'UpdateExposure', {'session_id': 's16', 'mode': v}), (C, 'ListTools', {'session_id': v}), (C, 'ListToolsForContext', {'context': v}),
  (C, 'ListToolsForContext', {'category': v}), (C, 'ListToolsForContext', {'userId': v}), (C, 'DeleteSession', {'session_id': v}),
  (T, 'DetectInputPrompt', {'session_id': v}), (T, 'DetectInputPrompt', {'text': 'Password:', 'program': v}), (T, 'DetectInputPrompt', {'text': 'x', 'command_line': v}),
  (T, 'InferExpectedInput', {'prompt_text': v}), (T, 'InferExpectedInput', {'prompt_text': 'Name:', 'prompt_type': v}), (T, 'InferExpectedInput', {'prompt_text': 'Name:', 'session_context': v}),
  (T, 'TrackInputEvent', {'session_id': 's16', 'prompt_text': 'Name:', 'input_text': 'a', 'input_source': v}), (T, 'TrackInputEvent', {'session_id': 's16', 'prompt_text': 'Name:', 'input_text': 'a', 'prompt_type': v}),
  (T, 'GetSessionHistory', {'session_id': v}), (C, 'Route', {'query': 'hi', 'min_confidence': v}), (C, 'Route', {'query': 'hi', v[:3000]: 1})]
x = ssl.create_default_context(); x.check_hostname = False; x.verify_mode = ssl.CERT_NONE
c = http.client.HTTPSConnection(h, int(p), timeout=30, context=x)
req = lambda s, m, b: (c.request('POST', f'/{s}/{m}', json.dumps(b), {'Content-Type': 'application/json', 'Connect-Protocol-Version': '1', 'Authorization': 'Bearer ' + tok['ops']}), c.getresponse())[1]
req(C, 'CreateSession', {'session_id': 's16'}).read()
for s, m, b in cases:
    try:
        r = req(s, m, b); body = r.read()
    except Exception as e:
        c = http.client.HTTPSConnection(h, int(p), timeout=30, context=x); print(m, list(b), type(e).__name__); continue
    q = body.count(b'\\u007f') + body.count(b'\\\\x7f') + body.count(b'\x7f')
    flag = 'ECHO' if q > 200 or len(body) > 2048 else ''
    print('%-20s %-28s %d %7d bytes, %6d DELs quoted %s  %s' % (m, ','.join(k[:20] for k in b), r.status, len(body), q, flag, body[:90].decode(errors='replace').replace('\x7f', '.')))
