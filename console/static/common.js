// The Pier console's shared parts: DOM building (text only, never innerHTML), the API client
// (errors read from problem JSON `title`/`detail` or Confluent's `message`), tables, banners,
// the page layout and a hash router. Credentials live in sessionStorage only (gone when the tab
// closes) and are sent on each request; fetch runs with `credentials: "omit"`, so no cookie is
// sent and the browser never opens its own login dialog on a 401.
"use strict";

const Pier = (() => {
  function append(node, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach((c) => append(node, c)); return; }
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }

  function build(node, attrs, children) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "text") node.textContent = value;
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    append(node, children);
    return node;
  }

  const h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);
  const svg = (tag, attrs, ...children) =>
    build(document.createElementNS("http://www.w3.org/2000/svg", tag), attrs, children);

  class ApiError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  function errorMessage(status, data) {
    if (data && typeof data === "object") {
      if (data.title || data.detail) return [data.title, data.detail].filter(Boolean).join(": ");
      if (data.message) return String(data.message);
    }
    return `the server answered HTTP ${status}`;
  }

  async function request(method, path, { auth, body, accept, contentType } = {}) {
    const headers = { Accept: accept || "application/json" };
    if (auth) headers.Authorization = auth;
    if (body !== undefined) headers["Content-Type"] = contentType || "application/json";
    let response;
    try {
      response = await fetch(path, {
        method, headers, credentials: "omit", cache: "no-store",
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (error) {
      throw new ApiError(0, `the server did not answer (${error.message})`);
    }
    const text = await response.text();
    let data = null;
    if (text) { try { data = JSON.parse(text); } catch (_) { data = text; } }
    if (!response.ok) throw new ApiError(response.status, errorMessage(response.status, data));
    return data;
  }

  function banner(kind, text) {
    return h("div", { class: `banner ${kind}`, role: kind === "error" ? "alert" : "status" }, text);
  }

  function badge(text) { return h("span", { class: `badge ${text}` }, text); }

  // columns: [{ title, cell: (row) => node | text, num }]
  function table(columns, rows, emptyText, attrs) {
    const head = h("tr", null, columns.map((c) => h("th", { class: c.num ? "num" : null }, c.title)));
    const body = rows.length
      ? rows.map((row) => h("tr", null, columns.map((c) => h("td", { class: c.num ? "num" : null }, c.cell(row)))))
      : [h("tr", null, h("td", { class: "empty", colspan: columns.length }, emptyText))];
    return h("table", attrs || null, h("thead", null, head), h("tbody", null, body));
  }

  function card(title, ...children) {
    return h("section", { class: "card" }, title ? h("h2", null, title) : null, children);
  }

  function field(label, input) { return h("label", null, label, input); }

  // A form whose submit runs `action(values)`; errors show in a banner above it.
  function form(fields, submitLabel, action, attrs) {
    const status = h("div");
    const button = h("button", { class: "primary", type: "submit" }, submitLabel);
    const node = h("form", attrs || null, status, h("div", { class: "row" }, fields, button));
    node.addEventListener("submit", async (event) => {
      event.preventDefault();
      status.replaceChildren();
      button.disabled = true;
      try {
        const values = Object.fromEntries(new FormData(node).entries());
        await action(values);
      } catch (error) {
        if (error instanceof ApiError && error.status === 401) { App.unauthorized(error); return; }
        status.replaceChildren(banner("error", error.message));
      } finally { button.disabled = false; }
    });
    return node;
  }

  const bytes = (n) => {
    const value = Number(n);
    if (!Number.isFinite(value)) return String(n);
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0, v = value;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
    return `${i ? v.toFixed(1) : v} ${units[i]}`;
  };
  const time = (iso) => (iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC") : "—");
  const hourIso = (date) => date.toISOString().slice(0, 13) + ":00:00Z";

  // The app: a layout around pages chosen by the location hash.
  const App = {
    config: null,
    start(config) { this.config = config; window.addEventListener("hashchange", () => this.render()); this.render(); },
    root() { return document.getElementById("app"); },
    unauthorized(error) {
      this.config.signOut();
      this.render(`Signed out: the server refused these credentials (HTTP 401: ${error.message}). Sign in again with valid ones.`);
    },
    async render(loginMessage) {
      const config = this.config;
      if (!config.signedIn()) { this.root().replaceChildren(config.login(loginMessage)); return; }
      const hash = location.hash.replace(/^#/, "") || config.home;
      const route = config.routes.find(([pattern]) => pattern.test(hash));
      const [pattern, page, section] = route || [null, null, null];
      const main = h("main", { id: "content" }, h("p", { class: "sub" }, "Loading…"));
      const nav = h("nav", null, config.nav.map(([href, label, key]) =>
        h("a", { href, class: key === section ? "active" : null, "data-nav": key }, label)));
      const who = h("div", { class: "who" }, config.who(), h("br"),
        h("button", { type: "button", id: "sign-out", onclick: () => { config.signOut(); location.hash = ""; this.render(); } }, "Sign out"));
      this.root().replaceChildren(h("div", { class: "layout" },
        h("aside", { class: "sidebar" }, h("div", { class: "brand" }, h("img", { src: "/console/static/pier.svg", alt: "" }), "Pier", h("small", null, config.title)), nav, who),
        main));
      if (!page) { main.replaceChildren(banner("error", `no page at #${hash}`)); return; }
      try {
        const content = await page(...hash.match(pattern).slice(1).map((part) => (part === undefined ? undefined : decodeURIComponent(part))));
        main.replaceChildren(content);
      } catch (error) {
        if (error instanceof ApiError && error.status === 401) { this.unauthorized(error); return; }
        main.replaceChildren(banner("error", error.message || String(error)));
      }
    },
  };

  function loginPage(title, intro, fields, message, submit) {
    return h("div", { class: "login" },
      h("section", { class: "card" },
        h("h1", null, h("img", { src: "/console/static/pier.svg", alt: "", width: 22, height: 22 }), " Pier · ", title),
        h("p", { class: "sub" }, intro),
        message ? banner("error", message) : null,
        form(fields, "Sign in", submit, { id: "login" })));
  }

  return { h, svg, ApiError, request, banner, badge, table, card, field, form, bytes, time, hourIso, App, loginPage };
})();
