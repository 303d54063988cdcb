// canary-audit dashboard page. Every value from the server is set with textContent or as an
// attribute through the DOM API, never as HTML: grid names, cell values and error text are data.
'use strict';

(function () {
  const state = { snapshot: null, sort: { key: null, dir: 1 }, filter: '', openRun: null, plotKey: null };
  const params = new URLSearchParams(location.search);
  if (params.get('token')) {
    sessionStorage.setItem('canary-token', params.get('token'));
    history.replaceState(null, '', location.pathname + location.hash);
  }
  const token = () => sessionStorage.getItem('canary-token') || '';

  /** el('td', {class: 'x'}, 'text', child): strings become text nodes. */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, String(v));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function duration(s) {
    if (s === null || s === undefined || !Number.isFinite(s)) return '-';
    s = Math.max(0, Math.round(s));
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm' + String(s % 60).padStart(2, '0') + 's';
    const h = Math.floor(s / 3600);
    return h + 'h' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + 'm';
  }
  const num = (v, d) => (v === null || v === undefined ? '-' : Number(v).toFixed(d));

  function sparkline(points) {
    const w = 90,
      h = 20;
    const ns = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('class', 'spark');
    svg.setAttribute('width', w);
    svg.setAttribute('height', h);
    if (points && points.length > 1) {
      const xs = points.map((p) => p[0]),
        ys = points.map((p) => p[1]);
      const x0 = Math.min(...xs),
        x1 = Math.max(...xs),
        y0 = Math.min(...ys),
        y1 = Math.max(...ys);
      const sx = (x) => (x1 === x0 ? 0 : ((x - x0) / (x1 - x0)) * (w - 2) + 1);
      const sy = (y) => (y1 === y0 ? h / 2 : h - 1 - ((y - y0) / (y1 - y0)) * (h - 2));
      const path = document.createElementNS(ns, 'polyline');
      path.setAttribute('points', points.map((p) => sx(p[0]).toFixed(1) + ',' + sy(p[1]).toFixed(1)).join(' '));
      path.setAttribute('fill', 'none');
      path.setAttribute('stroke', '#1565c0');
      path.setAttribute('stroke-width', '1.2');
      svg.append(path);
      const title = document.createElementNS(ns, 'title');
      title.textContent =
        'loss ' + ys[0].toFixed(3) + ' → ' + ys[ys.length - 1].toFixed(3) + ' over ' + points.length + ' points';
      svg.append(title);
    }
    return svg;
  }

  function progressBar(a) {
    const pct = (n) => (a.total ? (100 * n) / a.total : 0);
    let left = 0;
    const part = (cls, n) => {
      const s = el('span', { class: cls, style: 'left:' + left + '%;width:' + pct(n) + '%' });
      left += pct(n);
      return s;
    };
    return el(
      'span',
      {
        class: 'bar',
        title: a.completed + ' completed, ' + a.failed + ' failed, ' + a.cancelled + ' cancelled of ' + a.total,
      },
      part('done', a.completed),
      part('failed', a.failed),
      part('cancelled', a.cancelled),
      part('active', a.active),
    );
  }

  async function post(url) {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'X-Canary-Token': token(), 'Content-Type': 'application/json' },
      body: '{}',
    });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) showError(body.error || res.statusText);
    return res.ok;
  }

  function showError(text) {
    const box = document.getElementById('error');
    box.hidden = !text;
    box.textContent = text || '';
  }

  // ---- views ----

  function auditsView(s) {
    const rows = s.audits.map((a) =>
      el(
        'tr',
        { 'data-audit': a.audit_id },
        el('td', {}, el('a', { href: '#/audit/' + encodeURIComponent(a.audit_id), class: 'audit-name' }, a.name)),
        el('td', { class: 'muted' }, a.audit_id),
        el('td', { class: 'state state-' + a.state }, a.state),
        el('td', {}, progressBar(a), ' ', a.completed + a.failed + a.cancelled + '/' + a.total),
        el('td', { class: 'num' }, a.completed),
        el('td', { class: 'num' }, a.failed),
        el('td', { class: 'num' }, a.cancelled),
        el('td', { class: 'num' }, a.active),
        el('td', { class: 'num' }, a.waiting),
        el('td', { class: 'num eta' }, a.eta_s === null ? '-' : duration(a.eta_s)),
        s.actions
          ? el(
              'td',
              {},
              a.state === 'running' || a.state === 'queued'
                ? el(
                    'button',
                    {
                      class: 'cancel',
                      onclick: () => {
                        if (confirm('Cancel audit ' + a.name + '?'))
                          post('/api/audits/' + encodeURIComponent(a.audit_id) + '/cancel');
                      },
                    },
                    'cancel',
                  )
                : null,
            )
          : null,
      ),
    );
    return el(
      'section',
      {},
      el('h2', {}, 'Audits'),
      s.audits.length === 0
        ? el(
            'p',
            { class: 'muted' },
            s.queue === 'unreachable'
              ? 'The queue is unreachable and no audit folder was found under the artifact root.'
              : 'No audits in the queue. Submit one with canary-audit submit GRID.',
          )
        : el(
            'table',
            { id: 'audits' },
            el(
              'thead',
              {},
              el(
                'tr',
                {},
                ['name', 'id', 'state', 'progress', 'completed', 'failed', 'cancelled', 'active', 'waiting', 'ETA'].map(
                  (h) => el('th', {}, h),
                ),
                s.actions ? el('th', {}, 'actions') : null,
              ),
            ),
            el('tbody', {}, rows),
          ),
    );
  }

  function runColumns(a) {
    const axes = a.axes.map((axis) => ({
      key: 'axis:' + axis,
      label: axis,
      get: (r) => r.cell[axis] ?? '-',
      cls: 'axis',
    }));
    return axes.concat([
      { key: 'state', label: 'state', get: (r) => r.state, cls: 'state' },
      {
        key: 'update',
        label: 'update/total',
        get: (r) => (r.update === null ? -1 : r.update),
        show: (r) => (r.update === null ? '-' : r.update + '/' + (r.total ?? '?')),
        cls: 'num',
      },
      { key: 'curve', label: 'loss curve', get: (r) => r.loss ?? Infinity, show: (r) => sparkline(r.loss_curve) },
      { key: 'loss', label: 'loss', get: (r) => r.loss ?? Infinity, show: (r) => num(r.loss, 3), cls: 'num' },
      { key: 'rows', label: 'rows/s', get: (r) => r.rows_per_s ?? -1, show: (r) => num(r.rows_per_s, 1), cls: 'num' },
      {
        key: 'phase',
        label: 'phase',
        get: (r) => r.phase ?? '',
        show: (r) => (r.phase ? r.phase + (r.eval ? ' ' + r.eval.done + '/' + r.eval.total : '') : '-'),
      },
      { key: 'eta', label: 'ETA', get: (r) => r.eta_s ?? Infinity, show: (r) => duration(r.eta_s), cls: 'num' },
      {
        key: 'attempt',
        label: 'attempt',
        get: (r) => r.attempt,
        show: (r) => (r.attempt ? r.attempt + '/' + r.max_attempts : '-'),
        cls: 'num',
      },
      { key: 'host', label: 'host', get: (r) => r.host ?? '' },
      { key: 'gpu', label: 'GPU', get: (r) => r.gpu ?? '' },
      { key: 'run', label: 'run', get: (r) => r.run_id, cls: 'muted' },
    ]);
  }

  function auditView(s, id) {
    const a = s.audits.find((x) => x.audit_id === id);
    if (!a)
      return el('p', {}, 'No audit ', el('code', {}, id), ' in the queue. ', el('a', { href: '#/' }, 'All audits'));
    const cols = runColumns(a);
    const needle = state.filter.toLowerCase();
    let runs = a.runs.filter(
      (r) =>
        !needle ||
        cols.some((c) => String(c.get(r)).toLowerCase().includes(needle)) ||
        r.cell_id.toLowerCase().includes(needle),
    );
    const sortCol = cols.find((c) => c.key === state.sort.key);
    if (sortCol)
      runs = runs.slice().sort((x, y) => {
        const p = sortCol.get(x),
          q = sortCol.get(y);
        return (p < q ? -1 : p > q ? 1 : 0) * state.sort.dir;
      });
    const head = el(
      'tr',
      {},
      cols.map((c) =>
        el(
          'th',
          {
            class: 'sortable' + (state.sort.key === c.key ? (state.sort.dir > 0 ? ' sorted-asc' : ' sorted-desc') : ''),
            'data-col': c.key,
            onclick: () => {
              state.sort = { key: c.key, dir: state.sort.key === c.key ? -state.sort.dir : 1 };
              render();
            },
          },
          c.label,
        ),
      ),
      s.actions ? el('th', {}, 'actions') : null,
    );
    const body = [];
    for (const r of runs) {
      body.push(
        el(
          'tr',
          {
            'data-run': r.run_id,
            class: 'run',
            onclick: () => {
              state.openRun = state.openRun === r.run_id ? null : r.run_id;
              render();
            },
          },
          cols.map((c) => {
            const v = c.show ? c.show(r) : c.get(r);
            return el('td', { class: (c.cls || '') + (c.key === 'state' ? ' state-' + r.state : '') }, v);
          }),
          s.actions
            ? el(
                'td',
                {},
                r.state === 'failed'
                  ? el(
                      'button',
                      {
                        class: 'retry',
                        onclick: (e) => {
                          e.stopPropagation();
                          post('/api/runs/' + encodeURIComponent(r.run_id) + '/retry');
                        },
                      },
                      'retry',
                    )
                  : null,
              )
            : null,
        ),
      );
      if (r.failure)
        body.push(
          el(
            'tr',
            { class: 'failure-row', 'data-failure': r.run_id },
            el('td', { colspan: cols.length + 1 }, el('div', { class: 'failure' }, r.failure)),
          ),
        );
      if (state.openRun === r.run_id)
        body.push(
          el(
            'tr',
            { class: 'detail-row' },
            el(
              'td',
              { colspan: cols.length + 1 },
              el('div', { id: 'run-detail', 'data-run': r.run_id }, 'loading logs…'),
            ),
          ),
        );
    }
    const summary = el(
      'p',
      { class: 'summary' },
      el(
        'span',
        {},
        el('b', {}, 'state '),
        el('span', { class: 'state state-' + a.state, id: 'audit-state' }, a.state),
      ),
      el('span', {}, el('b', {}, 'runs '), a.total),
      el('span', {}, el('b', {}, 'completed '), a.completed),
      el('span', {}, el('b', {}, 'failed '), a.failed),
      el('span', {}, el('b', {}, 'cancelled '), a.cancelled),
      el('span', {}, el('b', {}, 'active '), a.active),
      el('span', {}, el('b', {}, 'waiting '), a.waiting),
      el('span', {}, el('b', {}, 'ETA '), a.eta_s === null ? '-' : duration(a.eta_s)),
      a.looks ? el('span', { id: 'audit-looks' }, el('b', {}, 'looks '), a.looks) : null,
      s.actions && (a.state === 'running' || a.state === 'queued')
        ? el(
            'button',
            {
              class: 'cancel',
              onclick: () => {
                if (confirm('Cancel audit ' + a.name + '?'))
                  post('/api/audits/' + encodeURIComponent(a.audit_id) + '/cancel');
              },
            },
            'cancel audit',
          )
        : null,
    );
    const origin =
      a.source === 'disk'
        ? el(
            'p',
            { class: 'origin', id: 'audit-origin' },
            a.state === 'finished'
              ? 'Finished: every run has its result or failure on disk. '
              : 'Stopped before every run finished; not in the queue. ',
            'Read from ',
            el('code', {}, a.audit_dir || ''),
            '.',
            a.report
              ? el(
                  'span',
                  {},
                  ' ',
                  el(
                    'a',
                    {
                      id: 'report-link',
                      href: '/api/audits/' + encodeURIComponent(a.audit_id) + '/report',
                      target: '_blank',
                      rel: 'noopener',
                    },
                    'Open the report',
                  ),
                )
              : null,
          )
        : null;
    return el(
      'section',
      {},
      el(
        'h2',
        {},
        el('a', { href: '#/' }, 'Audits'),
        ' / ',
        el('span', { id: 'audit-name' }, a.name),
        ' ',
        el('span', { class: 'muted' }, a.audit_id),
      ),
      summary,
      origin,
      a.look_lines?.length
        ? el(
            'ul',
            { id: 'audit-look-lines' },
            a.look_lines.map((l) => el('li', {}, l)),
          )
        : null,
      el('table', { id: 'runs' }, el('thead', {}, head), el('tbody', {}, body)),
      el('h3', {}, 'Exposure vs dose'),
      el(
        'div',
        { id: 'plot' },
        el(
          'span',
          { class: 'muted' },
          a.completed > 0 ? 'plotting ' + a.completed + ' finished run(s)…' : 'waiting for the first finished run…',
        ),
      ),
    );
  }

  function fleetView(s) {
    // The Slurm job a worker runs in: array job_task (job id) on its node.
    const slurmText = (w) => {
      if (!w.slurm) return '';
      const id =
        w.slurm.array_job_id && w.slurm.array_task_id
          ? w.slurm.array_job_id + '_' + w.slurm.array_task_id + ' (job ' + w.slurm.job_id + ')'
          : w.slurm.job_id;
      return id + (w.slurm.node ? ' on ' + w.slurm.node : '');
    };
    const gpuText = (w) =>
      w.gpus.length === 0
        ? 'cpu'
        : w.gpus
            .map(
              (g) =>
                'gpu' +
                g.index +
                ' ' +
                (g.util ?? '?') +
                '% ' +
                (g.mem_used_mib ?? '?') +
                '/' +
                (g.mem_total_mib ?? '?') +
                ' MiB',
            )
            .join('; ');
    const runText = (w) =>
      w.slots
        .filter((x) => x.run_id)
        .map((x) => (x.gpu === null ? 'cpu' : 'gpu' + x.gpu) + ': ' + x.run_id)
        .join('; ') || '-';
    return el(
      'section',
      {},
      el('h2', {}, 'Fleet'),
      el('h3', {}, 'Hosts'),
      s.hosts.length === 0
        ? el('p', { class: 'muted' }, 'No worker has sent a heartbeat. Start one with canary-audit worker.')
        : el(
            'table',
            { id: 'hosts' },
            el(
              'thead',
              {},
              el(
                'tr',
                {},
                ['host', 'workers', 'busy', 'idle', 'lost', 'GPUs', 'active runs', 'rows/s'].map((h) =>
                  el('th', {}, h),
                ),
              ),
            ),
            el(
              'tbody',
              {},
              s.hosts.map((h) =>
                el(
                  'tr',
                  { 'data-host': h.host },
                  el('td', {}, h.host),
                  el('td', { class: 'num' }, h.workers),
                  el('td', { class: 'num' }, h.busy),
                  el('td', { class: 'num' }, h.idle),
                  el('td', { class: 'num' }, h.lost),
                  el('td', { class: 'num' }, h.gpus),
                  el('td', { class: 'num' }, h.runs_active),
                  el('td', { class: 'num throughput' }, h.rows_per_s.toFixed(1)),
                ),
              ),
            ),
          ),
      el('h3', {}, 'Workers'),
      s.workers.length === 0
        ? null
        : el(
            'table',
            { id: 'workers' },
            el(
              'thead',
              {},
              el(
                'tr',
                {},
                [
                  'host',
                  'pid',
                  'state',
                  'last heartbeat',
                  'slots',
                  'current runs',
                  'GPUs (util, memory)',
                  'runner',
                  'Slurm job',
                  'since',
                ].map((h) => el('th', {}, h)),
              ),
            ),
            el(
              'tbody',
              {},
              s.workers.map((w) =>
                el(
                  'tr',
                  { 'data-worker': w.worker_id },
                  el('td', {}, w.host),
                  el('td', { class: 'num' }, w.pid),
                  el('td', { class: 'state state-' + w.state }, w.state),
                  el('td', { class: 'num' }, duration(w.age_s) + ' ago'),
                  el('td', { class: 'num' }, w.slots.length),
                  el('td', {}, runText(w)),
                  el('td', {}, gpuText(w)),
                  el('td', {}, w.runner),
                  el('td', { class: 'slurm' }, slurmText(w)),
                  el('td', { class: 'muted' }, w.started),
                ),
              ),
            ),
          ),
    );
  }

  // ---- plot and run details (fetched on demand, not on every snapshot) ----

  async function loadPlot(a) {
    const key = a.audit_id + '|' + a.completed;
    if (state.plotKey === key) return;
    state.plotKey = key;
    const res = await fetch('/api/audits/' + encodeURIComponent(a.audit_id) + '/plot');
    const body = await res.json().catch(() => ({ spec: null, reason: 'no plot' }));
    // A slower answer for fewer finished runs must not overwrite a newer plot.
    if (state.plotKey !== key) return;
    const box = document.getElementById('plot');
    if (!box) return;
    box.replaceChildren();
    // Verdicts of the finished runs so far (200 resamples: the report's own, with 2,000, may differ slightly).
    if (Array.isArray(body.verdicts) && body.verdicts.length > 0) {
      box.append(el('ul', { id: 'verdicts' }, ...body.verdicts.map((v) => el('li', {}, String(v)))));
    }
    if (!body.spec) {
      box.append(el('span', { class: 'muted' }, body.reason || 'no plot yet'));
      return;
    }
    try {
      const target = el('div', {});
      box.append(target);
      await window.vegaEmbed(target, body.spec, { actions: false, renderer: 'svg' });
    } catch (e) {
      box.append(el('span', { class: 'muted' }, 'plot failed: ' + e.message));
    }
  }

  async function loadDetail(runId) {
    const res = await fetch('/api/runs/' + encodeURIComponent(runId));
    const body = await res.json().catch(() => ({}));
    const box = document.getElementById('run-detail');
    if (!box || box.getAttribute('data-run') !== runId) return;
    box.replaceChildren(
      el('b', {}, 'trainer log (tail)'),
      el('pre', { class: 'log trainer-log' }, body.trainer_log ? body.trainer_log.join('\n') : '(not on this host)'),
      el('b', {}, 'job log (tail)'),
      el('pre', { class: 'log job-log' }, (body.job_log || []).join('\n')),
    );
  }

  function route() {
    const h = decodeURIComponent(location.hash.replace(/^#/, '')) || '/';
    if (h.startsWith('/audit/')) return { view: 'audit', id: h.slice(7) };
    if (h === '/fleet') return { view: 'fleet' };
    return { view: 'audits' };
  }

  function render() {
    const s = state.snapshot;
    if (!s) return;
    showError(s.error);
    document.getElementById('mode').textContent = s.actions ? 'actions enabled' : 'read-only';
    const r = route();
    document.getElementById('nav-audits').className = r.view !== 'fleet' ? 'current' : '';
    document.getElementById('nav-fleet').className = r.view === 'fleet' ? 'current' : '';
    const view = document.getElementById('view');
    const keepPlot = document.getElementById('plot');
    let content;
    if (r.view === 'fleet') content = fleetView(s);
    else if (r.view === 'audit') content = auditView(s, r.id);
    else content = auditsView(s);
    if (r.view === 'audit') {
      const filter = el(
        'div',
        { class: 'filter' },
        el('input', { id: 'filter', type: 'search', placeholder: 'filter runs (any column)', value: state.filter }),
      );
      const existing = document.getElementById('filter');
      if (existing) filter.replaceChildren(existing);
      else
        filter.firstChild.addEventListener('input', (e) => {
          state.filter = e.target.value;
          render();
        });
      content.insertBefore(filter, content.querySelector('#runs'));
    }
    // Keep a drawn plot across redraws; it is replaced only when the finished runs change. A fresh
    // box (the page came back to this audit from another view) is drawn again: without this, it kept
    // its placeholder until another run finished (the server caches the plot, so this costs little).
    const newPlot = content.querySelector('#plot');
    if (newPlot && keepPlot && state.plotKey?.startsWith(r.id + '|')) newPlot.replaceWith(keepPlot);
    else if (newPlot) state.plotKey = null;
    const focus = document.activeElement && document.activeElement.id === 'filter';
    view.replaceChildren(content);
    if (focus) document.getElementById('filter').focus();
    if (r.view === 'audit') {
      const a = s.audits.find((x) => x.audit_id === r.id);
      if (a) void loadPlot(a);
      if (state.openRun) void loadDetail(state.openRun);
    }
  }

  window.addEventListener('hashchange', () => {
    state.openRun = null;
    state.filter = '';
    render();
  });

  function connect() {
    const live = document.getElementById('live');
    const es = new EventSource('/api/events');
    es.addEventListener('snapshot', (e) => {
      state.snapshot = JSON.parse(e.data);
      // Say in words where the figures come from: the queue just now, or the files on disk.
      const unreachable = state.snapshot.queue === 'unreachable';
      live.textContent = unreachable ? 'queue unreachable' : 'live';
      live.className = unreachable ? 'live off' : 'live on';
      document.body.setAttribute('data-updated', state.snapshot.time);
      render();
    });
    es.onerror = () => {
      live.textContent = 'reconnecting…';
      live.className = 'live off';
    };
  }
  connect();
})();
