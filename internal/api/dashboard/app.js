// streamlearn dashboard. Polls v1/report (the numbers), v1/history (the
// curves) and v1/latency (how soon predictions go out) every second and
// draws, per model (partition) and learner, the current numbers and the
// cumulative mistakes and regret against their bounds over rounds, as
// `streamlearn replay --plot` does.
//
// Data reaches the DOM only through textContent and setAttribute, never as
// markup: learner names and invalid-event reasons come from the config and
// the stream. Every number shown is in an element with data-field (and
// data-partition, data-learner, data-reason where they apply) whose
// data-value holds the exact JSON value, for tests and scripts; <body>
// carries data-ready once the first poll rendered and data-seq, the number
// of polls rendered so far.
//
// With models per key (a report with `keys`), a partition's numbers are the
// totals over its keys' models: the page shows them, the keys (how many,
// resident, evicted), the top keys (records, each learner's mistakes of the
// key's own model and, with a global model, of what was served), and each
// learner's served mix (rounds, the mistakes served, of the keys' own
// models and of the global model, the mix's bound). A theorem is about one
// model, so the totals have no curve: a learner's charts are bars of those
// numbers instead. The top keys' elements carry data-key too.
'use strict';

(function () {
  const POLL_MS = 1000;
  const TIMEOUT_MS = 5000;
  const SVG_NS = 'http://www.w3.org/2000/svg';

  // ?partition=N shows one model; other query values are ignored.
  const query = (function () {
    const p = new URLSearchParams(window.location.search).get('partition');
    return p !== null && /^-?[0-9]+$/.test(p) ? '?partition=' + p : '';
  })();

  // With a bearer token (http.token_file), the page is opened as
  // /#token=TOKEN: the fragment never leaves the browser (no request line,
  // access log or Referer carries it). The page keeps the token for the
  // tab's session, removes it from the address bar and history, and sends
  // it with every request for data.
  const TOKEN_KEY = 'streamlearn-token';
  const token = (function () {
    const m = /(?:^#|&)token=([A-Za-z0-9._~+\/-]+=*)(?:&|$)/.exec(window.location.hash);
    if (m) {
      try { window.sessionStorage.setItem(TOKEN_KEY, m[1]); } catch (e) { /* storage disabled */ }
      window.history.replaceState(null, '', window.location.pathname + window.location.search);
      return m[1];
    }
    try { return window.sessionStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; }
  })();

  const state = {
    seq: 0,
    layout: '', // partitions and learner names the DOM was built for
    models: new Map(), // partition -> view
    rates: new Map(), // partition -> the snapshots of the last 10 s: [{events, seconds}]
    latency: new Map(), // partition -> the latency histograms of the last 10 s: [{at, count, buckets}]
  };

  // ---- DOM helpers -------------------------------------------------------

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const k in attrs || {}) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // A number's element: its data-value is the exact value, its text the
  // formatted one.
  function field(tag, part, learner, name) {
    const attrs = {};
    if (part !== null) attrs['data-partition'] = String(part);
    if (learner !== null) attrs['data-learner'] = learner;
    attrs['data-field'] = name;
    attrs['data-value'] = '';
    return el(tag, attrs, '—');
  }

  function set(node, value, text) {
    node.setAttribute('data-value', value === undefined || value === null ? '' : String(value));
    node.textContent = text === undefined ? fmt(value) : text;
  }

  function stat(dl, label, node, cls) {
    const d = el('div', cls ? { class: cls } : {});
    const dt = el('dt', {}, label);
    d.append(dt, node);
    dl.append(d);
    return dt;
  }

  // ---- formatting --------------------------------------------------------

  const intFmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

  function minus(s) {
    return s.replace('-', '\u2212');
  }

  function fmt(v) {
    if (v === undefined || v === null) return '—';
    if (typeof v !== 'number') return String(v);
    if (!Number.isFinite(v)) return String(v);
    const a = Math.abs(v);
    if (Number.isInteger(v) || a >= 1000) return minus(intFmt.format(v));
    if (a >= 100) return minus(v.toFixed(1));
    if (a >= 1) return minus(v.toFixed(2));
    return minus(v.toPrecision(3));
  }

  function compact(v) {
    const a = Math.abs(v);
    const t = (x) => minus(String(Number(x.toPrecision(3))));
    if (a >= 1e9) return t(v / 1e9) + 'G';
    if (a >= 1e6) return t(v / 1e6) + 'M';
    if (a >= 1e4) return t(v / 1e3) + 'k';
    return t(v);
  }

  // A bound's status (the report's bound.status) in the report's words,
  // the badge's mark, and what it means.
  const STATUS = { holds: 'bound holds', violated: 'bound violated', premise_false: 'premise false', assumed: 'bound assumed' };
  const BADGE = { holds: '\u2713 ', violated: '\u2717 ', premise_false: '\u26a0 ', assumed: '' };
  const STATUS_TITLE = {
    holds: 'the theorem proves it for this stream',
    violated: 'exceeded, though the theorem proves it for this stream',
    premise_false: 'the theorem\u2019s premise failed on this stream: it says nothing of it',
    assumed: 'proved if the margin given is true; nothing has contradicted it',
  };

  function words(s) {
    return String(s).replace(/_/g, ' ');
  }

  // ---- polling -----------------------------------------------------------

  async function getJSON(path) {
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = 'Bearer ' + token;
    const resp = await fetch(path + query, {
      headers: headers,
      cache: 'no-cache', // revalidate: /v1/history answers 304 while nothing changed
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    if (resp.status === 404 && query) return []; // that partition has no model yet
    if (resp.status === 401) {
      throw new Error(token ? 'wrong token: open the dashboard as /#token=TOKEN'
        : 'this service needs a token: open the dashboard as /#token=TOKEN');
    }
    if (!resp.ok) throw new Error(path + ': HTTP ' + resp.status);
    const v = await resp.json();
    return Array.isArray(v) ? v : [v];
  }

  async function tick() {
    try {
      const [reports, history, latency] = await Promise.all([getJSON('v1/report'), getJSON('v1/history'), getJSON('v1/latency')]);
      render(reports, history, latency);
      setStatus('live', 'live \u00b7 updated ' + new Date().toLocaleTimeString());
    } catch (err) {
      setStatus('error', 'disconnected (' + (err && err.message ? err.message : String(err)) + '), retrying');
    } finally {
      window.setTimeout(tick, POLL_MS);
    }
  }

  function setStatus(s, text) {
    document.getElementById('status').setAttribute('data-state', s);
    document.getElementById('status-text').textContent = text;
  }

  // Events per second of a model over the last 10 s of its uptime (the
  // report's seconds): the events between the oldest snapshot of that
  // window and this one, or the average since the model started while
  // there is only one snapshot.
  const RATE_WINDOW = 10;
  function rate(r) {
    let w = state.rates.get(r.partition);
    if (!w || (w.length > 0 && (r.seconds < w[w.length - 1].seconds || r.events < w[w.length - 1].events))) {
      w = []; // a new model (a restart, a handover)
    }
    if (w.length === 0 || r.seconds > w[w.length - 1].seconds) w.push({ events: r.events, seconds: r.seconds });
    while (w.length > 2 && r.seconds - w[1].seconds >= RATE_WINDOW) w.shift();
    state.rates.set(r.partition, w);
    const first = w[0];
    if (w.length < 2 || r.seconds <= first.seconds) return r.seconds > 0 ? r.events / r.seconds : 0;
    return (r.events - first.events) / (r.seconds - first.seconds);
  }

  // A partition's prediction latencies over the last 10 s: the difference
  // between its cumulative histogram (v1/latency) now and the oldest one
  // of that window, as Prometheus's histogram_quantile of a rate; since
  // the start while there is one histogram only, or no prediction came in
  // the window.
  const LATENCY_WINDOW = 10;
  function recentLatency(l) {
    const now = performance.now() / 1000;
    let w = state.latency.get(l.partition);
    if (!w || (w.length > 0 && l.count < w[w.length - 1].count)) w = []; // a restart
    w.push({ at: now, count: l.count, buckets: l.buckets || [] });
    while (w.length > 2 && now - w[1].at >= LATENCY_WINDOW) w.shift();
    state.latency.set(l.partition, w);
    const first = w[0];
    const n = l.count - first.count;
    if (w.length < 2 || n <= 0) return { count: l.count, buckets: l.buckets || [] };
    return {
      count: n,
      buckets: (l.buckets || []).map((b, i) => ({ le: b.le, count: b.count - (first.buckets[i] ? first.buckets[i].count : 0) })),
    };
  }

  // The q-quantile of a histogram of count observations (cumulative
  // buckets, ascending bounds), as histogram_quantile computes it: linear
  // within the bucket the rank falls in (from 0 in the first); the last
  // bound when it falls above it. null without observations.
  function quantile(q, h) {
    if (h.count <= 0) return null;
    const rank = q * h.count;
    let lo = 0;
    let below = 0;
    for (const b of h.buckets) {
      if (b.count >= rank) {
        const n = b.count - below;
        return n > 0 ? lo + (b.le - lo) * (rank - below) / n : b.le;
      }
      lo = b.le;
      below = b.count;
    }
    return h.buckets.length > 0 ? h.buckets[h.buckets.length - 1].le : null;
  }

  function millis(v) {
    return v === null ? '—' : fmt(v * 1000) + ' ms';
  }

  // Accuracy between consecutive points of a learner's curve: what the
  // learner got right lately, where the cumulative accuracy moves slowly.
  function recentAccuracy(c) {
    const out = [];
    if (!c) return out;
    for (let k = 0; k < c.round.length; k++) {
      const r0 = k > 0 ? c.round[k - 1] : 0;
      const m0 = k > 0 ? c.mistakes[k - 1] : 0;
      const n = c.round[k] - r0;
      out.push(n > 0 ? 1 - (c.mistakes[k] - m0) / n : 1);
    }
    return out;
  }

  // The accuracy over about the last `span` rounds of a curve, or null.
  function windowAccuracy(c, span) {
    if (!c || c.round.length < 2) return null;
    const last = c.round.length - 1;
    let k = last - 1;
    while (k > 0 && c.round[last] - c.round[k - 1] <= span) k--;
    const n = c.round[last] - c.round[k];
    if (n <= 0) return null;
    return { accuracy: 1 - (c.mistakes[last] - c.mistakes[k]) / n, rounds: n };
  }

  // ---- rendering ---------------------------------------------------------

  function render(reports, history, latency) {
    const curves = new Map();
    for (const h of history) {
      for (const c of h.learners || []) curves.set(h.partition + '\u0000' + c.name, c);
    }
    const latencies = new Map();
    for (const l of latency) latencies.set(l.partition, l);
    const layout = JSON.stringify(reports.map((r) => [r.partition, (r.learners || []).map((l) => l.name), latencies.has(r.partition), !!r.keys, !!r.mix]));
    if (layout !== state.layout) {
      build(reports, latencies);
      state.layout = layout;
    }

    const totals = { events: 0, labeled: 0, invalid: 0, rate: 0, violations: 0 };
    const violated = [];
    const seen = new Set(); // the statuses of the bounds in the alert
    const sources = new Set();
    for (const r of reports) {
      const view = state.models.get(r.partition);
      const rt = rate(r);
      let violations = 0;
      for (const l of r.learners || []) {
        violations += l.bound_violations || 0;
        const st = l.bound ? l.bound.status : '';
        if (st === 'violated' || st === 'premise_false' || l.bound_violations > 0) {
          let who = l.name + ' (';
          if (st === 'violated' || st === 'premise_false') {
            who += STATUS[st] + ', ';
            seen.add(st);
          }
          who += fmt(l.bound_violations) + (l.bound_violations === 1 ? ' violation' : ' violations');
          violated.push(who + (reports.length > 1 ? ', partition ' + r.partition : '') + ')');
        }
        const answers = l.name === r.answer;
        set(view.learners.get(l.name).answer, answers, answers ? 'answer' : '');
        if (view.keys) {
          updateKeyedLearner(view.learners.get(l.name), l, r);
        } else {
          updateLearner(view.learners.get(l.name), l, curves.get(r.partition + '\u0000' + l.name));
        }
      }
      updateModel(view, r, rt, violations, latencies.get(r.partition));
      if (view.keys) updateKeys(view.keys, r);
      totals.events += r.events;
      totals.labeled += r.labeled;
      totals.invalid += r.invalid;
      totals.rate += rt;
      totals.violations += violations;
      sources.add(r.source);
    }

    const q = (name) => document.querySelector('header [data-field="' + name + '"]');
    set(q('total_events'), totals.events);
    set(q('total_events_per_second'), totals.rate, fmt(Math.round(totals.rate)));
    set(q('total_labeled'), totals.labeled);
    set(q('total_invalid'), totals.invalid);
    const tv = q('total_violations');
    set(tv, totals.violations);
    tv.classList.toggle('bad', totals.violations > 0);
    document.getElementById('source').textContent = sources.size > 0 ? Array.from(sources).join(', ') : '—';

    const alerts = document.getElementById('alerts');
    if (violated.length > 0) {
      alerts.replaceChildren(
        el('strong', {}, seen.has('violated') ? 'Bound violated' : seen.has('premise_false') ? 'Premise false' : 'Bound violations'),
        document.createTextNode(' \u2014 a drift signal: the stream broke a theorem\u2019s assumption (label noise, drift or a class that cannot fit it). '),
        document.createTextNode(violated.join(' \u00b7 ')),
      );
      alerts.hidden = false;
    } else {
      alerts.hidden = true;
    }

    state.seq++;
    document.body.setAttribute('data-seq', String(state.seq));
    document.body.setAttribute('data-ready', 'true');
  }

  function build(reports, latencies) {
    const main = document.getElementById('models');
    state.models.clear();
    const nodes = [];
    if (reports.length === 0) {
      nodes.push(el('p', { class: 'empty' }, query ? 'No model for this partition yet.' : 'No events yet: the service has not seen a record.'));
    }
    for (const r of reports) {
      const view = buildModel(r, latencies.has(r.partition));
      state.models.set(r.partition, view);
      nodes.push(view.root);
    }
    main.replaceChildren(...nodes);

    const nav = document.getElementById('partitions');
    if (reports.length > 1 || query) {
      const links = [el('span', {}, 'partitions:'), el('a', { href: '.' }, 'all')];
      for (const r of reports) links.push(el('a', { href: '?partition=' + r.partition }, String(r.partition)));
      nav.replaceChildren(...links);
      nav.hidden = false;
    } else {
      nav.hidden = true;
    }
  }

  function buildModel(r, latency) {
    const p = r.partition;
    const root = el('section', { class: 'model', 'data-partition': String(p) });
    const head = el('div', { class: 'model-head' });
    head.append(el('h2', {}, 'partition ' + p));
    const dl = el('dl', { class: 'model-stats' });
    const f = {};
    for (const [name, label] of [
      ['events', 'events'],
      ['events_per_second', 'events/s (last 10 s)'],
      ['labeled', 'labeled'],
      ['predicted', 'predicted only'],
      ['invalid', 'invalid'],
      ['violations', 'bound violations'],
      ['consumer_lag', 'consumer lag'],
    ]) {
      f[name] = field('dd', p, null, name);
      stat(dl, label, f[name]);
    }
    // With a predictions sink: from a record's broker time to its
    // prediction sent.
    if (latency) {
      for (const [name, label] of [
        ['latency_p50', 'prediction latency p50 (last 10 s)'],
        ['latency_p99', 'prediction latency p99 (last 10 s)'],
      ]) {
        f[name] = field('dd', p, null, name);
        stat(dl, label, f[name]);
      }
    }
    // Delayed labels: the events waiting, and how late labels come.
    if (r.labels) {
      for (const [name, label] of [
        ['pending', 'waiting for a label'],
        ['labels_joined', 'labels joined'],
        ['label_delay_mean', 'label delay (records, mean)'],
        ['label_delay_max', 'label delay (max)'],
        ['labels_rejected', 'labels late, duplicate or unknown'],
      ]) {
        f[name] = field('dd', p, null, name);
        stat(dl, label, f[name]);
      }
    }
    head.append(dl);
    const reasons = el('div', { class: 'reasons', 'data-partition': String(p) });
    const grid = el('div', { class: 'learners' });
    const learners = new Map();
    for (const l of r.learners || []) {
      const v = buildLearner(p, l);
      learners.set(l.name, v);
      grid.append(v.root);
    }
    const keys = r.keys ? buildKeys(p, r) : null;
    root.append(head, reasons);
    if (keys) root.append(keys.root);
    root.append(grid);
    return { root, fields: f, reasons, learners, keys };
  }

  // ---- models per key ----------------------------------------------------

  function cell(tag, text, attrs) {
    return el(tag, attrs || {}, text);
  }

  // The keys of a partition's models per key: how many, and, with a
  // global model, each learner's served mix; the top keys' table is
  // filled by updateKeys.
  function buildKeys(p, r) {
    const root = el('section', { class: 'keys', 'data-partition': String(p) });
    const dl = el('dl', { class: 'model-stats' });
    const f = {};
    for (const [name, label] of [
      ['keys', 'keys'],
      ['keys_resident', 'resident'],
      ['keys_evicted', 'evictions'],
    ]) {
      f[name] = field('dd', p, null, name);
      stat(dl, label, f[name]);
    }
    const head = el('div', { class: 'keys-head' });
    head.append(el('h3', {}, 'models per key'), dl);
    root.append(head);
    const mix = new Map();
    if (r.mix) {
      const t = el('table', { class: 'mix' });
      t.append(el('caption', {}, 'served: each key\u2019s model or the global one, whichever has made fewer mistakes on the key'));
      const hr = el('tr');
      for (const h of ['learner', 'rounds', 'served mistakes', 'own models\u2019', 'global model\u2019s', 'bound']) hr.append(cell('th', h));
      t.append(hr);
      for (const m of r.mix) {
        const tr = el('tr', { 'data-learner': m.learner });
        const mf = {};
        tr.append(cell('th', m.learner));
        for (const name of ['mix_rounds', 'mix_mistakes', 'mix_own', 'mix_global', 'mix_bound']) {
          mf[name] = field('td', p, m.learner, name);
          tr.append(mf[name]);
        }
        mix.set(m.learner, mf);
        t.append(tr);
      }
      root.append(t);
    }
    const top = el('table', { class: 'top-keys' });
    root.append(top);
    return { root, fields: f, mix, top, p };
  }

  function updateKeys(view, r) {
    const k = r.keys;
    set(view.fields.keys, k.keys);
    set(view.fields.keys_resident, k.resident);
    set(view.fields.keys_evicted, k.evicted);
    for (const m of r.mix || []) {
      const mf = view.mix.get(m.learner);
      if (!mf) continue;
      set(mf.mix_rounds, m.rounds);
      set(mf.mix_mistakes, m.mistakes);
      set(mf.mix_own, m.own_mistakes);
      set(mf.mix_global, m.global_mistakes);
      set(mf.mix_bound, m.bound, '\u2264 ' + fmt(m.bound) + (m.holds ? ' \u2713' : ' \u2717'));
      mf.mix_bound.classList.toggle('bad', !m.holds);
    }
    const names = (r.learners || []).map((l) => l.name);
    const top = r.top_keys || [];
    const served = top.some((t) => t.served);
    const rows = [el('caption', {}, 'top keys (the most records): mistakes of each key\u2019s own model' + (served ? ', and served' : ''))];
    const hr = el('tr');
    hr.append(cell('th', 'key'), cell('th', 'records'));
    for (const n of names) {
      hr.append(cell('th', n));
      if (served) hr.append(cell('th', n + ' served'));
    }
    rows.push(hr);
    for (const t of top) {
      const tr = el('tr', { 'data-key': t.key });
      tr.append(cell('th', t.key));
      const ev = field('td', view.p, null, 'key_events');
      ev.setAttribute('data-key', t.key);
      set(ev, t.events);
      tr.append(ev);
      names.forEach((n, i) => {
        const m = field('td', view.p, n, 'key_mistakes');
        m.setAttribute('data-key', t.key);
        set(m, (t.mistakes || [])[i]);
        tr.append(m);
        if (served) {
          const s = field('td', view.p, n, 'key_served');
          s.setAttribute('data-key', t.key);
          set(s, (t.served || [])[i]);
          tr.append(s);
        }
      });
      rows.push(tr);
    }
    if (top.length === 0) rows.push(el('tr', {}, 'no key yet'));
    view.top.replaceChildren(...rows);
  }

  // A learner's card of a partition's models per key: its totals, and as
  // charts, bars of the mistakes of the keys' own models, of what was
  // served and of the global model (against the mix's bound), and of the
  // top keys' own models.
  function updateKeyedLearner(view, l, r) {
    const f = view.fields;
    set(f.rounds, l.rounds);
    set(f.mistakes, l.mistakes);
    set(f.accuracy, l.accuracy, l.rounds > 0 ? (100 * l.accuracy).toFixed(2) + '%' : '\u2014');
    set(f.recent_accuracy, null);
    view.labels.recent_accuracy.parentNode.hidden = true;
    view.labels.default_rounds.parentNode.hidden = !l.default_labeled;
    view.labels.default_accuracy.parentNode.hidden = !l.default_labeled;
    set(f.loss, l.loss);
    set(f.regret, null);
    f.regret.title = 'each key\u2019s model has its own: v1/report?key=';
    set(f.bound, null);
    set(f.bound_kind, null, '');
    set(f.regret_bound, null);
    set(f.violations, l.bound_violations);
    set(f.certificate, null);
    set(f.state_sha256, null, '\u2014');
    f.state_sha256.title = 'each key\u2019s model has its own: v1/report?key=';
    set(view.badge, null, 'bound per key');
    view.badge.className = 'badge none';
    view.badge.title = 'a theorem is about one model: each key\u2019s bound is in its report (v1/report?key=)';
    const i = (r.learners || []).findIndex((x) => x.name === l.name);
    const m = (r.mix || []).find((x) => x.learner === l.name);
    const bars = [{ label: 'own models', value: l.mistakes }];
    if (m) bars.push({ label: 'served', value: m.mistakes }, { label: 'global model', value: m.global_mistakes });
    drawBars(view.mistakes, { title: 'mistakes over ' + fmt(r.keys.keys) + ' keys', bars: bars, bound: m ? m.bound : 0, rounds: l.rounds });
    const top = (r.top_keys || []).slice(0, 6);
    drawBars(view.regret, {
      title: 'mistakes of the top keys\u2019 models',
      bars: top.map((t) => ({ label: t.key, value: (t.mistakes || [])[i] || 0 })),
      bound: 0,
      rounds: l.rounds,
    });
  }

  // drawBars draws horizontal bars (label, value), and the bound as a
  // line when positive; a note instead while there is no round.
  function drawBars(node, spec) {
    const kids = [svg('text', { x: 2, y: 13, class: 'c-title' }, spec.title)];
    const pw = CW - M.l - M.r;
    const ph = CH - M.t - M.b;
    const L = 78;
    if (spec.rounds === 0 || spec.bars.length === 0) {
      kids.push(svg('rect', { x: M.l, y: M.t, width: pw, height: ph, class: 'frame' }));
      kids.push(svg('text', { x: M.l + pw / 2, y: M.t + ph / 2 + 4, class: 'c-empty' }, spec.rounds === 0 ? 'no labeled events yet' : 'no key yet'));
      node.replaceChildren(...kids);
      return;
    }
    let hi = spec.bound > 0 ? spec.bound : 0;
    for (const b of spec.bars) hi = Math.max(hi, b.value);
    if (hi <= 0) hi = 1;
    const w = CW - M.r - L - 40;
    const step = Math.min(28, (CH - M.t - 6) / spec.bars.length);
    spec.bars.forEach((b, k) => {
      const y = M.t + k * step;
      kids.push(svg('text', { x: L - 4, y: y + step / 2 + 3.5, class: 'tick y' }, b.label.length > 12 ? b.label.slice(0, 11) + '\u2026' : b.label));
      kids.push(svg('rect', { x: L, y: y + 3, width: Math.max(1, (b.value / hi) * w), height: step - 6, class: 'bar' }));
      kids.push(svg('text', { x: L + Math.max(1, (b.value / hi) * w) + 4, y: y + step / 2 + 3.5, class: 'tick' }, compact(b.value)));
    });
    if (spec.bound > 0) {
      const x = L + (spec.bound / hi) * w;
      kids.push(svg('line', { x1: x, x2: x, y1: M.t, y2: M.t + spec.bars.length * step, class: 'bound' }));
      const legend = svg('g', { class: 'legend' });
      legend.append(svg('text', { x: CW - M.r, y: 13, class: 'l-bound' }, 'served bound ' + compact(spec.bound)));
      kids.push(legend);
    }
    node.replaceChildren(...kids);
  }

  function updateModel(view, r, rt, violations, latency) {
    const f = view.fields;
    if (latency && f.latency_p50) {
      const h = recentLatency(latency);
      const p50 = quantile(0.5, h);
      const p99 = quantile(0.99, h);
      set(f.latency_p50, p50, millis(p50));
      set(f.latency_p99, p99, millis(p99));
    }
    set(f.events, r.events);
    set(f.events_per_second, rt, fmt(Math.round(rt)));
    set(f.labeled, r.labeled);
    set(f.predicted, r.predicted);
    set(f.invalid, r.invalid);
    f.invalid.classList.toggle('warn', r.invalid > 0);
    set(f.violations, violations);
    f.violations.classList.toggle('bad', violations > 0);
    set(f.consumer_lag, r.consumer_lag);
    const lb = r.labels;
    if (lb && f.pending) {
      set(f.pending, lb.pending);
      set(f.labels_joined, lb.joined);
      set(f.label_delay_mean, lb.delay.mean, fmt(Math.round(lb.delay.mean)));
      set(f.label_delay_max, lb.delay.max);
      const rejected = lb.late + lb.duplicate + lb.unknown;
      set(f.labels_rejected, rejected);
      f.labels_rejected.title = 'late ' + fmt(lb.late) + ', duplicate ' + fmt(lb.duplicate) + ', unknown ' + fmt(lb.unknown) +
        (lb.warning ? '\n' + lb.warning : '');
      // Most labels came after their events expired, or none was scored.
      f.labels_rejected.classList.toggle('warn', !!lb.warning);
    }

    const by = r.invalid_by_reason || {};
    const chips = [el('span', { class: 'reasons-label' }, 'invalid by reason')];
    const keys = Object.keys(by).sort();
    for (const reason of keys) {
      const chip = el('span', { class: 'chip' });
      const n = field('b', r.partition, null, 'invalid_by_reason');
      n.setAttribute('data-reason', reason);
      set(n, by[reason]);
      chip.append(el('span', {}, reason), n);
      chips.push(chip);
    }
    if (keys.length === 0) chips.push(el('span', { class: 'none' }, 'none'));
    view.reasons.replaceChildren(...chips);
  }

  function buildLearner(p, l) {
    const root = el('article', { class: 'learner', 'data-partition': String(p), 'data-learner': l.name });
    const head = el('header', { class: 'card-head' });
    const title = el('div', { class: 'title' });
    // The filter's verdict: the learner the configuration's answer names.
    const answer = field('span', p, l.name, 'answer');
    answer.className = 'answer';
    answer.title = "this learner's predictions are the filter's verdict (answer)";
    title.append(el('h3', {}, l.name), el('span', { class: 'algo' }, l.algorithm), answer);
    const badge = field('span', p, l.name, 'status');
    badge.className = 'badge';
    head.append(title, badge);

    const dl = el('dl', { class: 'stats' });
    const f = {};
    const labels = {};
    for (const [name, label] of [
      ['rounds', 'rounds'],
      ['mistakes', 'mistakes'],
      ['accuracy', 'accuracy'],
      ['recent_accuracy', 'accuracy, lately'],
      ['default_rounds', 'default rounds'],
      ['default_accuracy', 'default accuracy'],
      ['loss', 'loss'],
      ['regret', 'regret'],
      ['bound', 'bound'],
      ['regret_bound', 'regret bound'],
      ['violations', 'violations'],
      ['certificate', 'certificate'],
      ['state_sha256', 'state sha256'],
    ]) {
      f[name] = field('dd', p, l.name, name);
      labels[name] = stat(dl, label, f[name]);
    }
    f.bound_kind = field('span', p, l.name, 'bound_kind');
    f.bound_kind.className = 'kind';
    labels.bound.append(' ', f.bound_kind);
    f.state_sha256.classList.add('mono');

    const charts = el('div', { class: 'charts' });
    const mistakes = svg('svg', { viewBox: '0 0 ' + CW + ' ' + CH, class: 'chart', role: 'img', 'data-chart': 'mistakes' });
    const regret = svg('svg', { viewBox: '0 0 ' + CW + ' ' + CH, class: 'chart', role: 'img', 'data-chart': 'regret' });
    charts.append(mistakes, regret);
    root.append(head, dl, charts);
    return { root, badge, answer, fields: f, labels, mistakes, regret };
  }

  function updateLearner(view, l, c) {
    const f = view.fields;
    set(f.rounds, l.rounds);
    set(f.mistakes, l.mistakes);
    set(f.accuracy, l.accuracy, l.rounds > 0 ? (100 * l.accuracy).toFixed(2) + '%' : '—');
    const wa = windowAccuracy(c, 1000);
    set(f.recent_accuracy, wa ? wa.accuracy : null, wa ? (100 * wa.accuracy).toFixed(2) + '%' : '—');
    f.recent_accuracy.title = wa ? 'over the last ' + fmt(wa.rounds) + ' rounds' : 'after two points of the curve';
    // Rounds scored against the default label (expired events learned
    // with labels.default_label): apart from the real labels' rounds,
    // mistakes and accuracy above. The curves are the learner's updates,
    // both kinds.
    const dlab = l.default_labeled;
    view.labels.default_rounds.parentNode.hidden = !dlab;
    view.labels.default_accuracy.parentNode.hidden = !dlab;
    set(f.default_rounds, dlab ? dlab.rounds : null);
    set(f.default_accuracy, dlab ? dlab.accuracy : null, dlab && dlab.rounds > 0 ? (100 * dlab.accuracy).toFixed(2) + '%' : '—');
    f.default_rounds.title = f.default_accuracy.title = dlab ? fmt(dlab.rounds) + ' rounds, ' + fmt(dlab.mistakes) +
      ' mistakes scored against the default label, not counted in rounds, mistakes and accuracy' : '';
    if (dlab && dlab.rounds > 0) f.recent_accuracy.title += ', default-labeled rounds included';
    set(f.loss, l.loss);
    const rg = l.regret;
    set(f.regret, rg ? rg.value : null);
    f.regret.title = rg ? 'loss minus the loss of ' + words(rg.comparator) : 'no comparator';
    set(f.regret_bound, rg && rg.bound !== undefined ? rg.bound : null);
    const b = l.bound;
    set(f.bound, b ? b.value : null);
    // A regret bound is the bound itself: shown once, as the bound.
    view.labels.regret_bound.parentNode.hidden = !!b && b.kind === 'regret' && !!rg && rg.bound === b.value;
    set(f.bound_kind, b ? b.kind : null, b ? '(' + b.kind + ')' : '');
    set(f.violations, l.bound_violations);
    f.violations.classList.toggle('bad', l.bound_violations > 0);
    const cert = l.certificate;
    set(f.certificate, cert ? cert.value : null);
    f.certificate.title = cert ? words(cert.kind) : '';
    view.labels.certificate.textContent = cert ? words(cert.kind) : 'certificate';
    set(f.state_sha256, l.state_sha256, (l.state_sha256 || '').slice(0, 12) || '—');
    f.state_sha256.title = l.state_sha256 || '';

    // The badge says the bound's status, the report's words: green while
    // it holds, red when violated, amber when its premise is false (or,
    // with no bound, after violations), grey while assumed.
    const badge = view.badge;
    const warned = l.bound_violations > 0;
    const st = b ? b.status : '';
    if (!b) {
      set(badge, null, warned ? '\u26a0 ' + fmt(l.bound_violations) + ' violations' : 'no bound');
      badge.className = 'badge ' + (warned ? 'warn' : 'none');
      badge.title = 'this learner\u2019s theorem gives no bound';
    } else {
      // The bound is over every round learned, default-labeled ones too.
      const observed = b.kind === 'regret' && rg ? rg.value : l.mistakes + (dlab ? dlab.mistakes : 0);
      set(badge, st, (BADGE[st] || '') + STATUS[st]);
      badge.className = 'badge ' + ({ holds: 'ok', violated: 'bad', premise_false: 'warn' }[st] || 'none');
      badge.title = b.kind + ' ' + fmt(observed) + (b.holds ? ' \u2264 ' : ' > ') + 'bound ' + fmt(b.value) +
        (b.delay_rounds ? ' for labels up to ' + fmt(b.delay_rounds) + ' rounds late' : '') +
        (b.assumes ? '; the theorem assumes ' + b.assumes : '') + ' \u2014 ' + STATUS_TITLE[st] +
        (warned ? '; ' + fmt(l.bound_violations) + (l.bound_violations === 1 ? ' violation' : ' violations') : '');
    }
    view.root.classList.toggle('violated', st === 'violated');
    view.root.classList.toggle('warned', st === 'premise_false' || (warned && st !== 'violated'));

    const pts = c || { round: [], mistakes: [], regret: [], mistake_bound: [], regret_bound: [] };
    drawChart(view.mistakes, {
      title: 'mistakes',
      rounds: l.rounds,
      x: pts.round,
      y: pts.mistakes,
      bound: pts.mistake_bound,
      integer: true,
    });
    const hasRegret = !!rg || pts.regret.some((v) => v !== 0) || pts.regret_bound.some((v) => v > 0);
    if (hasRegret) {
      drawChart(view.regret, {
        title: 'regret vs ' + (rg ? words(rg.comparator) : 'its comparator'),
        rounds: l.rounds,
        x: pts.round,
        y: pts.regret,
        bound: pts.regret_bound,
      });
    } else {
      // No comparator, so no regret: the accuracy between points instead
      // of an empty box.
      drawChart(view.regret, {
        title: 'accuracy between points',
        rounds: l.rounds,
        x: pts.round,
        y: recentAccuracy(c),
        bound: [],
      });
    }
  }

  // ---- charts ------------------------------------------------------------

  const CW = 300;
  const CH = 168;
  const M = { l: 44, r: 12, t: 26, b: 22 };

  function niceStep(span, n, integer) {
    const raw = span / n;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const f = raw / p;
    let s = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * p;
    if (integer) s = Math.max(1, Math.round(s));
    return s;
  }

  function ticks(lo, hi, n, integer) {
    const s = niceStep(hi - lo, n, integer);
    const a = Math.floor(lo / s + 1e-9) * s;
    const b = Math.ceil(hi / s - 1e-9) * s;
    const out = [];
    for (let k = 0; a + k * s <= b + s / 2 && k < 50; k++) {
      const v = a + k * s;
      out.push(Math.abs(v) < s * 1e-9 ? 0 : v);
    }
    return out;
  }

  // points returns the polyline segments of (x, y) with keep(y), in the
  // plot area's coordinates.
  function segments(xs, ys, keep, sx, sy) {
    const out = [];
    let cur = [];
    for (let k = 0; k < xs.length && k < ys.length; k++) {
      if (!keep(ys[k])) {
        if (cur.length > 0) out.push(cur);
        cur = [];
        continue;
      }
      cur.push(sx(xs[k]).toFixed(1) + ',' + sy(ys[k]).toFixed(1));
    }
    if (cur.length > 0) out.push(cur);
    return out;
  }

  function drawChart(node, spec) {
    const pw = CW - M.l - M.r;
    const ph = CH - M.t - M.b;
    const kids = [svg('text', { x: 2, y: 13, class: 'c-title' }, spec.title)];
    const n = Math.min(spec.x.length, spec.y.length);
    if (spec.empty || n === 0) {
      kids.push(svg('rect', { x: M.l, y: M.t, width: pw, height: ph, class: 'frame' }));
      kids.push(svg('text', { x: M.l + pw / 2, y: M.t + ph / 2 + 4, class: 'c-empty' }, spec.empty || (spec.rounds > 0 ? 'no curve yet' : 'no labeled events yet')));
      node.replaceChildren(...kids);
      return;
    }
    const xs = spec.x;
    const ys = spec.y;
    const bs = spec.bound || [];
    const xmax = Math.max(xs[n - 1], 1);
    let cmin = 0;
    let cmax = 0;
    for (let k = 0; k < n; k++) {
      if (ys[k] < cmin) cmin = ys[k];
      if (ys[k] > cmax) cmax = ys[k];
    }
    let bmax = 0;
    let blast = 0;
    for (const b of bs) {
      if (b > 0) {
        blast = b;
        if (b > bmax) bmax = b;
      }
    }
    let lo = cmin;
    let hi = Math.max(cmax, bmax);
    // A bound far above the curve would flatten it: scale to the curve and
    // say where the bound is.
    const cspan = cmax - cmin;
    let offScale = false;
    if (bmax > cmax && cspan > 0 && cspan < 0.1 * (hi - lo)) {
      hi = cmax + 0.2 * cspan;
      offScale = true;
    }
    if (hi <= lo) hi = lo + 1;
    const yt = ticks(lo, hi, 4, spec.integer);
    lo = yt[0];
    hi = yt[yt.length - 1];
    const sx = (x) => (x / xmax) * pw;
    const sy = (y) => ((hi - y) / (hi - lo)) * ph;

    for (const t of yt) {
      const y = M.t + sy(t);
      kids.push(svg('line', { x1: M.l, x2: M.l + pw, y1: y, y2: y, class: t === 0 ? 'zero' : 'grid' }));
      kids.push(svg('text', { x: M.l - 5, y: y + 3.5, class: 'tick y' }, compact(t)));
    }
    for (const t of ticks(0, xmax, 4, true)) {
      if (t > xmax) continue;
      const x = M.l + sx(t);
      kids.push(svg('line', { x1: x, x2: x, y1: M.t + ph, y2: M.t + ph + 3, class: 'axis' }));
      // The last label would overflow the right edge: end it at its tick.
      const anchor = x > CW - M.r - 10 ? 'end' : 'middle';
      kids.push(svg('text', { x: anchor === 'end' ? x + 3 : x, y: CH - 6, class: 'tick x', 'text-anchor': anchor }, compact(t)));
    }
    kids.push(svg('rect', { x: M.l, y: M.t, width: pw, height: ph, class: 'frame' }));

    // The plot area: a nested svg clips what is off scale.
    const area = svg('svg', { x: M.l, y: M.t, width: pw, height: ph, overflow: 'hidden' });
    for (const seg of segments(xs, bs, (b) => b > 0, sx, sy)) {
      area.append(svg('polyline', { points: seg.join(' '), class: 'bound' }));
    }
    for (const seg of segments(xs.slice(0, n), ys, () => true, sx, sy)) {
      area.append(svg('polyline', { points: seg.join(' '), class: 'curve' }));
    }
    kids.push(area);

    // The bound's key, right-aligned on the title line (the title names the
    // curve; the page's footer keys both); an arrow when it is off scale.
    if (bmax > 0) {
      const label = offScale ? 'bound ' + compact(blast) + ' \u2191' : 'bound';
      const x = CW - M.r;
      const w = 6 * label.length;
      const legend = svg('g', { class: 'legend' });
      legend.append(svg('text', { x: x, y: 13, class: 'l-bound' }, label));
      legend.append(svg('line', { x1: x - w - 20, x2: x - w - 6, y1: 9.5, y2: 9.5, class: 'bound' }));
      kids.push(legend);
    }
    node.replaceChildren(...kids);
  }

  tick();
})();
