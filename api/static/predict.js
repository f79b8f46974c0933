// Predictions: a CSV of rows scored by the task's model through the API, shown and offered as a CSV download.

import { post } from "./api.js";
import { busy, download, fill, h, num, say, table } from "./dom.js";

const BATCH = 10_000; // rows per request, the API's limit
const SHOWN = 100;
const LABELS = new Set(["label", "y", "target"]);

/** Rows of feature values from CSV text: an optional header (columns matched to the model's features by name, a
 * label column dropped), empty cells as missing values. */
export function parseRows(text, model) {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== "");
  if (!lines.length) throw new Error("the file is empty");
  const cells = (l) => l.split(",").map((c) => c.trim().replace(/^"(.*)"$/, "$1"));
  const width = model.feature_names.length;
  let columns = null;
  const first = cells(lines[0]);
  if (first.some((c) => c !== "" && Number.isNaN(Number(c)))) {
    lines.shift();
    const names = first.map((c) => c.toLowerCase());
    const byName = model.feature_names.map((f) => names.indexOf(f.toLowerCase()));
    if (byName.every((i) => i >= 0)) columns = byName;
    else columns = names.map((n, i) => (LABELS.has(n) ? -1 : i)).filter((i) => i >= 0);
  }
  return lines.map((line, r) => {
    const all = cells(line);
    const vals = columns ? columns.map((i) => all[i]) : all;
    if (vals.length !== width) throw new Error(`row ${r + 1} has ${vals.length} values; the model has ${width} features`);
    return vals.map((v, c) => {
      if (v === undefined || v === "" || v.toLowerCase() === "nan") return null;
      const x = Number(v);
      if (!Number.isFinite(x)) throw new Error(`row ${r + 1}, column ${c + 1}: "${v}" is not a number`);
      return x;
    });
  });
}

export function predictionsSection(el, id, model) {
  const input = h("input", { type: "file", id: "predict-file", accept: ".csv,text/csv", "aria-describedby": "predict-note" });
  const out = h("div", { id: "predict-out", "aria-live": "polite" });
  const button = h("button", { type: "button", id: "predict-run", onclick: () => busy(button, async () => {
    const file = input.files[0];
    if (!file) throw new Error("choose a CSV file first");
    const rows = parseRows(await file.text(), model);
    const scores = [];
    let answer = null;
    for (let i = 0; i < rows.length; i += BATCH) {
      answer = await post(`/v1/tasks/${id}/predictions`, { rows: rows.slice(i, i + BATCH) });
      scores.push(...answer.predictions);
    }
    const binary = answer.objective === "binary";
    const csv = [binary ? "row,probability,label" : "row,prediction", ...scores.map((p, i) => (binary ? `${i},${p},${p > 0.5 ? 1 : 0}` : `${i},${p}`))].join("\n") + "\n";
    fill(out,
      h("p", {}, `${scores.length} rows scored by ${answer.trees} trees. `,
        h("button", { type: "button", id: "predict-download", onclick: () => download(`task-${id}-predictions.csv`, csv, "text/csv") }, "Download the scores (CSV)")),
      table(`Scores of the first ${Math.min(SHOWN, scores.length)} rows`, [
        ["Row", (r) => r],
        [binary ? "P(class 1)" : "Prediction", (r) => num(scores[r], 6)],
        ...(binary ? [["Label", (r) => (scores[r] > 0.5 ? 1 : 0)]] : []),
      ], scores.slice(0, SHOWN).map((_, i) => i), { class: "scores" }));
    say(`${scores.length} rows scored.`);
  }) }, "Score");
  fill(el,
    h("p", { id: "predict-note", class: "note" }, `A CSV of ${model.feature_names.length} feature columns (a header naming them, or none; a label column is dropped; empty cells are missing values).`),
    h("p", {}, h("label", { for: "predict-file" }, "Rows to score "), input, " ", button),
    out);
}
