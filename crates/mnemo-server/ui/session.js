// A session: its timeline (events, checkpoints as bands over what they fold, memory commits as
// markers) beside the time-travel panel (the context the next request would have received at any
// of the session's log positions) and the checkpoint panel.

import { get } from './api.js';
import { h, mount, when, count, announce, sessionLink } from './dom.js';

/** Rows appended to the timeline per step while the rest of a long session arrives. */
const ROWS_PER_STEP = 1000;

export async function sessionView(view, session, query, stillCurrent) {
  const started = performance.now();
  // The first screen and where the session ends come first; every position, checkpoint and memory
  // commit come with the rest, which is asked for at once.
  const first = await get('timeline', { session });
  if (!stillCurrent()) return;
  const panel = h('section', { class: 'panel', 'aria-label': 'Time travel and checkpoints', dataset: { session } });
  const events = h('ol', { class: 'timeline', 'aria-label': 'Timeline' });
  events.append(...timelineRows({ checkpoints: [], memory: [] }, [], panel).add(first.events));
  const facts = h('p', { class: 'muted' }, `${count(first.envelopes)} log positions`);
  mount(view,
    h('p', {}, h('a', { href: '#/' }, '← All sessions')),
    h('h1', { class: 'session-title' }, session),
    facts,
    h('div', { class: 'split' }, h('section', { class: 'events', 'aria-label': 'Events' }, events), panel));
  const travel = timeTravel(session, first.last_position, events);
  mount(panel, travel.node, h('div', { id: 'checkpoint-panel' }));
  view.dataset.renderMs = String(Math.round(performance.now() - started));
  // The context at the session's end comes next; the rest of the timeline is asked for once it is
  // shown (on a busy machine the two would only slow each other down).
  await travel.go(0, { now: true });
  if (!stillCurrent()) return;
  const timeline = await get('timeline', { session, from: first.events.length });
  if (!stillCurrent()) return;
  const bands = bandsOf(timeline.checkpoints);
  const rows = timelineRows(timeline, bands, panel);
  // The first screen again, now with its checkpoint bands and memory markers.
  events.replaceChildren(...rows.add(first.events));
  travel.positions(timeline.positions);
  for (let at = 0; at < timeline.events.length; at += ROWS_PER_STEP) {
    await nextFrame();
    if (!stillCurrent()) return;
    events.append(...rows.add(timeline.events.slice(at, at + ROWS_PER_STEP)));
  }
  events.append(...rows.finish());
  mount(facts, `${count(timeline.positions.length)} log positions · ${count(timeline.checkpoints.length)} checkpoints · ${count(timeline.memory.length)} memory commits`);
  travel.mark();
  view.dataset.events = String(first.events.length + timeline.events.length);
  view.dataset.completeMs = String(Math.round(performance.now() - started));
  focusTarget(events, query);
}

/** Resolves at the next animation frame (or soon, when the page is hidden). */
function nextFrame() {
  return new Promise((done) => {
    const timer = setTimeout(done, 50);
    requestAnimationFrame(() => { clearTimeout(timer); done(); });
  });
}

/** For every checkpoint, the position range of the events it folds. */
function bandsOf(checkpoints) {
  return checkpoints
    .filter((c) => typeof c.first_position === 'number' && typeof c.through_position === 'number')
    .map((c) => ({ checkpoint: c, from: c.first_position, to: c.through_position }));
}

/** Builds the timeline's rows a batch of events at a time, with the checkpoint and memory markers
 *  between them in log order; `finish` gives the markers after the last event. */
function timelineRows(timeline, bands, panel) {
  const markers = [
    ...timeline.checkpoints.map((c) => ({ position: c.position, node: () => checkpointMarker(c, panel) })),
    ...timeline.memory.map((m) => ({ position: m.position, node: () => memoryMarker(m) })),
  ].sort((a, b) => a.position - b.position);
  let turn = null;
  let next = 0;
  const add = (batch) => {
    const out = [];
    for (const event of batch) {
      while (next < markers.length && markers[next].position < event.position) out.push(markers[next++].node());
      if (event.turn && event.turn !== turn) {
        turn = event.turn;
        out.push(h('li', { class: 'turn', dataset: { turn } }, h('h2', {}, `Turn ${turn}`)));
      }
      const band = bands.find((b) => event.position >= b.from && event.position <= b.to);
      if (band && event.position === band.from) out.push(bandStart(band, panel));
      out.push(eventItem(event, band));
    }
    return out;
  };
  const finish = () => markers.slice(next).map((m) => m.node());
  return { add, finish };
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
      body = folded(event, 'text', `Thinking (${count(event.text_chars ?? event.text.length)} characters)`);
      break;
    case 'function_call':
      body = folded(event, 'args', ['Tool call ', h('code', {}, event.name)]);
      break;
    case 'function_response':
      body = folded(event, 'result', [event.error ? h('strong', { class: 'error-label' }, 'Error from ') : 'Result of ', h('code', {}, event.name)], event.error);
      break;
    case 'error':
      body = h('div', {}, h('strong', { class: 'error-label' }, 'Error: '), event.text);
      break;
    default:
      body = h('div', { class: 'text' }, event.text ?? `(${event.content})`, more(event, 'text'));
  }
  return h('li', attrs, head, ' ', event.ts ? h('time', { class: 'muted' }, when(event.ts)) : null, body);
}

/** Folded text (thinking, tool arguments, results): the timeline carries a preview; opening it
 *  fetches the whole text when the preview was cut. */
function folded(event, field, summary, open = false) {
  const pre = h('pre', {}, event[field] ?? '');
  const details = h('details', { open }, h('summary', {}, summary), pre);
  if (!event[`${field}_cut`]) return details;
  const note = h('p', { class: 'muted' }, `Preview of ${count(event[`${field}_chars`])} characters; open to read it whole.`);
  details.append(note);
  let loading = null;
  const load = () => {
    loading ??= get('event', { position: event.position }).then((envelope) => {
      pre.textContent = wholeText(envelope.record?.content, field);
      note.remove();
    }).catch((error) => { note.textContent = `Could not load the whole text: ${error.message}`; loading = null; });
  };
  // One shown open (an error) waits for a click: a long session may hold hundreds of them.
  if (open) {
    note.replaceChildren(h('button', { type: 'button', class: 'linkish', onclick: load }, `Shortened to ${count(event[field].length)} of ${count(event[`${field}_chars`])} characters: show it whole`));
  } else {
    details.addEventListener('toggle', () => { if (details.open) load(); });
  }
  return details;
}

/** The whole text of a content member, as the timeline would have shown it uncut. */
function wholeText(content, field) {
  const value = field === 'args' ? content?.args : field === 'result' ? content?.result : content?.text;
  return typeof value === 'string' ? value : JSON.stringify(value ?? null, null, 2);
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

function timeTravel(session, lastPosition, events) {
  // Until the whole timeline has arrived, the slider knows only the session's last position.
  let positions = [lastPosition];
  const slider = h('input', { type: 'range', id: 'travel', min: 0, max: 0, step: 1, value: 0, disabled: true });
  const label = h('output', { for: 'travel', id: 'travel-label' });
  const out = h('div', { id: 'context-out', 'aria-live': 'polite' });
  const recallOut = h('div', { id: 'recall-out' });
  let inContext = [];
  let marked = [];
  // The item keys and tokens of the last contexts shown, by position.
  const seen = new Map();
  const remember = (context) => {
    seen.delete(context.position);
    seen.set(context.position, { position: context.position, keys: context.items.map((i) => i.key), tokens: context.tokens });
    if (seen.size > CONTEXTS_KEPT) seen.delete(seen.keys().next().value);
  };
  let ticket = 0;
  let timer = null;
  // The first load (at the head) skips the diff: it doubles the work on opening a session, and the
  // diff matters once the slider moves.
  let compare = false;
  const show = (index) => {
    const at = positions[index];
    slider.setAttribute('aria-valuetext', `log position ${at}, ${index + 1} of ${positions.length}`);
    label.textContent = `Position ${at} (${index + 1} of ${positions.length})`;
  };
  const go = (index, { now = false } = {}) => {
    index = Math.max(0, Math.min(positions.length - 1, index));
    slider.value = String(index);
    show(index);
    clearTimeout(timer);
    if (now) return load(index);
    timer = setTimeout(() => load(index), 120);
    return undefined;
  };
  /** Marks the timeline rows of the events in the context shown (rows may arrive later). */
  const mark = () => {
    for (const node of marked) node.classList.remove('in-context');
    marked = inContext.map((position) => events.querySelector(`#pos-${position}`)).filter(Boolean);
    for (const node of marked) node.classList.add('in-context');
  };
  const load = async (index) => {
    const mine = ++ticket;
    const at = positions[index];
    const before = compare && index > 0 ? positions[index - 1] : undefined;
    compare = true;
    // Stepping forward, the previous position's context is usually at hand: the diff is made here
    // rather than by assembling that context again.
    const known = before === undefined ? undefined : seen.get(before);
    const prev = known ? undefined : before;
    out.setAttribute('aria-busy', 'true');
    recallOut.removeAttribute('data-position');
    // The pushed recall is read beside the context, never before it.
    const recall = get('recall', { session, at }).catch((error) => ({ error: error.message }));
    try {
      const context = await get('context', { session, at, prev });
      remember(context);
      if (known) context.diff = diffOf(known, context);
      if (mine !== ticket) return;
      inContext = context.items.filter((i) => i.kind === 'event').map((i) => i.position);
      mark();
      mount(out, contextView(context), recallOut);
      out.dataset.position = String(at);
    } catch (error) {
      if (mine === ticket) mount(out, h('p', { class: 'error', role: 'alert' }, error.message));
    } finally {
      if (mine === ticket) out.removeAttribute('aria-busy');
    }
    recall.then((block) => {
      if (mine !== ticket) return;
      mount(recallOut, recallView(block));
      recallOut.dataset.position = String(at);
    });
  };
  slider.addEventListener('input', () => go(Number(slider.value)));
  const node = h('section', { class: 'travel', 'aria-labelledby': 'travel-h' },
    h('h2', { id: 'travel-h' }, 'Time travel'),
    h('p', { class: 'muted' }, 'The context the next request would have received at a log position: the checkpoint summary, the kept tail, what search retrieved, and the pushed memory recall.'),
    h('label', { for: 'travel' }, 'Log position'),
    h('div', { class: 'travel-row' },
      h('button', { type: 'button', 'aria-label': 'Previous position', onclick: () => go(Number(slider.value) - 1) }, '◀'),
      slider,
      h('button', { type: 'button', 'aria-label': 'Next position', onclick: () => go(Number(slider.value) + 1) }, '▶')),
    label, out);
  /** Every position of the session, once the whole timeline has arrived; the slider stays where it is. */
  const setPositions = (all) => {
    const at = positions[Number(slider.value)];
    positions = all.length ? all : positions;
    const index = Math.max(0, positions.indexOf(at));
    slider.max = String(positions.length - 1);
    slider.value = String(index);
    slider.disabled = false;
    show(index);
    mark();
  };
  return { node, go, mark, positions: setPositions };
}

/** Contexts whose item keys the time-travel panel keeps for diffs. */
const CONTEXTS_KEPT = 64;

/** What came and went between two contexts, as the server's `diff` says it. */
function diffOf(before, context) {
  const had = new Set(before.keys);
  const has = new Set(context.items.map((i) => i.key));
  return {
    from: before.position,
    added: context.items.map((i) => i.key).filter((key) => !had.has(key)),
    removed: before.keys.filter((key) => !has.has(key)),
    tokens_before: before.tokens,
  };
}

/** The push recall block as of a position. */
function recallView(block) {
  const heading = h('h3', { id: 'recall-h' }, 'Pushed recall');
  if (block.error) return [heading, h('p', { class: 'error', role: 'alert' }, `Could not rebuild the recall block: ${block.error}`)];
  const items = block.items ?? [];
  return [heading,
    h('p', { class: 'muted' }, 'The memory block the push route (memory/recall_block) builds for the next request, rebuilt as of this position: the memory items as they stood then, matched against the session’s turns up to it. The log does not record whether the host sent it.'),
    items.length === 0 ? h('p', { id: 'recall-summary' }, 'No memory item would have been pushed.')
      : [h('p', { id: 'recall-summary' }, `${items.length} item${items.length === 1 ? '' : 's'}, ${count(block.tokens)} tokens`),
        h('ul', { class: 'recall' }, items.map((item) => h('li', {},
          h('a', { href: '#/memory/' + encodeURIComponent(item.item), class: 'recall-item' }, item.content),
          h('span', { class: 'muted' }, ` ${item.kind}${item.standing ? ', standing' : ''} · version ${item.version}`)))),
        h('details', { class: 'summary' }, h('summary', {}, 'The block as sent'), h('pre', { id: 'recall-text' }, block.text))],
  ];
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
  for (const old of document.querySelectorAll('.event.target')) old.classList.remove('target');
  node.classList.add('target');
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
  const claimsOut = h('div', { id: 'claims-out', 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Linking each claim to its events…'));
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
    claimsOut));
  target.querySelector('h2').focus();
  get('claims', { session: panel.dataset.session, checkpoint: c.checkpoint })
    .then((claims) => mount(claimsOut, claimsView(claims)))
    .catch((error) => mount(claimsOut, h('p', { class: 'error', role: 'alert' }, `Could not link the claims: ${error.message}`)))
    .finally(() => claimsOut.removeAttribute('aria-busy'));
}

/** Each claim of a summary with links to the events that support it, or marked unsupported. */
function claimsView(claims) {
  const list = claims.claims ?? [];
  if (list.length === 0) return h('p', {}, 'The summary states no checkable claim (paths, commands, identifiers, numbers, quoted text).');
  const unsupported = list.filter((claim) => !claim.supported).length;
  return [
    h('p', {}, `${list.length} claims, ${unsupported} unsupported, checked again against the ${count(claims.covered_events)} covered events.`,
      claims.matches_recorded === false ? h('strong', { class: 'error-label' }, ' This differs from the report recorded with the checkpoint.') : ''),
    h('ol', { class: 'claims' }, list.map((claim) => h('li', { class: claim.supported ? 'claim supported' : 'claim unsupported' },
      h('code', {}, claim.claim), ' ', h('span', { class: 'muted' }, claim.kind), ' — ',
      !claim.supported ? h('strong', { class: 'error-label' }, 'unsupported')
        : claim.events.length === 0 ? 'supported only across several events'
          : ['supported by ', claim.events.map((e, i) => [i ? ', ' : '', h('a', { href: `#pos-${e.position}`, class: 'claim-event', dataset: { position: e.position }, onclick: (event) => { event.preventDefault(); jump(e.position); } }, `position ${e.position}`)]),
            claim.event_count > claim.events.length ? ` and ${count(claim.event_count - claim.events.length)} more` : '']))),
  ];
}
