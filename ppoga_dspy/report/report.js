// The HTML report's script (ppoga_dspy/report/html.py inlines it): draws the Plotly figures,
// filters the question table, and opens a question's reasoning view (plan, step cycles, corrections,
// answer, the evidence chains drawn with Plotly) from the page's JSON data. Every text from a run file
// is set with textContent, never parsed as HTML, so a question or a model reply cannot inject markup.
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

  // -- the question table's filters -------------------------------------------------------------
  const rows = Array.from(document.querySelectorAll('#questions tbody tr'));
  const controls = Array.from(document.querySelectorAll('.filters [data-filter]'));
  const shown = document.getElementById('shown-count');
  function applyFilters() {
    const wanted = {};
    for (const c of controls) wanted[c.dataset.filter] = c.value.trim().toLowerCase();
    let count = 0;
    for (const row of rows) {
      let ok = true;
      for (const [key, value] of Object.entries(wanted)) {
        if (!value) continue;
        if (key === 'text') { ok = row.textContent.toLowerCase().includes(value); }
        else { ok = (row.dataset[key] || '').toLowerCase() === value; }
        if (!ok) break;
      }
      row.hidden = !ok;
      if (ok) count += 1;
    }
    shown.textContent = String(count);
  }
  for (const c of controls) c.addEventListener('input', applyFilters);

  // -- a question's reasoning view ---------------------------------------------------------------
  const viewer = document.getElementById('viewer');
  const body = document.getElementById('viewer-body');
  const byId = new Map(DATA.questions.map((q) => [q.id, q]));
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
    const q = byId.get(id);
    if (!q) return;
    body.replaceChildren();
    body.appendChild(el('h2', '', q.question));
    body.appendChild(el('div', 'small', `id ${q.id}; gold: ${q.gold.join(', ') || '(none)'}`));
    const runs = el('div', 'runs');
    const todo = [];
    DATA.runs.forEach((name, i) => {
      const view = q.views[i];
      if (!view) { runs.appendChild(el('div', 'run-view note', name + ': not in this run')); return; }
      const box = runView(name, view);
      runs.appendChild(box);
      if (box.graphTodo) todo.push(box.graphTodo);
    });
    body.appendChild(runs);
    viewer.hidden = false;
    viewer.dataset.question = id;
    todo.forEach((draw) => draw());
    if (location.hash !== '#q=' + encodeURIComponent(id)) history.replaceState(null, '', '#q=' + encodeURIComponent(id));
  }
  function closeViewer() { viewer.hidden = true; history.replaceState(null, '', '#'); }
  for (const row of rows) row.addEventListener('click', () => openQuestion(row.dataset.id));
  document.querySelectorAll('a[data-open]').forEach((a) => a.addEventListener('click', (event) => {
    event.preventDefault(); openQuestion(a.dataset.open);
  }));
  document.getElementById('viewer-close').addEventListener('click', closeViewer);
  document.addEventListener('keydown', (event) => { if (event.key === 'Escape') closeViewer(); });
  const wanted = decodeURIComponent((location.hash.match(/^#q=(.+)$/) || [])[1] || '');
  if (wanted) openQuestion(wanted);
  document.body.dataset.ready = 'true';
})();
