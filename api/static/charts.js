// SVG drawings: contributions per party per tree (stacked), feature importance, and one tree of the model.

import { h, num, s, short } from "./dom.js";

/** Okabe and Ito's colour-blind safe palette, one colour a party. */
export const COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"];
export const colour = (i) => COLOURS[i % COLOURS.length];

/** Contributions per tree, one stacked bar a tree and one colour a party (negative ones below the axis). */
export function stackedContributions(parties, trees) {
  const W = 800, H = 260, left = 56, right = 8, top = 10, bottom = 34;
  const series = parties.map((p) => p.per_tree.map((v) => Number(v) / 1e18));
  let hi = 0, lo = 0;
  for (let t = 0; t < trees; t++) {
    let up = 0, down = 0;
    for (const vals of series) (vals[t] >= 0 ? (up += vals[t]) : (down += vals[t]));
    hi = Math.max(hi, up);
    lo = Math.min(lo, down);
  }
  if (hi === lo) hi = lo + 1;
  const y = (v) => top + ((hi - v) / (hi - lo)) * (H - top - bottom);
  const band = (W - left - right) / Math.max(trees, 1);
  const bar = Math.max(band * 0.8, 0.6);
  const rects = [];
  for (let t = 0; t < trees; t++) {
    let up = 0, down = 0;
    series.forEach((vals, p) => {
      const v = vals[t];
      if (!v) return;
      const from = v >= 0 ? up : down;
      const to = from + v;
      v >= 0 ? (up = to) : (down = to);
      rects.push(
        s("rect", { x: (left + t * band).toFixed(2), y: y(Math.max(from, to)).toFixed(2), width: bar.toFixed(2), height: Math.max(Math.abs(y(from) - y(to)), 0.5).toFixed(2), fill: colour(p) },
          s("title", {}, `tree ${t}, party ${p} (${short(parties[p].party)}): ${num(v, 6)}`)),
      );
    });
  }
  const ticks = [hi, (hi + lo) / 2, lo].map((v) => [
    s("line", { x1: left - 4, x2: W - right, y1: y(v), y2: y(v), class: "grid" }),
    s("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" }, compact(v)),
  ]);
  const step = Math.max(1, Math.ceil(trees / 10));
  const labels = [];
  for (let t = 0; t < trees; t += step) labels.push(s("text", { x: left + t * band + bar / 2, y: H - bottom + 16, "text-anchor": "middle" }, t));
  return h(
    "figure",
    { class: "chart" },
    s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": "contrib-caption", class: "stacked" },
      ticks, s("line", { x1: left, x2: W - right, y1: y(0), y2: y(0), class: "axis" }), rects, labels,
      s("text", { x: (left + W) / 2, y: H - 4, "text-anchor": "middle" }, "tree")),
    h("figcaption", { id: "contrib-caption" }, `Contribution of each party per tree (${trees} trees), stacked; below zero where a party's split contribution was negative.`),
    legend(parties.map((p, i) => `party ${i} ${short(p.party)}`)),
  );
}

const compact = (v) => Number(v).toLocaleString("en-US", { notation: "compact", maximumFractionDigits: 2 });

export function legend(names) {
  return h("ul", { class: "legend" }, names.map((n, i) => h("li", {}, h("span", { class: "swatch", style: `background:${colour(i)}` }), n)));
}

/** Total split gain per feature over every tree, the `top` largest as horizontal bars. */
export function importance(model, top = 20) {
  const gain = new Map(), splits = new Map();
  for (const tree of model.trees) {
    for (const n of tree.nodes) {
      if (n.feature === undefined) continue;
      gain.set(n.feature, (gain.get(n.feature) || 0) + Number(n.gain_fixed) / 1e18);
      splits.set(n.feature, (splits.get(n.feature) || 0) + 1);
    }
  }
  const rows = [...gain.entries()].sort((a, b) => b[1] - a[1]).slice(0, top);
  if (!rows.length) return h("p", {}, "No split in this model: every tree is a single leaf.");
  const max = rows[0][1] || 1;
  const W = 640, row = 22, left = 150;
  const H = rows.length * row + 8;
  return h(
    "figure",
    { class: "chart" },
    s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": "imp-caption", class: "importance" },
      rows.map(([f, g], i) => [
        s("text", { x: left - 6, y: i * row + 16, "text-anchor": "end" }, model.feature_names[f] || `f${f}`),
        s("rect", { x: left, y: i * row + 4, width: Math.max(((W - left - 90) * g) / max, 1), height: row - 6, fill: COLOURS[0] },
          s("title", {}, `${model.feature_names[f] || f}: gain ${num(g)} in ${splits.get(f)} splits`)),
        s("text", { x: left + ((W - left - 90) * g) / max + 6, y: i * row + 16 }, `${num(g, 3)} (${splits.get(f)})`),
      ])),
    h("figcaption", { id: "imp-caption" }, `Feature importance: total split gain over all ${model.trees.length} trees (number of splits in brackets), top ${rows.length}.`),
  );
}

/** A split's test in the feature's units: slot <= t is x <= edges[f][t - 1]; t = 0 sends only missing values left. */
export function test(model, n) {
  const name = model.feature_names[n.feature] || `f${n.feature}`;
  if (n.threshold === 0) return `${name} missing`;
  return `${name} ≤ ${num(model.edges[n.feature][n.threshold - 1], 4)}`;
}

/** One tree, drawn top-down (node ids are heap positions: root 1, children 2i and 2i + 1). */
export function drawTree(model, index) {
  const tree = model.trees[index];
  const nodes = new Map(tree.nodes.map((n) => [n.id, n]));
  const x = new Map();
  let next = 0, depth = 0;
  const place = (id, d) => {
    const n = nodes.get(id);
    depth = Math.max(depth, d);
    if (n.feature === undefined) x.set(id, next++);
    else {
      place(2 * id, d + 1);
      place(2 * id + 1, d + 1);
      x.set(id, (x.get(2 * id) + x.get(2 * id + 1)) / 2);
    }
  };
  place(1, 0);
  const dx = 96, dy = 70, pad = 50;
  const W = Math.max(next * dx, 200), H = depth * dy + 2 * pad;
  const px = (id) => pad + x.get(id) * dx;
  const py = (id) => pad / 2 + 12 + (Math.floor(Math.log2(id))) * dy;
  const parts = [];
  for (const n of tree.nodes) {
    if (n.feature !== undefined) {
      for (const [c, side] of [[2 * n.id, "yes"], [2 * n.id + 1, "no"]]) {
        parts.push(s("line", { x1: px(n.id), y1: py(n.id), x2: px(c), y2: py(c), class: "edge" }));
        parts.push(s("text", { x: (px(n.id) + px(c)) / 2 + (side === "yes" ? -8 : 8), y: (py(n.id) + py(c)) / 2, class: "side", "text-anchor": side === "yes" ? "end" : "start" }, side));
      }
    }
  }
  for (const n of tree.nodes) {
    const split = n.feature !== undefined;
    const label = split ? test(model, n) : num(Number(n.value_fixed) / 1e18, 4);
    parts.push(
      s("g", { class: split ? "split" : "leaf" },
        s("rect", { x: px(n.id) - 44, y: py(n.id) - 14, width: 88, height: 26, rx: 4 }),
        s("text", { x: px(n.id), y: py(n.id) + 4, "text-anchor": "middle" }, label.length > 16 ? label.slice(0, 15) + "…" : label),
        s("title", {}, split ? `${test(model, n)} (gain ${num(Number(n.gain_fixed) / 1e18)}, ${n.count} rows)` : `leaf ${label}, ${n.count} rows`)),
    );
  }
  return h(
    "figure",
    { class: "chart tree" },
    h("div", { class: "scroll" }, s("svg", { viewBox: `0 0 ${W + pad} ${H}`, width: W + pad, height: H, role: "img", "aria-label": `tree ${index}: ${tree.nodes.length} nodes` }, parts)),
    h("figcaption", {}, `Tree ${index}: rows go left (yes) when the test holds; leaves show the tree's output.`),
  );
}
