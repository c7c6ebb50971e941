// The HTML report's script (ppoga_dspy/report/html.py inlines it): draws the Plotly figures, draws and
// filters the question table from the page's JSON index (a page of rows at a time), and opens a question's
// reasoning view (plan, step cycles, corrections, answer, the evidence chains drawn with Plotly) from its part
// file, FILE.parts/part-NNNN.js, loaded on demand with a <script> element (works from file://, no server).
// Every text from a run file is set with textContent, never parsed as HTML, so a question or a model reply
// cannot inject markup.
(function () {
  const DATA = JSON.parse(document.getElementById('report-data').textContent);
  const config = {displaylogo: false, responsive: true};
  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  for (const [id, figure] of Object.entries(DATA.figures)) {
    const div = document.getElementById(id);
    if (div) Plotly.newPlot(div, figure.data, figure.layout, config);
  }

  // -- the question table: rows drawn from DATA.questions, a page at a time; filters over every question --
  const QUESTIONS = DATA.questions;  // [{id, q: text, h: hops, t: type, r: per run [right, corrected, answer, calls, s] | null}]
  const PAGE_ROWS = 1000;
  const tbody = document.querySelector('#questions tbody');
  const more = document.getElementById('questions-more');
  const controls = Array.from(document.querySelectorAll('.filters [data-filter]'));
  const shown = document.getElementById('shown-count');
  let matching = QUESTIONS.map((_, i) => i);
  let drawn = 0;
  function cell(tr, cls, text) { tr.appendChild(el('td', cls, text)); }
  function tableRow(q) {
    const tr = el('tr');
    Object.assign(tr.dataset, {id: q.id, hops: q.h, type: q.t});
    cell(tr, '', q.id); cell(tr, '', q.q); cell(tr, '', q.h); cell(tr, '', q.t);
    q.r.forEach((run, i) => {
      if (!run) {
        tr.dataset['r' + i] = 'absent';
        cell(tr, 'small', 'not run'); cell(tr, ''); cell(tr, ''); cell(tr, '');
        return;
      }
      const [right, corrected, answer, calls, seconds] = run;
      tr.dataset['r' + i] = right ? 'right' : 'wrong';
      tr.dataset['c' + i] = corrected ? 'yes' : 'no';
      cell(tr, right ? 'right' : 'wrong', (right ? '✓' : '✗') + (corrected ? ' ↻' : ''));
      cell(tr, '', answer); cell(tr, 'num', calls); cell(tr, 'num', Number(seconds).toFixed(2));
    });
    tr.addEventListener('click', () => openQuestion(q.id));
    return tr;
  }
  function drawMore() {
    const end = Math.min(matching.length, drawn + PAGE_ROWS);
    const rows = document.createDocumentFragment();
    for (let k = drawn; k < end; k += 1) rows.appendChild(tableRow(QUESTIONS[matching[k]]));
    tbody.appendChild(rows);
    drawn = end;
    more.hidden = drawn >= matching.length;
    more.textContent = `show ${Math.min(PAGE_ROWS, matching.length - drawn)} more of ${matching.length - drawn}`;
  }
  function searchText(q) {
    if (q.search === undefined) q.search = [q.id, q.q, q.h, q.t, ...q.r.map((r) => (r ? r[2] : ''))].join(' ').toLowerCase();
    return q.search;
  }
  function matches(q, wanted) {
    for (const [key, value] of wanted) {
      let found;
      if (key === 'text') { if (!searchText(q).includes(value)) return false; continue; }
      if (key === 'hops') found = q.h;
      else if (key === 'type') found = q.t;
      else {
        const run = q.r[Number(key.slice(1))];
        if (!run) return false;
        found = key[0] === 'r' ? (run[0] ? 'right' : 'wrong') : (run[1] ? 'yes' : 'no');
      }
      if (String(found).toLowerCase() !== value) return false;
    }
    return true;
  }
  function applyFilters() {
    const wanted = controls.map((c) => [c.dataset.filter, c.value.trim().toLowerCase()]).filter(([, v]) => v);
    matching = [];
    QUESTIONS.forEach((q, i) => { if (matches(q, wanted)) matching.push(i); });
    tbody.replaceChildren();
    drawn = 0;
    drawMore();
    shown.textContent = String(matching.length);
  }
  for (const c of controls) c.addEventListener('input', applyFilters);
  more.addEventListener('click', drawMore);
  drawMore();

  // -- the question detail: part files loaded on demand -------------------------------------------
  const PARTS = DATA.parts;  // {dir, size, count, key}
  const indexOf = new Map(QUESTIONS.map((q, i) => [q.id, i]));
  const partLoads = new Map();  // part number -> Promise of its questions
  const delivered = new Map();
  window.ppogaReportPart = (payload) => {
    if (payload && payload.key === PARTS.key) delivered.set(payload.part, payload.questions);
  };
  function loadPart(part) {
    if (!partLoads.has(part)) {
      const file = PARTS.dir + '/part-' + String(part + 1).padStart(4, '0') + '.js';
      partLoads.set(part, new Promise((resolve, reject) => {
        const script = document.createElement('script');
        script.src = encodeURIComponent(PARTS.dir) + '/part-' + String(part + 1).padStart(4, '0') + '.js';
        script.onload = () => (delivered.has(part) ? resolve(delivered.get(part))
          : reject(new Error(file + ' belongs to another report; write the report again')));
        script.onerror = () => { partLoads.delete(part); reject(new Error(file + ' could not be read; keep the ' +
          PARTS.dir + ' folder beside the page')); };
        document.head.appendChild(script);
      }));
    }
    return partLoads.get(part);
  }

  // -- a question's reasoning view ---------------------------------------------------------------
  const viewer = document.getElementById('viewer');
  const body = document.getElementById('viewer-body');
  function list(parent, items, cls) {
    if (!items || !items.length) return;
    const ul = el('ul', cls);
    for (const item of items) ul.appendChild(el('li', '', item));
    parent.appendChild(ul);
  }
  function field(parent, label, text, pre) {
    if (!text) return;
    const p = el('div');
    p.appendChild(el('span', 'label', label + ': '));
    p.appendChild(el(pre ? 'pre' : 'span', pre ? 'obs' : '', text));
    parent.appendChild(p);
  }
  function drawGraph(div, graph) {
    const colour = {topic: '#0969da', answer: '#1a7f37', mediator: '#8c959f', other: '#57606a'};
    const pos = new Map(graph.nodes.map((n) => [n.id, n]));
    const annotations = [];
    const mid = {x: [], y: [], text: []};
    for (const e of graph.edges) {
      const s = pos.get(e.source), t = pos.get(e.target);
      if (!s || !t) continue;
      annotations.push({x: t.x, y: t.y, ax: s.x, ay: s.y, xref: 'x', yref: 'y', axref: 'x', ayref: 'y',
        showarrow: true, arrowhead: 2, arrowsize: 1.2, standoff: 12, startstandoff: 12, arrowcolor: '#8c959f', text: ''});
      mid.x.push((s.x + t.x) / 2); mid.y.push((s.y + t.y) / 2 + 0.12);
      mid.text.push(e.relation.split('.').slice(-1)[0]);
    }
    const nodes = {x: graph.nodes.map((n) => n.x), y: graph.nodes.map((n) => n.y), text: graph.nodes.map((n) => n.label),
      mode: 'markers+text', textposition: 'bottom center', type: 'scatter', hovertext: graph.nodes.map((n) => n.id + ' (' + n.kind + ')'),
      hoverinfo: 'text', marker: {size: 16, color: graph.nodes.map((n) => colour[n.kind] || '#57606a')}};
    const labels = {x: mid.x, y: mid.y, text: mid.text, mode: 'text', type: 'scatter', hoverinfo: 'skip',
      textfont: {size: 10, color: '#6e7781'}};
    Plotly.newPlot(div, [labels, nodes], {annotations: annotations, showlegend: false, height: 260,
      margin: {t: 10, b: 10, l: 10, r: 10}, xaxis: {visible: false, range: [-0.6, Math.max(1, ...nodes.x) + 0.6]},
      yaxis: {visible: false, range: [Math.min(-1, ...nodes.y) - 0.6, Math.max(1, ...nodes.y) + 0.6]}}, config);
  }
  function runView(name, view) {
    const box = el('div', 'run-view');
    box.dataset.run = name;
    const head = el('h3', '', name + ': ');
    head.appendChild(el('span', view.hit ? 'right' : 'wrong', view.hit ? 'right' : 'wrong'));
    box.appendChild(head);
    box.appendChild(el('div', 'small', `${view.calls} LM calls, ${view.tokens} tokens, ${view.seconds.toFixed(2)} s; ` +
      `status ${view.status}` + (view.error ? ': ' + view.error : '')));
    if (!view.kept) box.appendChild(el('p', 'note', 'This row was written before rows kept the plan and step cycles.'));
    field(box, 'Topic entities', view.topics.join(', '));
    view.archived.forEach((plan, i) => field(box, `Plan ${i + 1} (abandoned)`, plan.join(' | ')));
    if (view.plan.length) {
      box.appendChild(el('div', 'label', 'Plan'));
      const ol = el('ol', 'plan');
      for (const s of view.plan) {
        ol.appendChild(el('li', s.status.replace(/\s+/g, '-'), `${s.objective} [${s.status}]` + (s.outcome ? ' → ' + s.outcome : '')));
      }
      box.appendChild(ol);
    }
    list(box, view.before, 'note');
    for (const c of view.cycles) {
      const card = el('div', 'cycle ' + c.decision);
      card.appendChild(el('div', '', `step ${c.step}, attempt ${c.attempt}: ${c.objective}`)).style.fontWeight = '600';
      field(card, 'predicted', c.prediction);
      field(card, 'observed', c.observation, true);
      field(card, 'selected because', c.rationale);
      field(card, 'thought', c.thought);
      field(card, 'decision', c.decision + (c.reason ? ' (' + c.reason + ')' : ''));
      list(card, c.during, 'note');
      const after = el('ul', 'note');
      for (const text of c.after) after.appendChild(el('li', text.startsWith('rule:') ? 'override' : '', text));
      if (c.after.length) card.appendChild(after);
      box.appendChild(card);
    }
    list(box, view.answer_notes, 'note');
    field(box, 'Answer', view.answers.join(', ') || '(no answer)');
    field(box, 'Reasoning', view.reasoning);
    if (view.graph.nodes.length) {
      box.appendChild(el('div', 'label', 'Evidence chains'));
      const div = el('div', 'graph');
      box.appendChild(div);
      box.graphTodo = () => drawGraph(div, view.graph);
    }
    return box;
  }
  function openQuestion(id) {
    const index = indexOf.get(id);
    if (index === undefined) return;
    const q = QUESTIONS[index];
    body.replaceChildren();
    body.appendChild(el('h2', '', q.q));
    const status = el('div', 'small', `id ${q.id}; loading its reasoning…`);
    body.appendChild(status);
    viewer.hidden = false;
    viewer.dataset.question = id;
    if (location.hash !== '#q=' + encodeURIComponent(id)) history.replaceState(null, '', '#q=' + encodeURIComponent(id));
    const part = Math.floor(index / PARTS.size);
    loadPart(part).then((questions) => {
      if (viewer.dataset.question !== id) return;  // another question was opened meanwhile
      showDetail(q, questions[index - part * PARTS.size], status);
    }, (error) => { status.textContent = `id ${q.id}: ${error.message}`; status.className = 'warning'; });
  }
  function showDetail(q, detail, status) {
    status.textContent = `id ${q.id}; gold: ${detail.gold.join(', ') || '(none)'}`;
    const runs = el('div', 'runs');
    const todo = [];
    DATA.runs.forEach((name, i) => {
      const view = detail.views[i];
      if (!view) { runs.appendChild(el('div', 'run-view note', name + ': not in this run')); return; }
      const box = runView(name, view);
      runs.appendChild(box);
      if (box.graphTodo) todo.push(box.graphTodo);
    });
    body.appendChild(runs);
    todo.forEach((draw) => draw());
  }
  function closeViewer() { viewer.hidden = true; history.replaceState(null, '', '#'); }
  document.querySelectorAll('a[data-open]').forEach((a) => a.addEventListener('click', (event) => {
    event.preventDefault(); openQuestion(a.dataset.open);
  }));
  document.getElementById('viewer-close').addEventListener('click', closeViewer);
  document.addEventListener('keydown', (event) => { if (event.key === 'Escape') closeViewer(); });
  const wanted = decodeURIComponent((location.hash.match(/^#q=(.+)$/) || [])[1] || '');
  if (wanted) openQuestion(wanted);
  document.body.dataset.ready = 'true';
})();
