// Small DOM helpers and formatting shared by the pages.

/** An element: `h("a", {href: "#/"}, "text", child)`; `on*` attributes become listeners, null children are skipped. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

/** An SVG element (charts and trees). */
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) el.setAttribute(k, v);
  append(el, children);
  return el;
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A table: `cols` are [heading, cell(row)] pairs; `caption` names it for screen readers. */
export function table(caption, cols, rows, attrs = {}) {
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      attrs,
      h("caption", {}, caption),
      h("thead", {}, h("tr", {}, cols.map(([name]) => h("th", { scope: "col" }, name)))),
      h("tbody", {}, rows.map((r) => h("tr", {}, cols.map(([, cell]) => h("td", {}, cell(r)))))),
    ),
  );
}

export const short = (addr) => (addr ? `${addr.slice(0, 6)}…${addr.slice(-4)}` : "");

/** An address shown short, in full on hover and to screen readers. */
export const addr = (a) => h("span", { class: "addr", title: a, "aria-label": a }, short(a));

/** Wei as ether (display only: JSON numbers past 2^53 are rounded already). */
export function eth(wei) {
  const v = Number(wei) / 1e18;
  return `${v.toLocaleString("en-US", { maximumFractionDigits: 6 })} ETH`;
}

export const num = (v, digits = 4) =>
  v === null || v === undefined ? "–" : Number(v).toLocaleString("en-US", { maximumFractionDigits: digits });

/** Fixed point (1e18 = 1.0) as a number. */
export const fixed = (v) => Number(v) / 1e18;

/** Call `fn` at most once per `ms`, after the last request in a burst. */
export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

const messages = () => document.getElementById("messages");

/** A message in the live region: errors as alerts (with the API's reason), others as status lines. */
export function say(text, kind = "info") {
  const el = h("p", { class: `msg ${kind}`, role: kind === "error" ? "alert" : null }, text);
  const close = h("button", { type: "button", class: "close", "aria-label": "Dismiss", onclick: () => el.remove() }, "×");
  el.append(close);
  messages().prepend(el);
  while (messages().children.length > 4) messages().lastChild.remove();
  if (kind !== "error") setTimeout(() => el.remove(), 8000);
  return el;
}

/** Run an action from a button: disabled while it runs, its error shown with its reason. */
export async function busy(button, action) {
  button.disabled = true;
  button.setAttribute("aria-busy", "true");
  try {
    return await action();
  } catch (err) {
    say(err.message, "error");
    return undefined;
  } finally {
    button.disabled = false;
    button.removeAttribute("aria-busy");
  }
}

/** Offer `text` as a file download. */
export function download(name, text, type = "text/plain") {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = h("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
