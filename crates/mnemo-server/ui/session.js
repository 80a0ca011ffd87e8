// A session: its timeline (events, checkpoints as bands over what they fold, memory commits as
// markers) beside the time-travel panel (the context the next request would have received at any
// of the session's log positions) and the checkpoint panel.

import { get } from './api.js';
import { h, mount, when, count, announce, sessionLink } from './dom.js';

export async function sessionView(view, session, query, stillCurrent) {
  const started = performance.now();
  const timeline = await get('timeline', { session });
  if (!stillCurrent()) return;
  const bands = bandsOf(timeline.checkpoints);
  const panel = h('section', { class: 'panel', 'aria-label': 'Time travel and checkpoints' });
  const events = h('ol', { class: 'timeline', 'aria-label': 'Timeline' });
  events.append(...timelineItems(timeline, bands, panel));
  mount(view,
    h('p', {}, h('a', { href: '#/' }, '← All sessions')),
    h('h1', { class: 'session-title' }, session),
    h('p', { class: 'muted' }, `${count(timeline.positions.length)} log positions · ${count(timeline.checkpoints.length)} checkpoints · ${count(timeline.memory.length)} memory commits`),
    h('div', { class: 'split' }, h('section', { class: 'events', 'aria-label': 'Events' }, events), panel));
  const travel = timeTravel(timeline, events);
  mount(panel, travel.node, h('div', { id: 'checkpoint-panel' }));
  travel.go(timeline.positions.length - 1);
  view.dataset.renderMs = String(Math.round(performance.now() - started));
  view.dataset.events = String(timeline.events.length);
  focusTarget(events, query);
}

/** For every checkpoint, the position range of the events it folds. */
function bandsOf(checkpoints) {
  return checkpoints
    .filter((c) => typeof c.first_position === 'number' && typeof c.through_position === 'number')
    .map((c) => ({ checkpoint: c, from: c.first_position, to: c.through_position }));
}

function timelineItems(timeline, bands, panel) {
  const markers = [
    ...timeline.checkpoints.map((c) => ({ position: c.position, node: checkpointMarker(c, panel) })),
    ...timeline.memory.map((m) => ({ position: m.position, node: memoryMarker(m) })),
  ].sort((a, b) => a.position - b.position);
  const out = [];
  let turn = null;
  let next = 0;
  for (const event of timeline.events) {
    while (next < markers.length && markers[next].position < event.position) out.push(markers[next++].node);
    if (event.turn && event.turn !== turn) {
      turn = event.turn;
      out.push(h('li', { class: 'turn', dataset: { turn } }, h('h2', {}, `Turn ${turn}`)));
    }
    const band = bands.find((b) => event.position >= b.from && event.position <= b.to);
    if (band && event.position === band.from) out.push(bandStart(band, panel));
    out.push(eventItem(event, band));
  }
  while (next < markers.length) out.push(markers[next++].node);
  return out;
}

function bandStart(band, panel) {
  const c = band.checkpoint;
  return h('li', { class: 'band-start' },
    h('button', { type: 'button', class: 'linkish', onclick: () => showCheckpoint(c, panel) },
      `Checkpoint ${c.checkpoint} folds the ${count(c.coverage?.event_count)} events from position ${band.from} to ${band.to}`));
}

function checkpointMarker(c, panel) {
  return h('li', { class: 'marker checkpoint-marker', id: `pos-${c.position}` },
    h('span', { class: 'badge' }, 'checkpoint'), ` recorded at position ${c.position} `,
    h('button', { type: 'button', class: 'linkish', onclick: () => showCheckpoint(c, panel) }, 'Open checkpoint'));
}

function memoryMarker(m) {
  const items = m.items ?? [];
  return h('li', { class: 'marker memory-marker', id: `pos-${m.position}` },
    h('span', { class: 'badge' }, 'memory'),
    ` ${m.kind} at position ${m.position}${m.trigger ? ` (${m.trigger})` : ''}: ${items.length} item${items.length === 1 ? '' : 's'} `,
    items.map((item) => h('a', { href: '#/memory/' + encodeURIComponent(item.item), class: 'memory-link' }, item.content ?? item.item)),
    m.item ? h('a', { href: '#/memory/' + encodeURIComponent(m.item) }, m.item) : null);
}

const ROLE_LABEL = { user: 'User', model: 'Model', tool: 'Tool', system: 'System' };

function eventItem(event, band) {
  const classes = ['event', `role-${event.role ?? event.kind}`];
  if (event.error) classes.push('is-error');
  if (band) classes.push('folded');
  const attrs = { class: classes.join(' '), id: `pos-${event.position}`, tabindex: '-1', dataset: { position: event.position } };
  if (event.id) attrs.dataset.event = event.id;
  if (event.kind !== 'event') {
    return h('li', attrs, h('span', { class: 'pos' }, event.position), h('span', { class: 'badge' }, event.kind), event.status ? ` ${event.status}` : '');
  }
  const head = [h('span', { class: 'pos', title: 'log position' }, event.position), h('span', { class: 'who' }, ROLE_LABEL[event.role] ?? event.role ?? '?')];
  let body;
  switch (event.content) {
    case 'thinking':
      body = h('details', {}, h('summary', {}, `Thinking (${count(event.text.length)} characters)`), h('pre', {}, event.text), more(event, 'text'));
      break;
    case 'function_call':
      body = h('details', {}, h('summary', {}, 'Tool call ', h('code', {}, event.name)), h('pre', {}, event.args), more(event, 'args'));
      break;
    case 'function_response':
      body = h('details', { open: event.error }, h('summary', {}, event.error ? h('strong', { class: 'error-label' }, 'Error from ') : 'Result of ', h('code', {}, event.name)),
        h('pre', {}, event.result), more(event, 'result'));
      break;
    case 'error':
      body = h('div', {}, h('strong', { class: 'error-label' }, 'Error: '), event.text);
      break;
    default:
      body = h('div', { class: 'text' }, event.text ?? `(${event.content})`, more(event, 'text'));
  }
  return h('li', attrs, head, ' ', event.ts ? h('time', { class: 'muted' }, when(event.ts)) : null, body);
}

/** A button that fetches the whole envelope when the timeline's text was shortened. */
function more(event, field) {
  if (!event[`${field}_cut`]) return null;
  const target = h('div');
  const button = h('button', { type: 'button', class: 'linkish', onclick: async () => {
    button.disabled = true;
    const envelope = await get('event', { position: event.position });
    mount(target, h('pre', {}, JSON.stringify(envelope.record, null, 2)));
    button.remove();
  } }, 'Shortened: show the whole event');
  return [button, target];
}

function focusTarget(events, query) {
  const event = query.get('event');
  const turn = query.get('turn');
  let target = null;
  if (event) target = events.querySelector(`[data-event="${CSS.escape(event)}"]`);
  if (!target && turn) target = events.querySelector(`[data-turn="${CSS.escape(turn)}"]`)?.nextElementSibling ?? null;
  if (!target) return;
  target.classList.add('target');
  for (const details of target.querySelectorAll('details')) details.open = true;
  target.setAttribute('tabindex', '-1');
  target.scrollIntoView({ block: 'center' });
  target.focus({ preventScroll: true });
  announce('Showing the linked event');
}

function timeTravel(timeline, events) {
  const positions = timeline.positions;
  const slider = h('input', { type: 'range', id: 'travel', min: 0, max: Math.max(0, positions.length - 1), step: 1, value: positions.length - 1 });
  const label = h('output', { for: 'travel', id: 'travel-label' });
  const out = h('div', { id: 'context-out', 'aria-live': 'polite' });
  const session = timeline.session;
  let marked = [];
  let ticket = 0;
  let timer = null;
  // The first load (at the head) skips the diff: it doubles the work on opening a session, and the
  // diff matters once the slider moves.
  let compare = false;
  const go = (index) => {
    index = Math.max(0, Math.min(positions.length - 1, index));
    slider.value = String(index);
    const at = positions[index];
    slider.setAttribute('aria-valuetext', `log position ${at}, ${index + 1} of ${positions.length}`);
    label.textContent = `Position ${at} (${index + 1} of ${positions.length})`;
    clearTimeout(timer);
    timer = setTimeout(() => load(index), 120);
  };
  const load = async (index) => {
    const mine = ++ticket;
    const at = positions[index];
    const prev = compare && index > 0 ? positions[index - 1] : undefined;
    compare = true;
    out.setAttribute('aria-busy', 'true');
    try {
      const context = await get('context', { session, at, prev });
      if (mine !== ticket) return;
      for (const node of marked) node.classList.remove('in-context');
      marked = context.items.filter((i) => i.kind === 'event')
        .map((i) => events.querySelector(`#pos-${i.position}`)).filter(Boolean);
      for (const node of marked) node.classList.add('in-context');
      mount(out, contextView(context));
      out.dataset.position = String(at);
    } catch (error) {
      if (mine === ticket) mount(out, h('p', { class: 'error', role: 'alert' }, error.message));
    } finally {
      if (mine === ticket) out.removeAttribute('aria-busy');
    }
  };
  slider.addEventListener('input', () => go(Number(slider.value)));
  const node = h('section', { class: 'travel', 'aria-labelledby': 'travel-h' },
    h('h2', { id: 'travel-h' }, 'Time travel'),
    h('p', { class: 'muted' }, 'The context the next request would have received at a log position: the checkpoint summary, the kept tail and what search retrieved.'),
    h('label', { for: 'travel' }, 'Log position'),
    h('div', { class: 'travel-row' },
      h('button', { type: 'button', 'aria-label': 'Previous position', onclick: () => go(Number(slider.value) - 1) }, '◀'),
      slider,
      h('button', { type: 'button', 'aria-label': 'Next position', onclick: () => go(Number(slider.value) + 1) }, '▶')),
    label, out);
  return { node, go };
}

function contextView(context) {
  const tokens = context.tokens ?? 0;
  const window = context.window ?? 0;
  const checkpoint = context.items.find((i) => i.kind === 'checkpoint' || i.kind === 'provider_state');
  const retrieved = context.items.filter((i) => i.kind === 'retrieved');
  const tail = context.items.filter((i) => i.kind === 'event');
  const diff = context.diff;
  return [
    h('p', { class: 'tokens' },
      h('label', { for: 'tokens-meter' }, `${count(tokens)} of ${count(window)} tokens`),
      ' ', h('meter', { id: 'tokens-meter', min: 0, max: window || 1, value: tokens, high: (window || 1) * 0.8 })),
    h('p', { id: 'context-summary' }, `Decision: ${context.decision ?? '–'} · ${tail.length} kept events`,
      checkpoint ? ` · stands on checkpoint ${checkpoint.checkpoint}` : ' · no checkpoint',
      context.fits === false ? h('strong', { class: 'error-label' }, ' · does not fit') : ''),
    diff ? h('div', { class: 'diff', id: 'context-diff' },
      h('h3', {}, `Changed since position ${diff.from}`),
      diff.added.length + diff.removed.length === 0 ? h('p', {}, 'Nothing changed.') : h('ul', {},
        diff.added.map((key) => h('li', { class: 'added' }, `+ ${key}`)),
        diff.removed.map((key) => h('li', { class: 'removed' }, `− ${key}`))),
      typeof diff.tokens_before === 'number' ? h('p', { class: 'muted' }, `${count(diff.tokens_before)} → ${count(tokens)} tokens`) : null) : null,
    checkpoint ? h('details', { open: true, class: 'summary' }, h('summary', {}, 'Checkpoint summary'), h('pre', { id: 'context-checkpoint' }, checkpoint.text)) : null,
    retrieved.map((r) => h('details', { class: 'summary' }, h('summary', {}, `Retrieved by search (${(r.positions ?? []).length} events)`), h('pre', {}, r.text))),
    h('h3', {}, 'Kept tail'),
    tail.length === 0 ? h('p', {}, 'No raw events.') : h('ol', { class: 'tail' }, tail.map((i) =>
      h('li', {}, h('a', { href: `#pos-${i.position}`, onclick: (e) => { e.preventDefault(); jump(i.position); } }, `${i.position}`), ' ',
        h('span', { class: 'who' }, ROLE_LABEL[i.event.role] ?? i.event.role), ' ', brief(i.event)))),
  ];
}

function jump(position) {
  const node = document.getElementById(`pos-${position}`);
  if (!node) return;
  node.scrollIntoView({ block: 'center' });
  node.focus({ preventScroll: true });
}

function brief(event) {
  const text = event.text ?? (event.name ? `${event.content === 'function_call' ? 'calls' : 'result of'} ${event.name}` : event.content);
  return text.length > 140 ? text.slice(0, 140) + '…' : text;
}

function showCheckpoint(c, panel) {
  const target = panel.querySelector('#checkpoint-panel');
  const report = c.faithfulness;
  mount(target, h('section', { class: 'checkpoint', 'aria-labelledby': 'checkpoint-h' },
    h('h2', { id: 'checkpoint-h', tabindex: '-1' }, `Checkpoint ${c.checkpoint}`),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Recorded at'), h('dd', {}, `position ${c.position}, ${when(c.created_at)}`),
      h('dt', {}, 'Covers'), h('dd', {}, `${count(c.coverage?.event_count)} events in ${count(c.coverage?.turn_count)} turns, positions ${c.first_position ?? '?'}–${c.through_position ?? '?'}`),
      h('dt', {}, 'Source digest'), h('dd', { class: 'digest' }, c.coverage?.source_digest ?? ''),
      h('dt', {}, 'Estimated tokens'), h('dd', {}, count(c.estimated_tokens))),
    h('h3', {}, 'Summary'), h('pre', {}, c.summary ?? ''),
    h('h3', {}, 'Faithfulness'),
    report ? h('p', {}, `${count(report.checked)} claims checked against the covered events; ${report.unsupported.length} unsupported.`)
      : h('p', {}, 'No faithfulness report recorded.'),
    report && report.unsupported.length ? h('ul', { class: 'unsupported' }, report.unsupported.map((claim) => h('li', {}, h('code', {}, claim), ' — unsupported'))) : null));
  target.querySelector('h2').focus();
}
