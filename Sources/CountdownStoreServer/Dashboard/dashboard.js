// CountdownStore dashboard. Every piece of data goes into the DOM as text or as a data-*
// attribute, never as markup. Times are computed here from deadlines and an estimate of the
// server's store clock, and every row changes on the same beat: one timer aligned to that
// clock's whole seconds.
(function () {
  'use strict';

  // ---------- Helpers ----------

  const $ = (id) => document.getElementById(id);

  /** Creates an element; `text` sets its text, any other attribute goes through setAttribute. */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const name of Object.keys(attrs)) {
        const value = attrs[name];
        if (value === null || value === undefined || value === false) continue;
        if (name === 'class') node.className = value;
        else if (name === 'text') node.textContent = String(value);
        else node.setAttribute(name, value === true ? '' : String(value));
      }
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
    }
    return node;
  }

  function setText(node, text) {
    if (node.textContent !== text) node.textContent = text;
  }

  function parseTime(iso) {
    if (typeof iso !== 'string' || iso === '') return null;
    const ms = Date.parse(iso);
    return Number.isFinite(ms) ? ms : null;
  }

  const pad2 = (n) => (n < 10 ? '0' + n : String(n));

  function formatSeconds(total) {
    const s = Math.max(0, Math.floor(total));
    const d = Math.floor(s / 86400);
    const h = Math.floor((s % 86400) / 3600);
    const m = Math.floor((s % 3600) / 60);
    const sec = s % 60;
    if (d > 0) return `${d}d ${pad2(h)}h ${pad2(m)}m ${pad2(sec)}s`;
    if (h > 0) return `${h}h ${pad2(m)}m ${pad2(sec)}s`;
    if (m > 0) return `${m}m ${pad2(sec)}s`;
    return `${sec}s`;
  }
  /** A remaining time, rounded up: it shows 0s only once the time is over. */
  const formatRemaining = (ms) => formatSeconds(Math.ceil(Math.max(0, ms) / 1000));
  /** An elapsed time, rounded down. */
  const formatElapsed = (ms) => formatSeconds(Math.floor(Math.max(0, ms) / 1000));
  /** With milliseconds, for the detail view: `1h 02m 03.456s`. */
  function formatPrecise(ms) {
    const v = Math.max(0, Math.round(ms));
    const text = formatSeconds(Math.floor(v / 1000));
    return text.slice(0, -1) + '.' + String(v % 1000).padStart(3, '0') + 's';
  }
  /** A signed figure in milliseconds, readable: `-250 ms`, `+1h 00m 00s`. */
  function formatSignedMs(ms) {
    if (!Number.isFinite(ms)) return '—';
    if (Math.abs(ms) < 1000) return `${ms} ms`;
    return (ms < 0 ? '−' : '+') + formatPrecise(Math.abs(ms));
  }

  const numberFmt = new Intl.NumberFormat();
  const formatCount = (n) => (Number.isFinite(n) ? numberFmt.format(n) : '—');
  const timeFmt = new Intl.DateTimeFormat(undefined, {
    hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23',
  });
  const dateTimeFmt = new Intl.DateTimeFormat(undefined, {
    year: 'numeric', month: '2-digit', day: '2-digit',
    hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23',
  });
  /** Local time; the date only when it is not today. */
  function formatLocal(ms) {
    if (ms === null || !Number.isFinite(ms)) return '—';
    const d = new Date(ms);
    return d.toDateString() === new Date(serverNow()).toDateString()
      ? timeFmt.format(d) : dateTimeFmt.format(d);
  }
  /** Local date and time with milliseconds. */
  function formatLocalFull(ms) {
    if (ms === null || !Number.isFinite(ms)) return '—';
    const d = new Date(ms);
    return dateTimeFmt.format(d) + '.' + String(d.getMilliseconds()).padStart(3, '0');
  }
  const isoOrNull = (ms) => (ms === null || !Number.isFinite(ms) ? '' : new Date(ms).toISOString());

  // The key goes in the query, not the path: a browser collapses the path segments '.' and
  // '..' (encoded or not), so a key like that could not be reached by its path.
  const itemURL = (key, suffix = '', query = '') => 'api/item' + suffix + '?key=' + encodeURIComponent(key) + query;

  // ---------- The server's clock ----------

  // offset = server store clock − Date.now(), from the response with the smallest round trip.
  const clock = { offset: 0, rtt: Infinity, known: false };

  function noteServerTime(serverMs, t0, t1) {
    if (!Number.isFinite(serverMs)) return;
    const rtt = Math.max(0, t1 - t0);
    const sample = serverMs - (t0 + t1) / 2;
    // The true offset lies within sample ± rtt/2: an estimate outside that (clock set, store
    // calibrated, machine slept) is wrong whatever its round trip was.
    const inconsistent = clock.known && Math.abs(sample - clock.offset) > rtt / 2 + 500;
    if (!clock.known || rtt <= clock.rtt || inconsistent) {
      const moved = !clock.known || Math.abs(sample - clock.offset) >= 1;
      clock.offset = sample;
      clock.rtt = rtt;
      clock.known = true;
      if (moved) scheduleTick();
    }
  }

  const serverNow = () => Date.now() + clock.offset;

  // ---------- API ----------

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  const TOKEN_KEY = 'countdownToken';
  function getToken() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; }
  }
  function setToken(token) {
    try {
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) { /* storage unavailable: the token lasts as long as the page */ }
    memoryToken = token;
  }
  let memoryToken = getToken();

  function unauthorizedMessage(serverMessage) {
    if (status.readOnly) return 'This server is read-only: it was started without a write token, so it accepts no changes.';
    if (!memoryToken) return 'A write token is needed: enter it in the token field at the top and save it.';
    return 'The write token was refused' + (serverMessage ? ` (${serverMessage})` : '') + ': check it and save it again.';
  }

  /** Calls the API; resolves to `{ body, serverMs }` or throws an ApiError. */
  async function api(path, options) {
    const opts = options || {};
    const method = opts.method || 'GET';
    const init = { method, headers: { Accept: 'application/json' }, cache: 'no-store', credentials: 'same-origin' };
    if (method !== 'GET') {
      if (memoryToken) init.headers.Authorization = 'Bearer ' + memoryToken;
      // Every write is JSON, with a body or without one: the server refuses any other.
      init.headers['Content-Type'] = 'application/json';
      if (opts.body !== undefined) init.body = JSON.stringify(opts.body);
    }
    const t0 = Date.now();
    let response;
    try {
      response = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, 'network', 'Could not reach the server.');
    }
    const t1 = Date.now();
    const header = response.headers.get('X-Countdown-Now-Ms');
    const headerMs = header === null ? NaN : Number(header);
    if (Number.isFinite(headerMs)) noteServerTime(headerMs, t0, t1);
    let body = null;
    const text = await response.text().catch(() => '');
    if (text) {
      try { body = JSON.parse(text); } catch (e) { body = null; }
    }
    if (!response.ok) {
      const error = body && typeof body === 'object' ? body.error : null;
      let message = error && typeof error.message === 'string' ? error.message : `HTTP ${response.status}`;
      if (response.status === 401) message = unauthorizedMessage(error && error.message);
      throw new ApiError(response.status, (error && error.code) || 'http', message);
    }
    return { body, serverMs: Number.isFinite(headerMs) ? headerMs : serverNow() };
  }

  // ---------- Error banner ----------

  let errorTimer = 0;
  function showError(error, context) {
    const message = error && error.message ? error.message : String(error);
    setText($('error-text'), context ? `${context}: ${message}` : message);
    $('error').hidden = false;
    clearTimeout(errorTimer);
    errorTimer = setTimeout(hideError, 12000);
  }
  function hideError() {
    clearTimeout(errorTimer);
    $('error').hidden = true;
  }

  let noticeTimer = 0;
  function showNotice(text) {
    const notice = $('notice');
    setText(notice, text);
    notice.hidden = false;
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(() => { notice.hidden = true; }, 4000);
  }

  // ---------- Figures of one item at a server instant ----------

  const ACTIVE_STATES = new Set(['running', 'paused']);
  // True while no ticker runs (no live lease holder, or the host is suspended): the active
  // timeline stands still, and with it every `active` item.
  let activeFrozen = false;
  // Server time at which it stopped when a holder's lease ran out unrenewed (it counted until
  // then); null when unknown or when the host suspended (a later snapshot then tells).
  let activeFrozenAt = null;

  /** Server time up to which the item's timeline counts, from its snapshot taken at `baseMs`. */
  function countsUntil(entry, now) {
    if (entry.item.policy !== 'active' || !activeFrozen) return now;
    if (activeFrozenAt !== null && activeFrozenAt > entry.baseMs) return Math.min(now, activeFrozenAt);
    return entry.baseMs;  // stood still since the snapshot
  }

  /** `{ ms, elapsed, fraction, expiring }` for the item at server time `now`. */
  function figures(entry, now) {
    const item = entry.item;
    const running = item.state === 'running';
    if (item.kind === 'stopwatch') {
      let ms = Number(item.elapsed_ms) || 0;
      if (running) ms += countsUntil(entry, now) - entry.baseMs;
      return { ms: Math.max(0, ms), elapsed: true, fraction: null, expiring: false };
    }
    const duration = Number.isFinite(item.duration_ms) ? item.duration_ms : null;
    let remaining;
    if (item.state === 'expired') remaining = 0;
    else if (running && entry.deadlineMs !== null && countsUntil(entry, now) !== entry.baseMs) {
      remaining = Math.max(0, entry.deadlineMs - countsUntil(entry, now));
    } else if (Number.isFinite(item.remaining_ms)) remaining = Math.max(0, item.remaining_ms);
    else remaining = null;
    const fraction = duration && remaining !== null
      ? Math.min(1, Math.max(0, (duration - remaining) / duration)) : null;
    return { ms: remaining, elapsed: false, fraction, expiring: running && remaining === 0 };
  }

  // ---------- Rows ----------

  const rows = new Map(); // key → entry { key, item, baseMs, deadlineMs, tr, cells… }
  const tbody = () => $('rows');
  const filter = { state: 'active', group: null, search: '' };
  let nextCursor = null;
  let listSeq = 0;
  let loading = false;

  function matchesFilter(item) {
    if (filter.group !== null && item.group !== filter.group) return false;
    if (filter.state === 'all') return true;
    if (filter.state === 'active') return ACTIVE_STATES.has(item.state);
    return item.state === filter.state;
  }

  // The figures an item sorts by, worked out once per item object.
  const sortCache = new WeakMap();
  function sortFigures(item) {
    let figuresOf = sortCache.get(item);
    if (!figuresOf) {
      const active = ACTIVE_STATES.has(item.state);
      let time;
      if (active) {
        const deadline = item.state === 'running' ? parseTime(item.deadline_at) : null;
        time = deadline === null ? Infinity : deadline;
      } else {
        time = -(parseTime(item.expired_at) ?? parseTime(item.started_at) ?? 0);
      }
      figuresOf = { active, time };
      sortCache.set(item, figuresOf);
    }
    return figuresOf;
  }

  /** Approximates the server's order: active ones soonest to expire first, ended ones newest first. */
  function compareItems(a, b) {
    const fa = sortFigures(a);
    const fb = sortFigures(b);
    if (fa.active !== fb.active) return fa.active ? -1 : 1;
    if (fa.time !== fb.time) return fa.time < fb.time ? -1 : 1;
    return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
  }

  // The item actions the API takes, as the server lists them (dashboard-actions.js): each one's
  // name, the states of the items it applies to, whether to countdowns only, and whether its
  // body holds a duration.
  const ITEM_ACTIONS = new Map(
    (Array.isArray(self.countdownItemActions) ? self.countdownItemActions : []).map((action) => [action.name, action]));
  // The page's labels of the actions it offers a button for, in the order of the buttons; an
  // action the server does not list has none.
  const LABELS = new Map([
    ['pause', 'Pause'], ['resume', 'Resume'], ['cancel', 'Cancel'],
    ['restart', 'Restart'], ['extend', '+1m'], ['remove', 'Remove'],
  ]);
  const ACTIONS = [...LABELS].filter(([action]) => ITEM_ACTIONS.has(action));
  /** Whether `action` applies to `item` as it is: the states and kinds the server lists for it. */
  function applies(action, item) {
    const rule = ITEM_ACTIONS.get(action);
    return rule !== undefined && rule.states.includes(item.state)
      && (!rule.countdowns_only || item.kind === 'countdown');
  }

  function createEntry(key) {
    const keyButton = el('button', { type: 'button', class: 'key-link', 'data-open': '', text: key });
    const group = el('td', { class: 'group' });
    const kindText = el('span', { class: 'kind-text' });
    // A cooldown's or a debounce's rule, as a small label beside its kind.
    const rule = el('span', { class: 'rule', hidden: true });
    const kind = el('td', { class: 'kind' }, kindText, ' ', rule);
    const badge = el('span', { class: 'badge' });
    const stateCell = el('td', { class: 'state' }, badge);
    const fill = el('span', { class: 'fill' });
    const bar = el('div', { class: 'bar', 'aria-hidden': 'true' }, fill);
    const remaining = el('td', { class: 'remaining num' });
    const deadlineText = el('span', { class: 'deadline-text' });
    // A debounce's bound: its deadline never passes it.
    const bound = el('span', { class: 'bound', hidden: true });
    const deadline = el('td', { class: 'deadline num' }, deadlineText, bound);
    const actions = el('td', { class: 'actions' });
    const buttons = {};
    for (const [action, label] of ACTIONS) {
      const button = el('button', { type: 'button', class: 'act act-' + action, 'data-action': action, text: label });
      if (action === 'extend') button.setAttribute('aria-label', 'Extend by one minute');
      buttons[action] = button;
      actions.appendChild(button);
    }
    const tr = el('tr', null,
      el('td', { class: 'key' }, keyButton), group, kind, stateCell,
      el('td', { class: 'progress' }, bar), remaining, deadline, actions);
    tr.setAttribute('data-key', key);
    return {
      key, item: null, baseMs: -Infinity, deadlineMs: null, tr, keyButton, group, kind, kindText, rule, badge,
      stateCell, bar, fill, remaining, deadline, deadlineText, bound, buttons,
      shown: { state: '', text: '', pct: '' },
    };
  }

  // The rules a countdown may be started under, with what each label means.
  const RULES = new Map([
    ['cooldown', 'A cooldown: while it runs, the key’s next cooldown is refused with the time left'],
    ['debounce', 'A debounce: each call moves its deadline later, never past its bound'],
  ]);

  /** What a debounced item shows under its deadline: its bound, or its maximum wait while it has none. */
  function boundText(item) {
    const maxWait = Number.isFinite(item.max_wait_ms) ? item.max_wait_ms : null;
    if (item.rule !== 'debounce' || maxWait === null || !ACTIVE_STATES.has(item.state)) return { text: '', title: '' };
    const boundMs = parseTime(item.bound_at);
    const wait = `max wait ${formatPrecise(maxWait)}`;
    if (boundMs === null) return { text: `max wait ${formatElapsed(maxWait)}`, title: wait };
    return { text: `bound ≤ ${formatLocal(boundMs)}`, title: `${wait}: the deadline never passes ${isoOrNull(boundMs)}` };
  }

  function renderStatic(entry) {
    const item = entry.item;
    entry.deadlineMs = parseTime(item.deadline_at);
    if (item.group === null || item.group === undefined) {
      setText(entry.group, '—');
      entry.group.classList.add('muted');
    } else {
      setText(entry.group, item.group);
      entry.group.classList.remove('muted');
    }
    setText(entry.kindText, `${item.kind} · ${item.policy}`);
    const rule = RULES.has(item.rule) ? item.rule : null;
    setText(entry.rule, rule || '');
    entry.rule.hidden = rule === null;
    entry.rule.setAttribute('data-rule', rule || '');
    entry.rule.title = rule ? RULES.get(rule) : '';
    setText(entry.deadlineText, entry.deadlineMs === null ? '—' : formatLocal(entry.deadlineMs));
    entry.deadline.title = isoOrNull(entry.deadlineMs);
    const bound = boundText(item);
    setText(entry.bound, bound.text);
    entry.bound.hidden = bound.text === '';
    entry.bound.title = bound.title;
    entry.tr.setAttribute('data-state', item.state);
    entry.bar.classList.toggle('none', item.kind === 'stopwatch');
    const visible = {};
    for (const [action] of ACTIONS) visible[action] = applies(action, item);
    const focused = document.activeElement;
    for (const [action] of ACTIONS) entry.buttons[action].hidden = !visible[action];
    // Keep the keyboard where it was when pause turns into resume and back.
    if (focused === entry.buttons.pause && !visible.pause && visible.resume) entry.buttons.resume.focus();
    else if (focused === entry.buttons.resume && !visible.resume && visible.pause) entry.buttons.pause.focus();
    else if (focused && focused.hidden && entry.tr.contains(focused)) entry.keyButton.focus();
  }

  function updateRowTime(entry, now) {
    const f = figures(entry, now);
    const stateText = f.expiring ? 'expiring…' : entry.item.state;
    if (entry.shown.state !== stateText) {
      entry.shown.state = stateText;
      entry.badge.textContent = stateText;
      entry.badge.className = 'badge ' + (f.expiring ? 'expiring' : entry.item.state);
    }
    const text = f.ms === null ? '—' : f.elapsed ? formatElapsed(f.ms) : formatRemaining(f.ms);
    if (entry.shown.text !== text) {
      entry.shown.text = text;
      entry.remaining.textContent = text;
      entry.remaining.classList.toggle('elapsed', f.elapsed);
      entry.remaining.title = f.elapsed ? 'elapsed' : 'remaining';
    }
    const pct = f.fraction === null ? '0%' : (f.fraction * 100).toFixed(1) + '%';
    if (entry.shown.pct !== pct) {
      entry.shown.pct = pct;
      entry.fill.style.width = pct;
    }
  }

  function applySearch(entry) {
    const needle = filter.search;
    entry.tr.hidden = needle !== '' && !entry.key.toLowerCase().includes(needle);
  }

  function removeRow(key) {
    const entry = rows.get(key);
    if (!entry) return;
    rows.delete(key);
    entry.tr.remove();
  }

  /** Puts the row where the order says; a new row past the loaded ones waits for "Load more". */
  function placeSorted(entry, isNew) {
    const body = tbody();
    const prev = entry.tr.previousElementSibling;
    const next = entry.tr.nextElementSibling;
    if (!isNew && entry.tr.parentNode === body &&
        (!prev || compareItems(rows.get(prev.getAttribute('data-key')).item, entry.item) <= 0) &&
        (!next || compareItems(entry.item, rows.get(next.getAttribute('data-key')).item) <= 0)) {
      return true; // already in place: moving it would lose the focus
    }
    for (let tr = body.firstElementChild; tr; tr = tr.nextElementSibling) {
      if (tr === entry.tr) continue;
      const other = rows.get(tr.getAttribute('data-key'));
      if (other && compareItems(entry.item, other.item) < 0) {
        body.insertBefore(entry.tr, tr);
        return true;
      }
    }
    if (isNew && nextCursor) {
      removeRow(entry.key);
      return false;
    }
    body.appendChild(entry.tr);
    return true;
  }

  /**
   * Shows the item fetched at server time `baseMs`: `append` (a list page) or `sorted` (a single
   * fetch). An answer older than what the row shows is ignored.
   */
  function upsertRow(item, baseMs, mode) {
    if (!item || typeof item.key !== 'string') return;
    let entry = rows.get(item.key);
    if (entry && baseMs < entry.baseMs) {
      if (mode === 'append') tbody().appendChild(entry.tr);
      return;
    }
    if (!matchesFilter(item)) {
      removeRow(item.key);
      return;
    }
    const isNew = !entry;
    if (isNew) {
      entry = createEntry(item.key);
      rows.set(item.key, entry);
    }
    entry.item = item;
    entry.baseMs = baseMs;
    renderStatic(entry);
    updateRowTime(entry, serverNow());
    applySearch(entry);
    if (mode === 'append') tbody().appendChild(entry.tr);
    else placeSorted(entry, isNew);
  }

  function totalForFilter() {
    if (!status.data) return null;
    let counts = status.data.counts;
    if (filter.group !== null) {
      counts = (status.data.groups || []).find((g) => g.group === filter.group) || null;
      if (!counts) return null;
    }
    const n = (s) => Number(counts[s]) || 0;
    if (filter.state === 'active') return n('running') + n('paused');
    if (filter.state === 'all') return n('running') + n('paused') + n('expired') + n('cancelled');
    return n(filter.state);
  }

  function updateFooter() {
    const shown = rows.size;
    const total = totalForFilter();
    let text = `Showing ${formatCount(shown)}`;
    if (total !== null && total >= shown) text += ` of ${formatCount(total)}`;
    if (filter.search) {
      let matching = 0;
      for (const entry of rows.values()) if (!entry.tr.hidden) matching += 1;
      text += ` · ${formatCount(matching)} matching “${filter.search}”`;
    }
    setText($('list-count'), text);
    const more = $('more');
    more.hidden = !nextCursor;
    more.disabled = loading;
    setText(more, loading ? 'Loading…' : 'Load more');
    $('empty').hidden = loading || shown > 0;
    $('countdowns').setAttribute('aria-busy', loading ? 'true' : 'false');
  }

  /** Loads a page after the cursor, or (reset) the list again from the top, `target` rows deep. */
  async function loadList(reset, target) {
    const seq = ++listSeq;
    loading = true;
    updateFooter();
    const seen = reset ? new Set() : null;
    let cursor = reset ? null : nextCursor;
    let loaded = 0;
    let firstBase = null;
    try {
      do {
        const params = new URLSearchParams({ state: filter.state, limit: '100' });
        if (filter.group !== null) params.set('group', filter.group);
        if (cursor) params.set('after', cursor);
        const { body, serverMs } = await api('api/countdowns?' + params.toString());
        if (seq !== listSeq) return;
        const base = body && Number.isFinite(body.now_ms) ? body.now_ms : serverMs;
        if (firstBase === null) firstBase = base;
        const items = body && Array.isArray(body.items) ? body.items : [];
        for (const item of items) {
          if (seen) seen.add(item.key);
          upsertRow(item, base, 'append');
        }
        loaded += items.length;
        cursor = body && typeof body.next === 'string' && body.next !== '' ? body.next : null;
      } while (reset && cursor && loaded < (target || 100));
      nextCursor = cursor;
      if (reset) {
        for (const [key, entry] of rows) {
          if (seen.has(key)) continue;
          // A row the stream brought in after the list was read stays; any other goes.
          if (entry.baseMs > firstBase && matchesFilter(entry.item)) placeSorted(entry, true);
          else removeRow(key);
        }
      }
    } catch (error) {
      if (seq === listSeq) showError(error, 'Could not load the countdowns');
    } finally {
      if (seq === listSeq) {
        loading = false;
        updateFooter();
      }
    }
  }

  let resyncTimer = 0;
  let resyncPending = false;
  /** Reads the list again from the top, as deep as it was, once things settle. */
  function scheduleResync() {
    resyncPending = true;
    clearTimeout(resyncTimer);
    resyncTimer = setTimeout(() => {
      resyncPending = false;
      loadList(true, Math.min(Math.max(rows.size, 100), 1000));
    }, 1000);
  }

  function applyFilterChange() {
    nextCursor = null;
    for (const key of Array.from(rows.keys())) {
      const entry = rows.get(key);
      if (!matchesFilter(entry.item)) removeRow(key);
    }
    for (const button of document.querySelectorAll('#summary [data-state]')) {
      button.setAttribute('aria-pressed', String(button.getAttribute('data-state') === filter.state));
    }
    loadList(true, 100);
  }

  // ---------- The beat ----------

  let tickTimer = 0;
  function scheduleTick() {
    clearTimeout(tickTimer);
    const now = serverNow();
    const delay = 1000 - (((now % 1000) + 1000) % 1000) + 3;
    tickTimer = setTimeout(tick, delay);
  }
  function tick() {
    const now = serverNow();
    const clockText = timeFmt.format(new Date(now));
    setText($('server-clock'), clockText);
    $('server-clock').setAttribute('datetime', new Date(now).toISOString());
    for (const entry of rows.values()) updateRowTime(entry, now);
    scheduleTick();
  }

  // ---------- Updates from the stream ----------

  const queue = new Map(); // key → whether it was loaded when queued
  const inflight = new Set();
  const dirty = new Set();
  let unloadedQueued = 0;
  const MAX_PARALLEL = 4;
  const MAX_UNLOADED = 50;

  function enqueue(key, loaded) {
    if (inflight.has(key)) { dirty.add(key); return; }
    if (queue.has(key)) return;
    if (!loaded) {
      if (resyncPending) return; // the coming reload will show it
      if (unloadedQueued >= MAX_UNLOADED) {
        // A flood (mass start, mass expiry): read the list again instead of key by key.
        for (const [k, wasLoaded] of Array.from(queue)) {
          if (!wasLoaded) queue.delete(k);
        }
        unloadedQueued = 0;
        scheduleResync();
        return;
      }
      unloadedQueued += 1;
    }
    queue.set(key, loaded);
    pump();
  }

  function pump() {
    while (inflight.size < MAX_PARALLEL && queue.size > 0) {
      const [key, loaded] = queue.entries().next().value;
      queue.delete(key);
      if (!loaded) unloadedQueued -= 1;
      inflight.add(key);
      refreshKey(key).finally(() => {
        inflight.delete(key);
        if (dirty.delete(key)) enqueue(key, rows.has(key));
        pump();
      });
    }
  }

  async function refreshKey(key) {
    try {
      const { body, serverMs } = await api(itemURL(key));
      upsertRow(body, serverMs, 'sorted');
    } catch (error) {
      if (error.status === 404) removeRow(key);
    }
    updateFooter();
  }

  // The state an event leaves its item in, when the kind says so.
  const KIND_STATE = {
    started: 'running', stopwatch_started: 'running', replaced: 'running', resumed: 'running',
    paused: 'paused', cancelled: 'cancelled', expired: 'expired',
  };
  const CLOCK_KINDS = new Set(['calibrated', 'clock_edited', 'host_suspended', 'host_resumed']);

  function handleEvent(event) {
    if (!event || typeof event !== 'object') return;
    const kind = String(event.event || '');
    scheduleStatus();
    if (CLOCK_KINDS.has(kind)) {
      clock.rtt = Infinity; // the store clock may have moved: take the next answer as it is
      scheduleResync();
      if (detail.key !== null) scheduleDetailRefresh();
      return;
    }
    if (kind === 'pruned') {
      if (filter.state !== 'active' && filter.state !== 'running' && filter.state !== 'paused') scheduleResync();
      return;
    }
    const key = event.key;
    if (typeof key !== 'string') return;
    if (key === detail.key) scheduleDetailRefresh();
    if (rows.has(key)) { enqueue(key, true); return; }
    if (kind === 'removed') return;
    // Not shown: fetch it only if it may belong in the list.
    if (filter.group !== null && event.group !== filter.group) return;
    const state = KIND_STATE[kind];
    if (state && filter.state !== 'all' &&
        !(filter.state === 'active' ? ACTIVE_STATES.has(state) : filter.state === state)) return;
    enqueue(key, false);
  }

  let stream = null;
  let streamBroken = false;
  let streamRetry = 1000;
  function setConnection(state) {
    const node = $('connection');
    setText(node, state);
    node.setAttribute('data-state', state);
    node.title = state === 'live' ? 'Receiving changes as they happen' : 'Waiting for the server’s event stream';
  }
  function connectStream() {
    if (typeof EventSource !== 'function') { setConnection('offline'); return; }
    setConnection(streamBroken ? 'reconnecting' : 'connecting');
    const source = new EventSource('api/stream');
    stream = source;
    source.onopen = () => {
      setConnection('live');
      streamRetry = 1000;
      if (streamBroken) {
        // Changes may have been missed while away.
        streamBroken = false;
        scheduleResync();
        scheduleStatus();
      }
    };
    source.onerror = () => {
      streamBroken = true;
      if (source.readyState === EventSource.CLOSED) {
        source.close();
        if (stream === source) stream = null;
        setConnection('reconnecting');
        setTimeout(connectStream, streamRetry);
        streamRetry = Math.min(streamRetry * 2, 30000);
      } else {
        setConnection('reconnecting');
      }
    };
    source.onmessage = (message) => {
      let event;
      try { event = JSON.parse(message.data); } catch (e) { return; }
      handleEvent(event);
    };
  }

  // ---------- Status and the store ----------

  const status = { data: null, readOnly: false, groupsSignature: '' };
  let statusTimer = 0;
  let statusLast = 0;

  function scheduleStatus() {
    if (statusTimer) return;
    const wait = Math.max(0, statusLast + 2000 - Date.now());
    statusTimer = setTimeout(() => {
      statusTimer = 0;
      refreshStatus();
    }, wait);
  }

  async function refreshStatus() {
    statusLast = Date.now();
    try {
      const { body } = await api('api/status');
      renderStatus(body || {});
    } catch (error) {
      showError(error, 'Could not read the store’s status');
    }
  }

  function setField(id, text, title) {
    const node = $(id);
    setText(node, text);
    if (title !== undefined) node.title = title;
  }

  function renderStatus(s) {
    status.data = s;
    status.readOnly = s.read_only === true;
    $('readonly').hidden = !status.readOnly;
    document.body.classList.toggle('read-only', status.readOnly);

    const counts = s.counts || {};
    for (const state of ['running', 'paused', 'expired', 'cancelled']) {
      setText($('count-' + state), formatCount(Number(counts[state]) || 0));
    }

    // Groups: rebuilt only when the list of names changes, so an open select stays open.
    const names = (Array.isArray(s.groups) ? s.groups : [])
      .map((g) => g.group).filter((g) => typeof g === 'string');
    if (filter.group !== null && !names.includes(filter.group)) names.push(filter.group);
    names.sort((a, b) => a.localeCompare(b));
    const signature = JSON.stringify(names);
    if (signature !== status.groupsSignature) {
      status.groupsSignature = signature;
      const select = $('group-filter');
      const options = [el('option', { value: '', text: 'All groups' })];
      for (const name of names) {
        const option = el('option', { text: name === '' ? '(empty name)' : name });
        option.value = '=' + name;
        options.push(option);
      }
      select.replaceChildren(...options);
      select.value = filter.group === null ? '' : '=' + filter.group;
    }

    const c = s.clock || {};
    const lease = s.lease || {};
    const now = serverNow();
    const leaseExpires = parseTime(lease.expires_at);
    const ticking = typeof lease.holder === 'string' && lease.holder !== '' &&
      (leaseExpires === null || leaseExpires > now) && c.suspended !== true;
    const wasFrozen = activeFrozen;
    activeFrozen = !ticking;
    // A lease that ran out unrenewed counted until its end (the time model): not a suspend.
    activeFrozenAt = !ticking && c.suspended !== true && leaseExpires !== null ? leaseExpires : null;
    if (wasFrozen !== activeFrozen) for (const entry of rows.values()) updateRowTime(entry, now);

    setField('lease-holder', lease.holder ? String(lease.holder) : 'free (no ticker running)');
    setField('lease-this', lease.holder ? (lease.this_server ? 'yes' : 'no, another process') : '—');
    setField('lease-expires', formatLocalFull(leaseExpires), lease.expires_at || '');
    setField('clock-wall', formatLocalFull(Number.isFinite(c.wall_ms) ? c.wall_ms : null), `W = ${c.wall_ms} ms`);
    setField('clock-active', Number.isFinite(c.active_ms) ? formatPrecise(c.active_ms) : '—', `A = ${c.active_ms} ms`);
    setField('clock-gap', Number.isFinite(c.gap_ms) ? formatPrecise(c.gap_ms) : '—', `G = ${c.gap_ms} ms`);
    const calibratedAt = parseTime(c.calibrated_at);
    setField('clock-offset', formatSignedMs(c.calibration_offset_ms) +
      (calibratedAt === null ? ', never set' : `, set ${formatLocalFull(calibratedAt)}`), c.calibrated_at || '');
    setField('clock-skew', formatSignedMs(c.skew_ms), 'system clock + calibration − store clock');
    setField('clock-suspended', c.suspended ? 'suspended' : 'not suspended');
    $('clock-suspended').classList.toggle('warn', c.suspended === true);
    setField('clock-heartbeat', formatLocalFull(parseTime(c.last_heartbeat)), c.last_heartbeat || '');
    setField('clock-created', formatLocalFull(parseTime(c.created_at)), c.created_at || '');
    setField('ticking', ticking ? 'ticking' : 'not ticking');
    $('ticking').setAttribute('data-state', ticking ? 'on' : 'off');

    const consumers = Array.isArray(s.consumers) ? s.consumers : [];
    const consumerRows = consumers.map((consumer) => el('tr', null,
      el('td', { text: String(consumer.name) }),
      el('td', { class: 'num', text: formatCount(Number(consumer.acknowledged_through)) }),
      el('td', { class: 'num' + (Number(consumer.lag) > 0 ? ' warn' : ''), text: formatCount(Number(consumer.lag)) })));
    $('consumers-body').replaceChildren(...consumerRows);
    $('consumers').hidden = consumers.length === 0;
    $('no-consumers').hidden = consumers.length !== 0;

    updateFooter();
  }

  // ---------- Detail panel ----------

  const detail = { key: null, item: null, baseMs: 0, deadlineMs: null, seq: 0, raf: 0, timer: 0, opener: null };

  async function openDetail(key, fromSearch) {
    let result;
    try {
      result = await api(itemURL(key));
    } catch (error) {
      if (error.status === 404) showError(new Error(`No countdown has the key “${key}”.`));
      else showError(error, 'Could not open the countdown');
      if (!fromSearch && error.status === 404) removeRow(key);
      return;
    }
    detail.opener = document.activeElement;
    detail.key = key;
    detail.seq += 1;
    $('detail').hidden = false;
    $('backdrop').hidden = false;
    setText($('detail-title'), key);
    showDetailItem(result.body, result.serverMs);
    $('detail-events').replaceChildren(el('li', { class: 'muted', text: 'Loading events…' }));
    $('detail-close').focus();
    loadDetailEvents(detail.seq);
  }

  function closeDetail() {
    if (detail.key === null) return;
    detail.key = null;
    detail.item = null;
    detail.seq += 1;
    cancelAnimationFrame(detail.raf);
    detail.raf = 0;
    $('detail').hidden = true;
    $('backdrop').hidden = true;
    if (detail.opener && document.contains(detail.opener)) detail.opener.focus();
    detail.opener = null;
  }

  function scheduleDetailRefresh() {
    if (detail.timer) return;
    detail.timer = setTimeout(async () => {
      detail.timer = 0;
      if (detail.key === null) return;
      const seq = ++detail.seq;
      const key = detail.key;
      try {
        const { body, serverMs } = await api(itemURL(key));
        if (seq === detail.seq) showDetailItem(body, serverMs);
      } catch (error) {
        if (seq === detail.seq && error.status === 404) showDetailGone();
      }
      if (seq === detail.seq) loadDetailEvents(seq);
    }, 300);
  }

  async function loadDetailEvents(seq) {
    const key = detail.key;
    try {
      const { body } = await api(itemURL(key, '/events', '&limit=50'));
      if (seq !== detail.seq) return;
      renderEvents(body && Array.isArray(body.items) ? body.items : []);
    } catch (error) {
      if (seq !== detail.seq) return;
      $('detail-events').replaceChildren(el('li', { class: 'muted', text: 'Events unavailable: ' + error.message }));
    }
  }

  function showDetailGone() {
    detail.item = null;
    cancelAnimationFrame(detail.raf);
    detail.raf = 0;
    setText($('detail-live'), 'removed');
    $('detail-live-label').textContent = 'This key holds no countdown any more.';
    $('detail-fill').style.width = '0%';
    $('detail-fields').replaceChildren();
  }

  function showDetailItem(item, baseMs) {
    if (!item || item.key !== detail.key) return;
    detail.item = item;
    detail.baseMs = baseMs;
    detail.deadlineMs = parseTime(item.deadline_at);
    const fields = [
      ['key', item.key], ['group', item.group], ['kind', item.kind], ['policy', item.policy],
      ['state', item.state],
      ['duration', Number.isFinite(item.duration_ms) ? `${formatPrecise(item.duration_ms)} (${item.duration_ms} ms)` : null],
      ['elapsed_ms', item.elapsed_ms], ['remaining_ms', item.remaining_ms],
      ['started_at', item.started_at], ['deadline_at', item.deadline_at], ['expired_at', item.expired_at],
      ['generation', item.generation],
    ];
    if (RULES.has(item.rule)) fields.push(['rule', item.rule]);
    if (Number.isFinite(item.max_wait_ms)) {
      fields.push(['max_wait', `${formatPrecise(item.max_wait_ms)} (${item.max_wait_ms} ms)`], ['bound_at', item.bound_at]);
    }
    const list = [];
    for (const [name, value] of fields) {
      let shown = value === null || value === undefined ? '—' : String(value);
      const ms = name.endsWith('_at') ? parseTime(value) : null;
      if (ms !== null) shown = `${formatLocalFull(ms)} (${value})`;
      list.push(el('dt', { text: name }), el('dd', { class: 'num', text: shown }));
    }
    list.push(el('dt', { text: 'payload' }),
      el('dd', null, item.payload === null || item.payload === undefined
        ? el('span', { class: 'muted', text: '—' })
        : el('pre', { class: 'payload', text: String(item.payload) })));
    $('detail-fields').replaceChildren(...list);
    const badge = $('detail-state');
    badge.className = 'badge ' + item.state;
    setText(badge, item.state);
    setText($('detail-live-label'), item.kind === 'stopwatch' ? 'elapsed' : 'remaining');
    $('detail-bar').classList.toggle('none', item.kind === 'stopwatch');
    renderDetailLive();
    if (!detail.raf && item.state === 'running') detail.raf = requestAnimationFrame(detailFrame);
  }

  function renderDetailLive() {
    const item = detail.item;
    if (!item) return;
    const f = figures({ item, baseMs: detail.baseMs, deadlineMs: detail.deadlineMs }, serverNow());
    setText($('detail-live'), f.ms === null ? '—' : formatPrecise(f.ms));
    $('detail-fill').style.width = f.fraction === null ? '0%' : (f.fraction * 100).toFixed(2) + '%';
    const badge = $('detail-state');
    if (f.expiring) {
      badge.className = 'badge expiring';
      setText(badge, 'expiring…');
    }
  }

  function detailFrame() {
    detail.raf = 0;
    if (!detail.item || detail.key === null) return;
    renderDetailLive();
    if (detail.item.state === 'running') detail.raf = requestAnimationFrame(detailFrame);
  }

  function renderEvents(events) {
    if (events.length === 0) {
      $('detail-events').replaceChildren(el('li', { class: 'muted', text: 'No events recorded.' }));
      return;
    }
    const items = events.map((event) => {
      const recorded = parseTime(event.recorded_at);
      const head = el('div', { class: 'event-head' },
        el('span', { class: 'event-kind', 'data-kind': String(event.event), text: String(event.event) }),
        el('time', { class: 'num', datetime: event.recorded_at || '', text: formatLocalFull(recorded) }),
        el('span', { class: 'muted num', text: `#${event.id}` }));
      const meta = [];
      if (event.generation !== null && event.generation !== undefined) meta.push(['generation', String(event.generation)]);
      if (event.late_ms !== null && event.late_ms !== undefined) meta.push(['late', `${event.late_ms} ms`]);
      if (event.deadline_at) meta.push(['deadline', formatLocalFull(parseTime(event.deadline_at))]);
      if (event.fired_at) meta.push(['fired', formatLocalFull(parseTime(event.fired_at))]);
      if (event.payload !== null && event.payload !== undefined) meta.push(['payload', String(event.payload)]);
      const metaList = el('dl', { class: 'event-meta' });
      for (const [name, value] of meta) metaList.append(el('dt', { text: name }), el('dd', { class: 'num', text: value }));
      return el('li', { class: 'event' }, head,
        meta.length ? metaList : null,
        event.detail ? el('code', { class: 'event-detail', text: String(event.detail) }) : null);
    });
    $('detail-events').replaceChildren(...items);
  }

  // ---------- Writes ----------

  async function runAction(key, action, button) {
    if (action === 'remove' && !window.confirm(`Remove the countdown “${key}”? Its row and history go.`)) return;
    button.disabled = true;
    try {
      const { body, serverMs } = await api(itemURL(key, '/' + action),
        { method: 'POST', body: ITEM_ACTIONS.get(action)?.takes_duration ? { duration: '1m' } : undefined });
      if (action === 'remove') {
        removeRow(key);
        if (detail.key === key) showDetailGone();
      } else {
        upsertRow(body, serverMs, 'sorted');
        if (detail.key === key) showDetailItem(body, serverMs);
      }
      updateFooter();
      scheduleStatus();
    } catch (error) {
      showError(error, `Could not ${action === 'extend' ? 'extend' : action} “${key}”`);
      if (error.status === 404) { removeRow(key); updateFooter(); }
    } finally {
      button.disabled = false;
    }
  }

  async function submitNew(event) {
    event.preventDefault();
    const form = $('new');
    const data = new FormData(form);
    const key = String(data.get('key') || '');
    const duration = String(data.get('duration') || '').trim();
    const group = String(data.get('group') || '');
    const payload = String(data.get('payload') || '');
    if (key === '' || duration === '') {
      showError(new Error('A key and a duration (like 90s, 15m, 1h30m) are needed.'));
      return;
    }
    const submit = form.querySelector('button[type="submit"]');
    submit.disabled = true;
    try {
      const { body, serverMs } = await api('api/countdowns', {
        method: 'POST',
        body: { key, duration, group: group === '' ? null : group, policy: String(data.get('policy') || 'wall'), payload: payload === '' ? null : payload },
      });
      upsertRow(body, serverMs, 'sorted');
      updateFooter();
      scheduleStatus();
      form.elements.namedItem('key').value = '';
      showNotice(`Started “${key}”.`);
    } catch (error) {
      showError(error, `Could not start “${key}”`);
    } finally {
      submit.disabled = false;
    }
  }

  function renderTokenState() {
    const state = $('token-state');
    setText(state, memoryToken ? 'writes enabled' : 'no token');
    state.setAttribute('data-state', memoryToken ? 'on' : 'off');
    setText($('token-save'), memoryToken ? 'Update' : 'Use token');
  }

  // ---------- Wiring ----------

  function init() {
    $('token').value = memoryToken;
    renderTokenState();
    $('token-form').addEventListener('submit', (event) => {
      event.preventDefault();
      setToken($('token').value.trim());
      renderTokenState();
      showNotice(memoryToken ? 'Token saved for this tab.' : 'Token forgotten.');
    });

    $('error-close').addEventListener('click', hideError);
    $('new').addEventListener('submit', submitNew);

    $('state-filter').addEventListener('change', (event) => {
      filter.state = event.target.value;
      applyFilterChange();
    });
    $('group-filter').addEventListener('change', (event) => {
      const value = event.target.value;
      filter.group = value === '' ? null : value.slice(1);
      applyFilterChange();
    });
    for (const card of document.querySelectorAll('#summary [data-state]')) {
      card.addEventListener('click', () => {
        filter.state = card.getAttribute('data-state');
        $('state-filter').value = filter.state;
        applyFilterChange();
      });
    }

    const search = $('search');
    search.addEventListener('input', () => {
      filter.search = search.value.toLowerCase();
      for (const entry of rows.values()) applySearch(entry);
      updateFooter();
    });
    search.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') {
        event.preventDefault();
        if (search.value !== '') openDetail(search.value, true);
      }
    });

    $('rows').addEventListener('click', (event) => {
      const target = event.target instanceof Element ? event.target.closest('button') : null;
      if (!target) return;
      const tr = target.closest('tr[data-key]');
      if (!tr) return;
      const key = tr.getAttribute('data-key');
      const action = target.getAttribute('data-action');
      if (action) runAction(key, action, target);
      else if (target.hasAttribute('data-open')) openDetail(key, false);
    });

    $('more').addEventListener('click', () => { if (!loading && nextCursor) loadList(false); });
    $('detail-close').addEventListener('click', closeDetail);
    $('backdrop').addEventListener('click', closeDetail);
    document.addEventListener('keydown', (event) => {
      if (event.key === 'Escape' && detail.key !== null) closeDetail();
    });
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'visible') {
        tick();
        scheduleStatus();
      }
    });

    filter.state = $('state-filter').value || 'active';
    for (const button of document.querySelectorAll('#summary [data-state]')) {
      button.setAttribute('aria-pressed', String(button.getAttribute('data-state') === filter.state));
    }
    connectStream();
    refreshStatus();
    loadList(true, 100);
    setInterval(scheduleStatus, 15000); // lease, heartbeat and the clock offset, not the rows
    tick();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
