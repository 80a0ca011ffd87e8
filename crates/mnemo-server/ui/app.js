// The inspector's router: the part of the address after `#` names the view.

import { mount, h } from './dom.js';
import { sessionsView, memoryView, memoryItemView, healthView } from './views.js';
import { sessionView } from './session.js';

const main = document.getElementById('main');

/** Splits `#/a/b?x=1` into (['a', 'b'], URLSearchParams('x=1')). */
function parseHash() {
  const raw = window.location.hash.replace(/^#\/?/, '');
  const [path, query = ''] = raw.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { parts, query: new URLSearchParams(query) };
}

let current = 0;

async function render() {
  const ticket = ++current;
  const { parts, query } = parseHash();
  const section = parts[0] ?? 'sessions';
  for (const link of document.querySelectorAll('[data-nav]')) {
    const active = link.dataset.nav === (section === 'session' ? 'sessions' : section);
    if (active) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  const view = h('div', { class: 'view' }, h('p', { class: 'muted' }, 'Loading…'));
  mount(main, view);
  const stillCurrent = () => ticket === current;
  try {
    if (section === 'session' && parts[1]) await sessionView(view, parts[1], query, stillCurrent);
    else if (section === 'memory' && parts[1]) await memoryItemView(view, parts[1], stillCurrent);
    else if (section === 'memory') await memoryView(view, stillCurrent);
    else if (section === 'health') await healthView(view, stillCurrent);
    else await sessionsView(view, query, stillCurrent);
  } catch (error) {
    if (stillCurrent()) mount(view, h('p', { class: 'error', role: 'alert' }, `Could not load: ${error.message}`));
  }
}

window.addEventListener('hashchange', render);
render();
