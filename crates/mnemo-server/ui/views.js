// Sessions with search, memory items, store health.

import { get } from './api.js';
import { h, mount, when, count, announce, sessionLink } from './dom.js';

export async function sessionsView(view, query, stillCurrent) {
  const q = query.get('q') ?? '';
  const input = h('input', { id: 'search-q', type: 'search', name: 'q', value: q, autocomplete: 'off', required: true });
  const form = h('form', { class: 'search', role: 'search', onsubmit: (event) => {
    event.preventDefault();
    window.location.hash = '#/?q=' + encodeURIComponent(input.value.trim());
  } },
    h('label', { for: 'search-q' }, 'Search all sessions'),
    input,
    h('button', { type: 'submit' }, 'Search'));
  const results = h('section', { 'aria-labelledby': 'results-h', class: 'results' });
  // The page's one "Sessions" heading names the list too; each workspace has its own heading.
  const list = h('section', { 'aria-labelledby': 'sessions-h' }, h('p', { class: 'muted' }, 'Loading…'));
  mount(view, h('h1', { id: 'sessions-h' }, 'Sessions'), form, results, list);
  const [sessions, found] = await Promise.all([
    get('sessions'),
    q ? get('search', { q }).catch((error) => ({ error: error.message })) : null,
  ]);
  if (!stillCurrent()) return;
  const titles = new Map(sessions.map((s) => [s.session, s.title]));
  if (found) renderResults(results, q, found, titles);
  else results.remove();
  mount(list, sessionsByWorkspace(sessions));
  if (q) announce(found?.rows ? `${found.rows.length} results for ${q}` : `search failed`);
}

function renderResults(results, q, found, titles) {
  if (found.error) {
    mount(results, h('h2', { id: 'results-h' }, `Results for “${q}”`), h('p', { class: 'error', role: 'alert' }, found.error));
    return;
  }
  const rows = found.rows ?? [];
  mount(results,
    h('h2', { id: 'results-h' }, `Results for “${q}”`, h('span', { class: 'muted' }, ` — ${rows.length} ranked${found.truncated ? ', truncated' : ''}`)),
    rows.length === 0 ? h('p', {}, 'Nothing found.') : h('ol', { class: 'hits' }, rows.map((row) =>
      h('li', { class: 'hit' },
        h('a', { href: sessionLink(row.session_id, { event: row.message_id, turn: row.turn_id }), class: 'hit-title' }, row.title || titles.get(row.session_id) || row.session_id),
        h('span', { class: 'muted' }, ` ${row.match_kind ?? ''} · ${when(row.message_timestamp ?? row.last_message_at)}`),
        h('p', { class: 'snippet' }, row.snippet ?? ''),
      ))));
}

function sessionsByWorkspace(sessions) {
  if (sessions.length === 0) return h('p', {}, 'The store holds no sessions yet.');
  const groups = new Map();
  for (const session of sessions) {
    const key = session.workspace ?? '(no workspace)';
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(session);
  }
  return [...groups].map(([workspace, rows]) => h('section', { class: 'workspace' },
    h('h2', {}, workspace),
    h('table', {},
      h('thead', {}, h('tr', {}, ['Title', 'Last activity', 'Format', 'Events', 'Turns', 'Flags'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows.map((s) => h('tr', {},
        h('td', {}, h('a', { href: sessionLink(s.session), title: s.session }, s.title || s.session)),
        h('td', {}, when(s.last_activity)),
        h('td', {}, s.source ?? '–'),
        h('td', { class: 'num' }, count(s.event_count)),
        h('td', { class: 'num' }, count(s.turn_count)),
        h('td', {}, [s.subagent && 'sub-agent', s.incognito && 'incognito', s.archived && 'archived'].filter(Boolean).join(', ')),
      ))))));
}

export async function memoryView(view, stillCurrent) {
  const memory = await get('memory');
  if (!stillCurrent()) return;
  mount(view, h('h1', {}, 'Memory'),
    h('p', { class: 'muted' }, `${count(memory.total)} items${memory.total > memory.items.length ? `, the first ${memory.items.length} shown` : ''}`),
    memory.items.length === 0 ? h('p', {}, 'No memory items yet.') : h('table', {},
      h('thead', {}, h('tr', {}, ['Statement', 'Kind', 'Scope', 'Changes'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, memory.items.map((item) => h('tr', {},
        h('td', {}, h('a', { href: '#/memory/' + encodeURIComponent(item.item) }, item.content ?? item.item)),
        h('td', {}, item.kind ?? ''),
        h('td', {}, item.scope ?? ''),
        h('td', { class: 'num' }, count(item.positions.length)))))));
}

export async function memoryItemView(view, id, stillCurrent) {
  const { item, history } = await get('memory/item', { id });
  if (!stillCurrent()) return;
  const fields = item.fields ?? {};
  const sources = fields.sources ?? [];
  mount(view,
    h('p', {}, h('a', { href: '#/memory' }, '← All memory items')),
    h('h1', {}, 'Memory item'),
    h('blockquote', { class: 'statement' }, fields.content ?? ''),
    h('dl', { class: 'facts' },
      fact('Item', item.item), fact('Kind', fields.kind), fact('Scope', fields.scope),
      fact('Lifecycle', item.lifecycle), fact('Version', item.version), fact('Origin', fields.origin),
      fact('Statement type', fields.statement_type), fact('Created', when(item.created_at)), fact('Updated', when(item.updated_at)),
      fact('Keys', (fields.keys ?? []).map((k) => k.key).join(', '))),
    h('h2', {}, 'Evidence'),
    sources.length === 0 ? h('p', {}, 'No source turns recorded.') : h('ul', { class: 'evidence' }, sources.map((source) =>
      h('li', {}, h('a', { href: sessionLink(source.session, { event: source.event }), class: 'evidence-link' },
        `Session ${source.session}, turn ${source.turn}, event ${source.event}`)))),
    h('h2', {}, 'Version history'),
    h('ol', { class: 'history' }, history.map((entry) => h('li', {},
      h('strong', {}, `${entry.kind} at position ${entry.position}`),
      ` ${when(entry.timestamp)}`,
      entry.trigger ? ` · trigger ${entry.trigger}` : '',
      entry.session ? [' · from ', h('a', { href: sessionLink(entry.session) }, entry.session)] : '',
      entry.fields?.content ? h('p', {}, entry.fields.content) : '',
      entry.record ? h('pre', {}, JSON.stringify(entry.record, null, 2)) : '',
    ))));
}

function fact(term, value) {
  if (value === undefined || value === null || value === '') return null;
  return [h('dt', {}, term), h('dd', {}, String(value))];
}

export async function healthView(view, stillCurrent) {
  const health = await get('health');
  if (!stillCurrent()) return;
  const stats = health.stats;
  const verifyOut = h('div', { id: 'verify-out', 'aria-live': 'polite' });
  const button = h('button', { type: 'button', id: 'verify', onclick: async () => {
    button.disabled = true;
    mount(verifyOut, h('p', {}, 'Verifying: checking the hash chain and rebuilding every stage…'));
    try {
      const report = await get('verify');
      mount(verifyOut, verifyReport(report));
      announce(verifyOk(report) ? 'Verification passed' : 'Verification found problems');
    } catch (error) {
      mount(verifyOut, h('p', { class: 'error', role: 'alert' }, error.message));
    } finally {
      button.disabled = false;
    }
  } }, 'Verify the store');
  mount(view, h('h1', {}, 'Store health'),
    h('dl', { class: 'facts' },
      fact('Store', stats.dir), fact('Log head', count(stats.head)), fact('Head hash', health.head_hash),
      fact('Last append', when(health.head_timestamp)), fact('Sessions', count(stats.sessions)),
      fact('Events', count(stats.events)), fact('Turns', count(stats.turns)), fact('Disk', `${count(stats.disk_bytes)} bytes`)),
    h('h2', {}, 'Stages'),
    h('table', {},
      h('thead', {}, h('tr', {}, ['Stage', 'Watermark', 'Digest'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, (stats.stages ?? []).map((stage) => h('tr', {},
        h('td', {}, stage.name), h('td', { class: 'num' }, count(stage.watermark)), h('td', { class: 'digest' }, stage.digest))))),
    h('h2', {}, 'Verify'),
    h('p', {}, 'Checks the hash chain over the whole log and rebuilds every stage into scratch space to compare digests. It reads only.'),
    button, verifyOut);
}

function verifyOk(report) {
  return !report.lost && (report.stages ?? []).every((stage) => stage.live === stage.rebuilt);
}

function verifyReport(report) {
  return [
    h('p', { class: verifyOk(report) ? 'ok' : 'error', role: verifyOk(report) ? null : 'alert' },
      verifyOk(report) ? `Passed: ${count(report.envelopes)} envelopes chain correctly and every stage equals a fresh rebuild.`
        : 'Failed: see the stages below.'),
    report.lost ? h('pre', {}, JSON.stringify(report.lost, null, 2)) : null,
    h('table', {},
      h('thead', {}, h('tr', {}, ['Stage', 'Live digest', 'Rebuilt digest', 'Result'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, (report.stages ?? []).map((stage) => h('tr', {},
        h('td', {}, stage.name), h('td', { class: 'digest' }, stage.live), h('td', { class: 'digest' }, stage.rebuilt),
        h('td', { class: stage.live === stage.rebuilt ? 'ok' : 'error' }, stage.live === stage.rebuilt ? 'equal' : 'DIFFERENT'))))),
  ];
}
