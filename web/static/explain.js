// classifierd explain page: calls the daemon's Connect JSON endpoints
// (POST /classifier.v1.ClassifierService/<Method>) and draws the answer.
'use strict';

const SERVICE = '/classifier.v1.ClassifierService/';
const ROLES = ['user', 'assistant', 'system', 'tool'];
let info = null;

async function call(method, body) {
  const res = await fetch(SERVICE + method, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = await res.json().catch(() => ({}));
  if (!res.ok) {
    throw new Error(`${method}: ${json.code || res.status}: ${json.message || res.statusText}`);
  }
  return json;
}

// parse turns "user: …" / "assistant: …" lines into messages; any other
// text is one query.
function parse(text) {
  const lines = text.split('\n');
  const turn = /^\s*(user|assistant|system|tool)\s*:\s?(.*)$/i;
  if (!lines.some((l) => turn.test(l))) {
    return { query: text.trim() };
  }
  const messages = [];
  for (const l of lines) {
    const m = turn.exec(l);
    if (m && ROLES.includes(m[1].toLowerCase())) {
      messages.push({ role: m[1].toLowerCase(), content: m[2] });
    } else if (messages.length > 0) {
      messages[messages.length - 1].content += '\n' + l;
    }
  }
  return { messages };
}

function threshold(target) {
  const c = ((info && info.calibration) || []).find((x) => x.target === target);
  return c ? c.defaultThreshold : 0;
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

function confCell(conf, thr) {
  const bar = el('span', { class: 'bar' });
  const fill = el('span');
  fill.style.width = `${Math.round(conf * 100)}%`;
  const mark = el('i', { title: `abstain threshold ${thr.toFixed(2)}` });
  mark.style.left = `${Math.round(thr * 100)}%`;
  bar.append(fill, mark);
  return el('td', { class: 'conf' }, bar, conf.toFixed(3));
}

function fill(tableId, rows, thr) {
  const body = document.querySelector(`#${tableId} tbody`);
  body.replaceChildren();
  rows.forEach((r, i) => {
    const tr = el('tr', { class: r.confidence >= thr ? 'above' : 'below' },
      el('td', {}, String(i + 1)), el('td', { class: 'name' }, r.name),
      confCell(r.confidence, thr), el('td', {}, r.score.toFixed(3)));
    tr.append(evidenceCell(r.parts, r.evidence));
    body.append(tr);
  });
  if (rows.length === 0) {
    body.append(el('tr', {}, el('td', { colspan: '5', class: 'muted' }, 'none')));
  }
}

// evidenceCell shows a score's evidence by kind: pattern (a category
// pattern matched), lexical (a name or keyword), dense (the nearest catalog
// text by embedding, with its cosine).
function evidenceCell(parts, sentence) {
  const td = el('td', { class: 'evidence' });
  if (!parts) {
    td.append(sentence || '');
    return td;
  }
  const line = (kind, text) => td.append(el('div', {}, el('span', { class: `kind ${kind}` }, kind), text));
  if (parts.via) td.append(el('div', { class: 'muted' }, `via ${parts.via}`));
  if (parts.pattern) line('pattern', parts.pattern);
  if (parts.lexical) line('lexical', parts.lexical);
  if (parts.nearest) line('dense', `${parts.dense.toFixed(2)} ${parts.nearest}`);
  return td;
}

async function explain() {
  const text = document.getElementById('prompt').value;
  const status = document.getElementById('status');
  if (!text.trim()) {
    status.textContent = 'type a prompt first';
    return;
  }
  status.textContent = 'routing…';
  status.classList.remove('error');
  const req = parse(text);
  try {
    const route = await call('Route', { ...req, maxServers: 5, maxTools: 10, onNoMatch: 'NO_MATCH_POLICY_NONE' });
    fill('categories', route.categories.map((c) => ({ name: c.id, confidence: c.confidence, score: c.score,
      parts: c.evidenceParts, evidence: c.evidence })), threshold('categories_multi'));
    fill('servers', route.servers.map((s) => ({ name: s.name || s.id, confidence: s.confidence,
      score: s.score, parts: s.evidenceParts, evidence: s.evidence })), threshold('servers'));
    fill('tools', route.tools.map((t) => ({ name: `${t.server}/${t.name}`, confidence: t.confidence,
      score: t.score, parts: t.evidenceParts, evidence: t.evidence })), threshold('tools'));
    const st = route.stats;
    const total = Number(st.tokensTotal);
    const returned = Number(st.tokensReturned);
    document.getElementById('summary').textContent = route.abstained
      ? `Abstained: nothing reached its threshold (${route.policyReason || 'no match'}).`
      : `Top category: ${route.categories.length ? route.categories[0].id : 'none'}.`;
    document.getElementById('tokens').textContent =
      `Tokens saved: ${total - returned} of ${total} (${st.returnedCount} of ${st.originalCount} tools sent, ` +
      `${st.reductionPercent.toFixed(1)}% fewer).`;
    document.getElementById('reasoning').textContent = route.reasoning;
    document.getElementById('result').hidden = false;
    status.textContent = 'done';
  } catch (e) {
    status.textContent = e.message;
    status.classList.add('error');
  }
}

// reliability draws one SVG reliability diagram per calibrated target.
function reliability(cals) {
  const box = document.getElementById('reliability');
  box.replaceChildren();
  const ns = 'http://www.w3.org/2000/svg';
  const S = 220;
  const P = 24;
  const withBins = cals.filter((c) => (c.reliability || []).length > 0);
  if (withBins.length === 0) {
    box.append(el('p', { class: 'muted' }, 'This index has no reliability data (rebuild it with gen-index).'));
    return;
  }
  for (const c of withBins) {
    const svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('width', S + 2 * P);
    svg.setAttribute('height', S + 2 * P);
    svg.setAttribute('class', 'diagram');
    svg.setAttribute('data-target', c.target);
    const add = (tag, a) => {
      const e = document.createElementNS(ns, tag);
      for (const [k, v] of Object.entries(a)) e.setAttribute(k, v);
      svg.append(e);
      return e;
    };
    add('rect', { x: P, y: P, width: S, height: S, fill: '#fafafa', stroke: '#999' });
    add('line', { x1: P, y1: P + S, x2: P + S, y2: P, stroke: '#bbb', 'stroke-dasharray': '4 3' });
    for (const b of c.reliability) {
      if (b.count === 0) continue;
      const w = (b.hi - b.lo) * S;
      const h = b.accuracy * S;
      const r = add('rect', { x: P + b.lo * S + 1, y: P + S - h, width: Math.max(w - 2, 1), height: h, fill: '#2f7ad1', class: 'bin' });
      const t = document.createElementNS(ns, 'title');
      t.textContent = `[${b.lo.toFixed(2)}, ${b.hi.toFixed(2)}): ${b.count} samples, mean confidence ${b.meanConfidence.toFixed(2)}, right ${(b.accuracy * 100).toFixed(0)}%`;
      r.append(t);
    }
    const thr = c.defaultThreshold;
    add('line', { x1: P + thr * S, y1: P, x2: P + thr * S, y2: P + S, stroke: '#c0392b' });
    const xl = add('text', { x: P + S / 2 - 30, y: P + S + 20, 'font-size': 11 });
    xl.textContent = 'confidence';
    const yl = add('text', { x: 12, y: P + S / 2 + 20, 'font-size': 11, transform: `rotate(-90 12 ${P + S / 2 + 20})` });
    yl.textContent = 'right';
    const caption = el('figcaption', {}, el('b', {}, c.target),
      ` ${c.method}, ECE ${c.eceAfter.toFixed(3)} (raw ${c.eceBefore.toFixed(3)}), threshold ${thr.toFixed(2)}, ${c.samples} samples`);
    box.append(el('figure', {}, svg, caption));
  }
}

async function init() {
  document.getElementById('explain').addEventListener('click', explain);
  document.getElementById('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) explain();
  });
  try {
    info = await call('GetIndexInfo', {});
    document.getElementById('index-info').textContent =
      `${info.modelName}: ${info.categories} categories, ${info.servers} servers, ${info.tools} tools`;
    reliability(info.calibration || []);
  } catch (e) {
    document.getElementById('index-info').textContent = e.message;
  }
}

init();
