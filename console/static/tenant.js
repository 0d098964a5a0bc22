// The tenant console, served by the gateway's tenant HTTP port: every call goes to the tenant HTTP
// API (Confluent REST v3 and v2 routes, its OpenAPI document is /openapi.json) with HTTP Basic and
// the tenant's API key, so it sees the tenant's namespace only, as any client of that key would.
"use strict";

(() => {
  const { h, request, banner, badge, table, card, field, form, time, App, loginPage, ApiError } = Pier;
  const KEY = "pier.console.tenantKey";
  const V2 = "application/vnd.kafka.v2+json";
  const BINARY = "application/vnd.kafka.binary.v2+json";
  const enc = encodeURIComponent;
  const creds = () => JSON.parse(sessionStorage.getItem(KEY) || "null");
  const basic = () => { const c = creds(); return `Basic ${btoa(`${c.key}:${c.secret}`)}`; };
  const api = (method, path, body, extra) => request(method, path, { auth: basic(), body, ...(extra || {}) });
  const v2 = (method, path, body, accept) => api(method, path, body, { contentType: V2, accept: accept || V2 });
  const cluster = () => `/v3/clusters/${enc(creds().cluster)}`;
  const show = (node) => document.getElementById("content").replaceChildren(node);

  function login(message) {
    return loginPage("tenant", "Sign in with an API key of your tenant: its key id and secret. They stay in this tab only.", [
      field("Key id", h("input", { name: "key", id: "key-id", autocomplete: "username", required: true })),
      field("Secret", h("input", { name: "secret", id: "key-secret", type: "password", autocomplete: "current-password", required: true })),
    ], message, async ({ key, secret }) => {
      sessionStorage.setItem(KEY, JSON.stringify({ key: key.trim(), secret: secret.trim(), cluster: "" }));
      const clusters = await api("GET", "/v3/clusters");
      sessionStorage.setItem(KEY, JSON.stringify({ key: key.trim(), secret: secret.trim(), cluster: clusters.data[0].cluster_id }));
      App.render();
    });
  }

  async function topicsPage() {
    const topics = (await api("GET", `${cluster()}/topics`)).data;
    const create = form([
      field("Name", h("input", { name: "name", id: "new-topic-name", required: true, pattern: "[A-Za-z0-9._-]+", maxlength: 200 })),
      field("Partitions", h("input", { name: "partitions", id: "new-topic-partitions", type: "number", min: 1, max: 50, value: 1 })),
    ], "Create topic", async (v) => {
      await api("POST", `${cluster()}/topics`, { topic_name: v.name, partitions_count: Number(v.partitions) || 1 });
      location.hash = `#/topics/${enc(v.name)}`;
    }, { id: "create-topic" });
    return h("div", null, h("h1", null, "Topics"), h("p", { class: "sub" }, `${topics.length} topic(s) in your namespace`),
      card("New topic", create),
      card(null, table([
        { title: "Topic", cell: (t) => h("a", { href: `#/topics/${enc(t.topic_name)}` }, t.topic_name) },
        { title: "Partitions", num: true, cell: (t) => String(t.partitions_count) },
        { title: "Replication", num: true, cell: (t) => String(t.replication_factor) },
      ], topics, "No topics yet: create one with any Kafka client or POST /v3/clusters/{id}/topics.", { id: "topics" })));
  }

  function text(base64) {
    if (base64 === null || base64 === undefined) return h("em", null, "null");
    const raw = atob(base64);
    const bytes = Uint8Array.from(raw, (c) => c.charCodeAt(0));
    try { return new TextDecoder("utf-8", { fatal: true }).decode(bytes); } catch (_) {
      return `0x${Array.from(bytes.slice(0, 256), (b) => b.toString(16).padStart(2, "0")).join("")}`;
    }
  }

  // Reads up to `limit` records from the beginning of every partition through a short-lived v2
  // consumer instance (assigned, not subscribed: no group rebalance), deleted afterwards.
  async function browse(topic, partitions, limit) {
    const group = `pier-console-${Math.random().toString(16).slice(2, 10)}`;
    const made = await v2("POST", `/consumers/${group}`, { format: "binary", "auto.offset.reset": "earliest", "auto.commit.enable": "false" });
    const base = new URL(made.base_uri).pathname;
    const assigned = { partitions: partitions.map((p) => ({ topic, partition: p.partition_id })) };
    const records = [];
    try {
      await v2("POST", `${base}/assignments`, assigned);
      await v2("POST", `${base}/positions/beginning`, assigned);
      for (let poll = 0; poll < 5 && records.length < limit; poll += 1) {
        const got = await v2("GET", `${base}/records?timeout=1000&max_bytes=1048576`, undefined, BINARY);
        records.push(...got);
        if (!got.length && records.length) break;
      }
    } finally {
      await v2("DELETE", base).catch(() => null);
    }
    return records.slice(0, limit);
  }

  // A topic created a moment ago may not be in every broker's metadata yet: a 404 is retried a
  // few times, half a second apart, before it is shown.
  async function produceOnce(name, record) {
    for (let attempt = 1; ; attempt += 1) {
      try { return await api("POST", `${cluster()}/topics/${enc(name)}/records`, record); } catch (error) {
        if (!(error instanceof ApiError && error.status === 404) || attempt >= 6) throw error;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }

  async function topicPage(name) {
    const partitions = (await api("GET", `${cluster()}/topics/${enc(name)}/partitions`)).data;
    const results = h("div", { id: "messages" }, h("p", { class: "empty" }, "Press Read to see the topic's first messages."));
    const reader = form([
      field("Messages", h("input", { name: "limit", id: "browse-limit", type: "number", min: 1, max: 500, value: 50 })),
    ], "Read from the beginning", async (v) => {
      results.replaceChildren(h("p", { class: "sub" }, "Reading…"));
      const records = await browse(name, partitions, Number(v.limit) || 50);
      results.replaceChildren(table([
        { title: "Partition", num: true, cell: (r) => String(r.partition) }, { title: "Offset", num: true, cell: (r) => String(r.offset) },
        { title: "Timestamp", cell: (r) => (r.timestamp ? time(new Date(r.timestamp).toISOString()) : "—") },
        { title: "Key", cell: (r) => h("div", { class: "value mono" }, text(r.key)) },
        { title: "Value", cell: (r) => h("div", { class: "value mono" }, text(r.value)) },
      ], records, "No messages in this topic.", { id: "message-table" }));
    }, { id: "browse" });
    const sent = h("div", { id: "produced" });
    const producer = form([
      field("Key (text, optional)", h("input", { name: "key", id: "produce-key" })),
      field("Value (text)", h("input", { name: "value", id: "produce-value", required: true })),
    ], "Produce", async (v) => {
      const record = { value: { type: "STRING", data: v.value } };
      if (v.key) record.key = { type: "STRING", data: v.key };
      const done = await produceOnce(name, record);
      if (done.error_code !== undefined && done.error_code !== 200) throw new Error(done.message || `error ${done.error_code}`);
      sent.replaceChildren(banner("note", `Written to partition ${done.partition_id} at offset ${done.offset}.`));
    }, { id: "produce" });
    return h("div", null, h("h1", null, name), h("p", { class: "sub" }, h("a", { href: "#/topics" }, "Topics"), ` / ${name}`),
      card("Produce a message", producer, sent),
      card("Partitions", table([
        { title: "Partition", num: true, cell: (p) => String(p.partition_id) }, { title: "Leader", num: true, cell: (p) => String(p.leader_id ?? "—") },
        { title: "Replicas", cell: (p) => (p.replicas || []).join(", ") }, { title: "In sync", cell: (p) => (p.isr || []).join(", ") },
      ], partitions, "No partitions.", { id: "partitions" })),
      card("Messages", reader, results));
  }

  async function groupsPage() {
    const groups = (await api("GET", `${cluster()}/consumer-groups`)).data;
    const lags = await Promise.all(groups.map((g) =>
      api("GET", `${cluster()}/consumer-groups/${enc(g.consumer_group_id)}/lag-summary`).catch(() => null)));
    const rows = groups.map((g, i) => ({ ...g, lag: lags[i] }));
    return h("div", null, h("h1", null, "Consumer groups"), h("p", { class: "sub" }, "Committed offsets against the log end, per group."),
      card(null, table([
        { title: "Group", cell: (g) => h("a", { href: `#/groups/${enc(g.consumer_group_id)}` }, g.consumer_group_id) },
        { title: "State", cell: (g) => badge(g.state) },
        { title: "Total lag", num: true, cell: (g) => (g.lag ? String(g.lag.total_lag) : "—") },
        { title: "Max lag", num: true, cell: (g) => (g.lag ? `${g.lag.max_lag}${g.lag.max_lag_topic_name ? ` (${g.lag.max_lag_topic_name}-${g.lag.max_lag_partition_id})` : ""}` : "—") },
      ], rows, "No consumer groups yet.", { id: "groups" })));
  }

  async function groupPage(id) {
    const lags = (await api("GET", `${cluster()}/consumer-groups/${enc(id)}/lags`)).data;
    return h("div", null, h("h1", null, id), h("p", { class: "sub" }, h("a", { href: "#/groups" }, "Consumer groups"), ` / ${id}`),
      card("Lag per partition", table([
        { title: "Topic", cell: (l) => l.topic_name }, { title: "Partition", num: true, cell: (l) => String(l.partition_id) },
        { title: "Committed", num: true, cell: (l) => String(l.current_offset) }, { title: "Log end", num: true, cell: (l) => String(l.log_end_offset) },
        { title: "Lag", num: true, cell: (l) => String(l.lag) }, { title: "Consumer", cell: (l) => l.consumer_id || "—" },
      ], lags, "No committed offsets.", { id: "lags" })));
  }

  // The gateway's own usage and invoice routes (gateway/http/usage.py); an older gateway has none.
  async function billingRead(path) {
    try { return await api("GET", path); } catch (error) {
      if (error instanceof ApiError && error.status === 404) return null;
      throw error;
    }
  }

  async function usagePage(hoursBack) {
    const hours = Number(hoursBack || 24);
    const { from, to, query } = PierBilling.windowOf(hours);
    const answer = await billingRead(`${cluster()}/usage?${query(from, to)}`);
    if (!answer) return banner("note", "This gateway does not serve usage: ask your operator.");
    return h("div", null, h("h1", null, "Usage"), h("p", { class: "sub" }, "Your tenant's metered traffic per UTC hour."),
      PierBilling.usageView(answer.items, from, to, hours, async (next) => show(await usagePage(next))));
  }

  async function invoicesPage() {
    const answer = await billingRead(`${cluster()}/invoices`);
    if (!answer) return banner("note", "This gateway does not serve invoices: ask your operator.");
    return h("div", null, h("h1", null, "Invoices"), card(null, PierBilling.invoiceTable(answer.items, (i) => `#/invoices/${enc(i.id)}`)));
  }

  async function invoicePage(id) {
    return PierBilling.invoiceView(await api("GET", `${cluster()}/invoices/${enc(id)}`));
  }

  App.start({
    title: "tenant",
    home: "/topics",
    signedIn: () => Boolean(creds() && creds().cluster),
    signOut: () => sessionStorage.removeItem(KEY),
    login,
    who: () => h("span", null, "API key ", h("code", null, creds().key)),
    nav: [["#/topics", "Topics", "topics"], ["#/groups", "Consumer groups", "groups"], ["#/usage", "Usage", "usage"], ["#/invoices", "Invoices", "invoices"]],
    routes: [
      [/^\/topics$/, topicsPage, "topics"],
      [/^\/topics\/([^/]+)$/, topicPage, "topics"],
      [/^\/groups$/, groupsPage, "groups"],
      [/^\/groups\/([^/]+)$/, groupPage, "groups"],
      [/^\/usage$/, usagePage, "usage"],
      [/^\/invoices$/, invoicesPage, "invoices"],
      [/^\/invoices\/([^/]+)$/, invoicePage, "invoices"],
    ],
  });
})();
