// Usage charts drawn as inline SVG (no library): one stacked bar per UTC hour, bytes in below
// bytes out, a <title> on each bar for its numbers. Rows are the usage API's rows (one per
// principal, client id and topic); they are summed per hour here.
"use strict";

const PierChart = (() => {
  const { svg, h, bytes, hourIso } = Pier;
  const HOUR_MS = 3600 * 1000;
  const MAX_HOURS = 24 * 62;
  const W = 960, H = 280, LEFT = 70, RIGHT = 12, TOP = 12, BOTTOM = 34;

  function sumByHour(rows) {
    const hours = new Map();
    for (const row of rows) {
      const at = Date.parse(row.hour);
      const sum = hours.get(at) || { in: 0, out: 0, requests: 0, records: 0 };
      sum.in += Number(row.bytes_in); sum.out += Number(row.bytes_out);
      sum.requests += Number(row.requests); sum.records += Number(row.records || 0);
      hours.set(at, sum);
    }
    return hours;
  }

  function niceMax(value) {
    const power = 10 ** Math.floor(Math.log10(Math.max(value, 1)));
    for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= value) return step * power;
    return 10 * power;
  }

  function axes(top, from, span, slot) {
    const parts = [];
    for (let i = 0; i <= 4; i += 1) {
      const y = TOP + (H - TOP - BOTTOM) * (1 - i / 4);
      parts.push(svg("line", { class: i ? "grid" : "axis", x1: LEFT, x2: W - RIGHT, y1: y, y2: y }));
      parts.push(svg("text", { x: LEFT - 6, y: y + 3, "text-anchor": "end" }, bytes((top * i) / 4)));
    }
    const every = Math.max(1, Math.ceil(span / 12));
    for (let i = 0; i < span; i += every) {
      const label = new Date(from + i * HOUR_MS).toISOString();
      parts.push(svg("text", { x: LEFT + slot * (i + 0.5), y: H - BOTTOM + 14, "text-anchor": "middle" },
        `${label.slice(5, 10)} ${label.slice(11, 13)}h`));
    }
    return parts;
  }

  function bars(hours, from, span, slot, top) {
    const plot = H - TOP - BOTTOM, width = Math.max(1, slot * 0.8), parts = [];
    for (const [at, sum] of hours) {
      const i = Math.round((at - from) / HOUR_MS);
      if (i < 0 || i >= span) continue;
      const x = LEFT + slot * i + (slot - width) / 2, iso = hourIso(new Date(at));
      const hIn = (sum.in / top) * plot, hOut = (sum.out / top) * plot;
      const tip = `${iso}\nbytes in ${bytes(sum.in)}\nbytes out ${bytes(sum.out)}\nrequests ${sum.requests}`;
      parts.push(svg("rect", { class: "bar in", "data-hour": iso, x, width, y: TOP + plot - hIn, height: Math.max(hIn, sum.in ? 1 : 0) }, svg("title", null, tip)));
      parts.push(svg("rect", { class: "bar out", "data-hour": iso, x, width, y: TOP + plot - hIn - hOut, height: hOut }, svg("title", null, tip)));
    }
    return parts;
  }

  // The chart of `rows` between `fromDate` and `toDate` (whole UTC hours), with its legend.
  function usageChart(rows, fromDate, toDate) {
    const from = Math.floor(fromDate.getTime() / HOUR_MS) * HOUR_MS;
    const span = Math.min(MAX_HOURS, Math.max(1, Math.ceil((toDate.getTime() - from) / HOUR_MS)));
    const hours = sumByHour(rows);
    const peak = Math.max(0, ...[...hours.values()].map((s) => s.in + s.out));
    const top = niceMax(peak), slot = (W - LEFT - RIGHT) / span;
    const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "bytes in and out per hour", id: "usage-chart" },
      axes(top, from, span, slot), bars(hours, from, span, slot, top));
    return h("div", { class: "chart" }, chart,
      h("div", { class: "legend" }, h("span", { class: "in" }, "bytes in (produce)"), h("span", { class: "out" }, "bytes out (fetch)")));
  }

  function totals(rows) {
    const t = { bytes_in: 0, bytes_out: 0, requests: 0, records: 0 };
    for (const row of rows) for (const key of Object.keys(t)) t[key] += Number(row[key] || 0);
    return t;
  }

  return { usageChart, totals, HOUR_MS };
})();
