// Create a task: a form built from the API's own schema of the task parameters (their defaults, ranges and help),
// its `createTask` calldata from the API, signed here, and posted to `POST /v1/tasks`.

import { get, post } from "./api.js";
import { deposit, weiOf } from "./deposit.js";
import { busy, fill, h, say } from "./dom.js";
import { authFor } from "./sign.js";

const FIRST = ["trees", "depth", "bins", "min_parties", "max_parties", "objective", "learning_rate", "lam", "epsilon"];

function field(name, prop) {
  const id = `param-${name}`;
  const choices = prop.enum || (prop.anyOf || []).find((p) => p.enum)?.enum;
  const nullable = (prop.anyOf || []).some((p) => p.type === "null");
  const kind = prop.type || (prop.anyOf || []).find((p) => p.type && p.type !== "null")?.type;
  const help = h("small", { id: `${id}-help` }, prop.description || "");
  let input;
  if (choices) {
    input = h("select", { id, name }, choices.map((c) => h("option", { value: c, selected: c === prop.default }, c)));
  } else {
    const range = (prop.anyOf || [prop]).find((p) => p.type && p.type !== "null") || prop;
    input = h("input", {
      id, name, type: "number", step: kind === "integer" ? 1 : "any",
      min: range.minimum ?? range.exclusiveMinimum, max: range.maximum ?? range.exclusiveMaximum,
      value: prop.default ?? "", placeholder: nullable ? "none" : null, "data-kind": kind, "data-nullable": nullable ? "1" : null,
    });
  }
  input.setAttribute("aria-describedby", `${id}-help`);
  return h("div", { class: "field" }, h("label", { for: id }, name), input, help);
}

function values(form) {
  const out = {};
  for (const el of form.querySelectorAll("[id^=param-]")) {
    const name = el.name;
    if (el.tagName === "SELECT") out[name] = el.value;
    else if (el.value === "") {
      if (el.dataset.nullable) out[name] = null;
    } else out[name] = el.dataset.kind === "integer" ? parseInt(el.value, 10) : Number(el.value);
  }
  return out;
}

function ranges(text, what) {
  const vals = text.split(/[\s,]+/).filter(Boolean).map(Number);
  if (!vals.length || vals.some((v) => !Number.isFinite(v))) throw new Error(`${what}: numbers separated by commas`);
  return vals;
}

export async function createPage(main) {
  fill(main, h("h1", { tabindex: "-1" }, "New task"), h("p", { class: "note" }, "Loading the parameters…"));
  let schema;
  try {
    schema = (await get("/openapi.json")).components.schemas.TaskParameters;
  } catch (err) {
    say(err.message, "error");
    return;
  }
  const props = schema.properties;
  const first = FIRST.filter((k) => props[k]);
  const rest = Object.keys(props).filter((k) => !first.includes(k));
  const fmin = h("input", { id: "feature-min", type: "text", required: true, value: "0, 0", "aria-describedby": "schema-help" });
  const fmax = h("input", { id: "feature-max", type: "text", required: true, value: "1, 1", "aria-describedby": "schema-help" });
  const reward = h("input", { id: "reward", type: "text", inputmode: "decimal", value: "0", "aria-describedby": "reward-help" });
  const submit = h("button", { type: "submit", id: "create-submit" }, "Sign and create");
  const form = h("form", { id: "create-form", novalidate: true },
    h("fieldset", {}, h("legend", {}, "Data schema"),
      h("p", { id: "schema-help", class: "note" }, "Each feature's smallest and largest value, in feature order, separated by commas (the parties' sketches and bins are built on these ranges)."),
      h("div", { class: "field" }, h("label", { for: "feature-min" }, "Feature minima"), fmin),
      h("div", { class: "field" }, h("label", { for: "feature-max" }, "Feature maxima"), fmax)),
    h("fieldset", {}, h("legend", {}, "Training"), h("div", { class: "grid" }, first.map((k) => field(k, props[k])))),
    h("details", {}, h("summary", {}, `${rest.length} more parameters (quorum, deadlines, endorsement, privacy)`),
      h("div", { class: "grid" }, rest.map((k) => field(k, props[k])))),
    h("fieldset", {}, h("legend", {}, "Reward"),
      h("div", { class: "field" }, h("label", { for: "reward" }, "Deposit (ETH)"), reward,
        h("small", { id: "reward-help" }, "Sent with fund(taskId) once the task exists, from your own account: a browser wallet sends it; with a key file the page signs it and the API broadcasts the signed transaction."))),
    h("p", {}, submit));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    busy(submit, async () => {
      weiOf(reward.value); // a bad amount is refused before anything is signed
      const body = { task_schema: { feature_min: ranges(fmin.value, "feature minima"), feature_max: ranges(fmax.value, "feature maxima") }, parameters: values(form) };
      const { data } = await post("/v1/tasks/calldata", body);
      const auth = await authFor(data);
      const created = await post("/v1/tasks", { ...body, auth });
      say(`Task ${created.task_id} created in block ${created.block}.`);
      if (weiOf(reward.value) > 0n) {
        try {
          say(await deposit(created.task_id, reward.value));
        } catch (err) {
          say(`Task ${created.task_id} has no reward yet: ${err.message} (deposit it from the task's page)`, "error");
        }
      }
      location.hash = `#/tasks/${created.task_id}`;
    });
  });
  fill(main, h("h1", { tabindex: "-1" }, "New task"),
    h("p", {}, "The task is created by a request you sign (EIP-712); the API relays it and pays its gas."), form);
}
