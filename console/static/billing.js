// Usage and invoice views shared by the operator and tenant consoles: the window picker, the
// hourly chart (chart.js), the usage rows, the invoice list and one invoice with its lines.
"use strict";

const PierBilling = (() => {
  const { h, table, card, field, badge, bytes, time, hourIso } = Pier;

  const WINDOWS = [["24", "last 24 hours"], ["168", "last 7 days"], ["744", "last 31 days"]];

  // The UTC window of the last `hours` whole hours, ending at the next hour boundary.
  function windowOf(hours) {
    const to = new Date(Math.ceil(Date.now() / PierChart.HOUR_MS) * PierChart.HOUR_MS);
    return { from: new Date(to.getTime() - hours * PierChart.HOUR_MS), to, query: (f, t) => `from=${hourIso(f)}&to=${hourIso(t)}` };
  }

  function usageView(rows, from, to, hours, reload) {
    const select = h("select", { id: "usage-window" }, WINDOWS.map(([v, l]) => h("option", { value: v, selected: Number(v) === hours }, l)));
    select.addEventListener("change", () => reload(select.value));
    const t = PierChart.totals(rows);
    return h("div", null,
      card(null, h("div", { class: "row" }, field("Window (UTC hours)", select),
        h("div", { class: "grow" }, h("p", { class: "sub", id: "usage-totals" },
          `${bytes(t.bytes_in)} in · ${bytes(t.bytes_out)} out · ${t.requests} requests · ${t.records} records`)))),
      card("Bytes per hour", rows.length ? PierChart.usageChart(rows, from, to) : h("p", { class: "empty", id: "usage-empty" }, "No usage in this window: usage appears after the billing rollup runs (infra/up runs it every few minutes).")),
      card("Rows", table([
        { title: "Hour", cell: (r) => time(r.hour) }, { title: "Principal", cell: (r) => r.principal },
        { title: "Client id", cell: (r) => r.client_id }, { title: "Topic", cell: (r) => r.topic ?? "—" },
        { title: "Bytes in", num: true, cell: (r) => bytes(r.bytes_in) }, { title: "Bytes out", num: true, cell: (r) => bytes(r.bytes_out) },
        { title: "Requests", num: true, cell: (r) => String(r.requests) },
      ], rows.slice(-200).reverse(), "No rows.", { id: "usage-rows" })));
  }

  function invoiceTable(list, link) {
    return table([
      { title: "Invoice", cell: (i) => h("a", { href: link(i) }, i.id) }, { title: "Period", cell: (i) => i.period },
      { title: "Status", cell: (i) => badge(i.status) }, { title: "Total", num: true, cell: (i) => `${i.total} ${i.currency}` },
    ], list, "No invoices yet: `pier billing invoice` issues them per month.", { id: "invoices" });
  }

  function invoiceView(invoice) {
    return h("div", null,
      h("h1", null, `Invoice ${invoice.id} `, badge(invoice.status)),
      h("p", { class: "sub" }, `${invoice.tenant} · ${invoice.period} · plan ${invoice.plan} · total `, h("strong", { id: "invoice-total" }, `${invoice.total} ${invoice.currency}`)),
      card("Lines", table([
        { title: "Kind", cell: (l) => l.kind }, { title: "For", cell: (l) => l.for_period }, { title: "Dimension", cell: (l) => l.dimension },
        { title: "Measure", num: true, cell: (l) => l.measure }, { title: "Quantity", num: true, cell: (l) => l.quantity },
        { title: "Amount", num: true, cell: (l) => `${l.amount} ${invoice.currency}` },
      ], invoice.lines, "No lines.", { id: "invoice-lines" })));
  }

  return { usageView, invoiceTable, invoiceView, windowOf };
})();
