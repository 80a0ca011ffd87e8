// Building DOM nodes without HTML strings: every text from the store is set as text, never parsed.

/** h('a', {href: '#', class: 'x', onclick: fn}, 'text', child, [more]) */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      node.addEventListener(name.slice(2), value);
    } else if (name === 'dataset') {
      Object.assign(node.dataset, value);
    } else if (value === true) {
      node.setAttribute(name, '');
    } else {
      node.setAttribute(name, String(value));
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else if (child instanceof Node) node.appendChild(child);
    else node.appendChild(document.createTextNode(String(child)));
  }
}

/** Replaces the children of `node`. */
export function mount(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

/** UTC time of a millisecond timestamp, or an empty string. */
export function when(ms) {
  if (typeof ms !== 'number') return '';
  return new Date(ms).toISOString().replace('T', ' ').slice(0, 16) + ' UTC';
}

/** A number with thousands separators. */
export function count(n) {
  return typeof n === 'number' ? n.toLocaleString('en') : '–';
}

/** Announces `text` to assistive technology. */
export function announce(text) {
  const status = document.getElementById('status');
  if (status) status.textContent = text;
}

/** The link to a session's timeline, optionally at an event or turn. */
export function sessionLink(session, { event, turn } = {}) {
  let href = '#/session/' + encodeURIComponent(session);
  const query = new URLSearchParams();
  if (event) query.set('event', event);
  if (turn) query.set('turn', turn);
  const text = query.toString();
  return text ? `${href}?${text}` : href;
}
