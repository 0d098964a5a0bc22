// The operator console, served by the admin API: every call goes to the admin API's own routes
// (its OpenAPI document is /openapi.json) with `Authorization: Bearer <operator token>`.
"use strict";

(() => {
  const { h, request, banner, badge, table, card, field, form, bytes, time, App, loginPage } = Pier;
  const TOKEN = "pier.console.operatorToken";
  const token = () => sessionStorage.getItem(TOKEN);
  const api = (method, path, body) => request(method, path, { auth: `Bearer ${token()}`, body });
  const enc = encodeURIComponent;
  const show = (node) => document.getElementById("content").replaceChildren(node);
  const TABS = [["overview", "Overview"], ["keys", "Service accounts & keys"], ["quotas", "Quotas"],
    ["usage", "Usage"], ["invoices", "Invoices"], ["consumers", "HTTP consumers"]];
  const QUOTAS = ["producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"];

  function login(message) {
    const input = h("input", { name: "token", id: "token", type: "password", autocomplete: "off", required: true });
    return loginPage("operator", "Paste an operator token (`pier tenancy init` prints the first; infra/up keeps it in .pier/operator-token). It stays in this tab only.",
      [field("Operator token", input)], message, async ({ token: value }) => {
        sessionStorage.setItem(TOKEN, value.trim());
        await api("GET", "/v1/tenants?limit=1");
        App.render();
      });
  }

  async function tenantsPage() {
    const [page, plans] = await Promise.all([api("GET", "/v1/tenants?limit=1000"), api("GET", "/v1/plans")]);
    const rows = page.items;
    const create = form([
      field("Id (optional)", h("input", { name: "id", id: "new-tenant-id", placeholder: "a-z, 3–16", pattern: "[a-z][a-z0-9-]{2,15}" })),
      field("Display name", h("input", { name: "display_name", id: "new-tenant-name", required: true })),
      field("Plan", h("select", { name: "plan", id: "new-tenant-plan" }, plans.items.map((p) => h("option", { value: p.name }, p.name)))),
      field("Authorization", h("select", { name: "authorization", id: "new-tenant-authorization" },
        h("option", { value: "" }, "the plan's"), h("option", { value: "acls" }, "acls (ACLs grant access)"), h("option", { value: "open" }, "open (unnamed resources open)"))),
    ], "Create tenant", async (v) => {
      const body = { display_name: v.display_name, plan: v.plan };
      if (v.id) body.id = v.id;
      if (v.authorization) body.authorization = v.authorization;
      const made = await api("POST", "/v1/tenants", body);
      location.hash = `#/tenants/${enc(made.id)}/keys`;
    }, { id: "create-tenant" });
    return h("div", null,
      h("h1", null, "Tenants"), h("p", { class: "sub" }, `${rows.length} tenant(s)${page.next_cursor ? " (first 1000)" : ""}`),
      card("New tenant", create),
      card(null, table([
        { title: "Id", cell: (t) => h("a", { href: `#/tenants/${enc(t.id)}` }, t.id) },
        { title: "Name", cell: (t) => t.display_name },
        { title: "Plan", cell: (t) => t.plan },
        { title: "Status", cell: (t) => badge(t.status) },
        { title: "Authorization", cell: (t) => t.authorization },
        { title: "Created", cell: (t) => time(t.created_at) },
      ], rows, "No tenants yet: create the first one above.", { id: "tenants" })));
  }

  async function tenantPage(id, tab, extra) {
    tab = tab || "overview";
    const tenant = await api("GET", `/v1/tenants/${enc(id)}`);
    const action = tenant.status === "active" ? ["suspend", "Suspend"] : tenant.status === "suspended" ? ["resume", "Reactivate"] : null;
    const header = h("div", { class: "row" },
      h("div", { class: "grow" }, h("h1", null, tenant.display_name, " ", badge(tenant.status)),
        h("p", { class: "sub" }, h("code", null, tenant.id), ` · plan ${tenant.plan} · authorization ${tenant.authorization}`)),
      action ? h("button", { type: "button", id: `tenant-${action[0]}`, class: action[0] === "suspend" ? "danger" : null, onclick: async () => {
        try { await api("POST", `/v1/tenants/${enc(id)}/${action[0]}`); App.render(); } catch (e) { show(banner("error", e.message)); }
      } }, action[1]) : null);
    const tabs = h("div", { class: "tabs" }, TABS.map(([key, label]) =>
      h("a", { href: `#/tenants/${enc(id)}/${key}`, class: key === tab ? "active" : null, "data-tab": key }, label)));
    const body = await (TAB_PAGES[tab] || overview)(tenant, extra);
    return h("div", null, header, tabs, body);
  }

  // a null limit: no cap for the rate caps; the gateway's setting for the group and id counts
  const NULL_LIMIT = { max_groups: "gateway default", max_transactional_ids: "gateway default" };

  function overview(tenant) {
    const limits = Object.entries(tenant.limits);
    return h("div", null,
      card("Tenant", h("dl", { class: "kv" },
        ["id", "display_name", "plan", "status", "authorization", "created_at", "updated_at"].map((k) =>
          [h("dt", null, k.replace("_", " ")), h("dd", null, k.endsWith("_at") ? time(tenant[k]) : tenant[k])]))),
      card("Limits", table([{ title: "Limit", cell: (r) => r[0] }, { title: "Value", num: true, cell: (r) => (r[1] === null ? NULL_LIMIT[r[0]] || "none" : String(r[1])) }], limits, "No limits")));
  }

  async function keys(tenant, created) {
    const id = enc(tenant.id);
    const [accounts, apiKeys] = await Promise.all([
      api("GET", `/v1/tenants/${id}/service-accounts?limit=1000`), api("GET", `/v1/tenants/${id}/api-keys?limit=1000`)]);
    const rerender = async (made) => show(await tenantPage(tenant.id, "keys", made));
    const secret = created ? h("div", { class: "secret", id: "new-secret" },
      h("strong", null, "Copy this secret now: it is shown once and never again."),
      h("div", null, "Key id ", h("code", { id: "new-key-id" }, created.key)),
      h("div", null, "Secret ", h("code", { id: "new-key-secret" }, created.secret))) : null;
    const accountForm = form([
      field("Name", h("input", { name: "name", id: "new-account-name", required: true, maxlength: 64 })),
      field("Description", h("input", { name: "description", id: "new-account-description", maxlength: 1000 })),
    ], "Create service account", async (v) => {
      await api("POST", `/v1/tenants/${id}/service-accounts`, { name: v.name, description: v.description || "" });
      await rerender(null);
    }, { id: "create-account" });
    const keyForm = accounts.items.length ? form([
      field("Service account", h("select", { name: "service_account_id", id: "new-key-account" },
        accounts.items.map((a) => h("option", { value: a.id }, `${a.name} (${a.id})`)))),
      field("Description", h("input", { name: "description", id: "new-key-description", maxlength: 1000 })),
    ], "Create API key", async (v) => {
      await rerender(await api("POST", `/v1/tenants/${id}/api-keys`, { service_account_id: v.service_account_id, description: v.description || "" }));
    }, { id: "create-key" }) : h("p", { class: "empty" }, "Create a service account first: keys belong to one.");
    const revoke = (key) => {
      if (key.revoked_at) return badge("revoked");
      const button = h("button", { type: "button", class: "danger", "data-revoke": key.key }, "Revoke");
      button.addEventListener("click", async () => {
        if (button.dataset.confirm !== "yes") { button.dataset.confirm = "yes"; button.textContent = "Confirm revoke"; return; }
        try { await api("DELETE", `/v1/api-keys/${enc(key.key)}`); await rerender(null); } catch (e) { show(banner("error", e.message)); }
      });
      return button;
    };
    return h("div", null, secret,
      card("Service accounts", table([
        { title: "Id", cell: (a) => h("code", null, a.id) }, { title: "Name", cell: (a) => a.name },
        { title: "Description", cell: (a) => a.description }, { title: "Created", cell: (a) => time(a.created_at) },
      ], accounts.items, "No service accounts yet.", { id: "accounts" }), accountForm),
      card("API keys", table([
        { title: "Key id", cell: (k) => h("code", null, k.key) }, { title: "Service account", cell: (k) => k.service_account_id },
        { title: "Description", cell: (k) => k.description }, { title: "Created", cell: (k) => time(k.created_at) },
        { title: "Last used", cell: (k) => time(k.last_used_at) }, { title: "Expires", cell: (k) => time(k.expires_at) },
        { title: "", cell: revoke },
      ], apiKeys.items, "No API keys yet.", { id: "keys" }), keyForm));
  }

  async function quotas(tenant) {
    const id = enc(tenant.id);
    const listing = await api("GET", `/v1/tenants/${id}/quotas`);
    const explained = h("div", { id: "effective" });
    const entity = (e) => `user=${e.user ?? "(any)"} client.id=${e.client_id ?? "(any)"}`;
    const effective = form([
      field("User (service account id or <default>)", h("input", { name: "user", id: "effective-user", required: true })),
      field("Client id", h("input", { name: "client_id", id: "effective-client" })),
    ], "Explain", async (v) => {
      const answer = await api("GET", `/v1/tenants/${id}/quotas/effective?user=${enc(v.user)}&client_id=${enc(v.client_id || "")}`);
      explained.replaceChildren(table([
        { title: "Quota", cell: (q) => q }, { title: "Value", num: true, cell: (q) => (answer.quotas[q].value === null ? "unlimited" : String(answer.quotas[q].value)) },
        { title: "Comes from", cell: (q) => answer.quotas[q].source || "no quota applies" },
      ], QUOTAS, ""));
    }, { id: "explain-quotas" });
    const reload = async () => show(await tenantPage(tenant.id, "quotas"));
    const remove = (q) => h("button", { type: "button", class: "danger", "data-delete-quota": entity(q.entity), onclick: async () => {
      const params = new URLSearchParams();
      if (q.entity.user !== null && q.entity.user !== undefined) params.set("user", q.entity.user);
      if (q.entity.client_id !== null && q.entity.client_id !== undefined) params.set("client_id", q.entity.client_id);
      try { await api("DELETE", `/v1/tenants/${id}/quotas?${params}`); await reload(); } catch (e) { show(banner("error", e.message)); }
    } }, "Delete");
    const setter = form([
      field("User (blank: any; <default>: the default)", h("input", { name: "user", id: "quota-user" })),
      field("Client id (blank: any)", h("input", { name: "client_id", id: "quota-client" })),
      ...QUOTAS.map((name) => field(name, h("input", { name, id: `quota-${name}`, type: "number", min: 0, step: "any", placeholder: "unchanged" }))),
    ], "Set quotas", async (v) => {
      const quotas = {};
      for (const name of QUOTAS) if (v[name] !== "") quotas[name] = name.endsWith("byte_rate") ? Math.round(Number(v[name])) : Number(v[name]);
      await api("PUT", `/v1/tenants/${id}/quotas`, { entity: { user: v.user || null, client_id: v.client_id || null }, quotas });
      await reload();
    }, { id: "set-quotas" });
    return h("div", null,
      card("Quota entities (Kafka's client quotas: user, client id, defaults)", table([
        { title: "Entity", cell: (q) => entity(q.entity) },
        ...QUOTAS.map((name) => ({ title: name, num: true, cell: (q) => (q.quotas[name] === undefined || q.quotas[name] === null ? "—" : String(q.quotas[name])) })),
        { title: "", cell: remove },
      ], listing.items, "No quotas: the plan's defaults apply.", { id: "quotas" }), setter),
      card("Effective quotas for (user, client id)", h("p", { class: "sub" }, "Which entity each quota comes from, in Kafka's order of precedence."), effective, explained));
  }

  async function usage(tenant, hoursBack) {
    const hours = Number(hoursBack || 24);
    const { from, to, query } = PierBilling.windowOf(hours);
    const rows = (await api("GET", `/v1/tenants/${enc(tenant.id)}/usage?${query(from, to)}`)).items;
    return PierBilling.usageView(rows, from, to, hours, async (h2) => show(await tenantPage(tenant.id, "usage", h2)));
  }

  async function invoices(tenant) {
    const list = (await api("GET", `/v1/tenants/${enc(tenant.id)}/invoices`)).items;
    return card("Invoices", PierBilling.invoiceTable(list, (i) => `#/tenants/${enc(tenant.id)}/invoices/${enc(i.id)}`));
  }

  async function consumers(tenant) {
    const id = enc(tenant.id);
    const answer = await api("GET", `/v1/tenants/${id}/http-consumers`);
    const close = (c) => h("button", { type: "button", class: "danger", onclick: async () => {
      try { await api("DELETE", `/v1/tenants/${id}/http-consumers/${enc(c.group)}/${enc(c.instance_id)}`); show(await tenantPage(tenant.id, "consumers")); } catch (e) { show(banner("error", e.message)); }
    } }, "Close");
    return h("div", null,
      answer.unreachable.length ? banner("error", `gateways not answering: ${answer.unreachable.join(", ")}`) : null,
      card("HTTP consumer instances (REST Proxy v2) on every gateway", table([
        { title: "Gateway", cell: (c) => c.gateway }, { title: "Group", cell: (c) => c.group }, { title: "Instance", cell: (c) => c.instance_id },
        { title: "Format", cell: (c) => c.format }, { title: "Subscription", cell: (c) => c.subscription.join(", ") || "—" },
        { title: "Idle", num: true, cell: (c) => (c.idle_ms === undefined ? "—" : `${Math.round(c.idle_ms / 1000)} s`) }, { title: "", cell: close },
      ], answer.items, "No HTTP consumer instances.", { id: "http-consumers" })));
  }

  const TAB_PAGES = { overview, keys, quotas, usage, invoices, consumers };

  async function invoicePage(id, invoice) {
    return PierBilling.invoiceView(await api("GET", `/v1/tenants/${enc(id)}/invoices/${enc(invoice)}`));
  }

  async function plansPage() {
    const plans = (await api("GET", "/v1/plans")).items;
    return h("div", null, h("h1", null, "Plans"), h("p", { class: "sub" }, "Change a plan with `pier admin plans put` or PUT /v1/plans/{name}."),
      card(null, table([
        { title: "Plan", cell: (p) => p.name }, { title: "Currency", cell: (p) => p.currency }, { title: "Authorization", cell: (p) => p.authorization },
        { title: "Partitions", num: true, cell: (p) => String(p.limits.max_partitions) }, { title: "Storage", num: true, cell: (p) => bytes(p.limits.max_storage_bytes) },
        { title: "Connections", num: true, cell: (p) => String(p.limits.max_connections) },
        { title: "Priced dimensions", cell: (p) => Object.keys(p.dimensions).join(", ") || "—" },
      ], plans, "No plans.", { id: "plans" })));
  }

  // The live gateways (GET /v1/gateways): those heard from within the stale bound, each with the
  // change version it has applied. Redrawn every few seconds while it is the page shown.
  const GATEWAYS_REFRESH_MS = 5000;
  let gatewaysTimer = null;
  const optional = (value) => (value === undefined || value === null ? "—" : String(value));

  // Redraws the page's content only (no "Loading…" flash), unless another page is shown by then.
  async function redrawGateways() {
    const here = () => location.hash === "#/gateways";
    if (!here()) return;
    try {
      const content = await gatewaysPage();
      if (here()) show(content);
    } catch (error) {
      if (error.status === 401) { App.unauthorized(error); return; }
      if (here()) show(banner("error", error.message));
      gatewaysTimer = setTimeout(redrawGateways, GATEWAYS_REFRESH_MS);  // try again
    }
  }

  async function gatewaysPage() {
    clearTimeout(gatewaysTimer);
    const listing = await api("GET", "/v1/gateways");
    gatewaysTimer = setTimeout(redrawGateways, GATEWAYS_REFRESH_MS);
    const state = (g) => (g.behind === 0 ? "live" : "lagging");
    const lagging = listing.items.filter((g) => g.behind > 0).length;
    return h("div", null,
      h("h1", null, "Gateways"),
      h("p", { class: "sub", id: "gateways-summary" },
        `${listing.items.length} live gateway(s), ${lagging} lagging · store change version ${listing.version} · `,
        `listed: heard from in the last ${listing.stale_after_s} s. A change that takes access away (an ACL, a revoked key, `,
        `a suspension) waits up to ${optional(listing.propagation_timeout_s)} s for every gateway listed to apply it; `,
        "a lagging one has not applied the latest change yet."),
      card(null, table([
        { title: "Gateway", cell: (g) => h("code", null, g.id) },
        { title: "State", cell: (g) => badge(state(g)) },
        { title: "Applied version", num: true, cell: (g) => String(g.applied_version) },
        { title: "Behind", num: true, cell: (g) => String(g.behind) },
        { title: "Started", cell: (g) => time(g.started_at) },
        { title: "Last seen", cell: (g) => time(g.last_seen) },
        { title: "Connections", num: true, cell: (g) => optional(g.connections) },
        { title: "Tenants", num: true, cell: (g) => optional(g.tenants) },
      ], listing.items, "No live gateway: none has reported to the store recently.", { id: "gateways" })));
  }

  App.start({
    title: "operator",
    home: "/tenants",
    signedIn: () => Boolean(token()),
    signOut: () => sessionStorage.removeItem(TOKEN),
    login,
    who: () => "Signed in with an operator token",
    nav: [["#/tenants", "Tenants", "tenants"], ["#/plans", "Plans", "plans"], ["#/gateways", "Gateways", "gateways"]],
    routes: [
      [/^\/tenants$/, tenantsPage, "tenants"],
      [/^\/tenants\/([^/]+)\/invoices\/([^/]+)$/, invoicePage, "tenants"],
      [/^\/tenants\/([^/]+)(?:\/([a-z]+))?$/, tenantPage, "tenants"],
      [/^\/plans$/, plansPage, "plans"],
      [/^\/gateways$/, gatewaysPage, "gateways"],
    ],
  });

})();
