// One task: parameters, members, live progress, the timeline per level, contributions and rewards, the audit, the
// model and predictions. Each section loads on its own, so a slow one (the audit, a 500-tree model) holds no other.

import { get, post } from "./api.js";
import { drawTree, importance, stackedContributions } from "./charts.js";
import { deposit } from "./deposit.js";
import { addr, busy, debounce, eth, fill, fixed, h, num, say, short, table } from "./dom.js";
import { follow } from "./live.js";
import { predictionsSection } from "./predict.js";
import { authForCall, currentSigner, onSignerChange } from "./sign.js";

const TIMELINE_TREES = 5;

export function taskPage(main, id) {
  const sec = (key, title) => h("section", { id: `sec-${key}`, "aria-labelledby": `h-${key}` }, h("h2", { id: `h-${key}` }, title), h("div", { class: "body" }, h("p", { class: "note" }, "Loading…")));
  const sections = {
    progress: sec("progress", "Progress"),
    members: sec("members", "Members"),
    params: sec("params", "Parameters"),
    timeline: sec("timeline", "Timeline"),
    contrib: sec("contrib", "Contributions and rewards"),
    audit: sec("audit", "Audit"),
    model: sec("model", "Model"),
    predict: sec("predict", "Predictions"),
  };
  const title = h("h1", { tabindex: "-1" }, `Task #${id}`);
  const head = h("div", { class: "task-head" });
  const actions = h("div", { class: "actions", role: "group", "aria-label": "Actions" });
  const toc = h("nav", { class: "toc", "aria-label": "Sections" }, Object.entries(sections).map(([k, el]) => h("a", { href: `#/tasks/${id}`, "data-target": `sec-${k}`, onclick: (e) => { e.preventDefault(); el.scrollIntoView(); el.querySelector("h2").focus?.(); } }, el.querySelector("h2").textContent)));
  fill(main, h("p", {}, h("a", { href: "#/" }, "← Tasks")), title, head, actions, toc, Object.values(sections));

  const body = (k) => sections[k].querySelector(".body");
  const state = { detail: null, contrib: null, timelineFrom: null, health: null };
  // kept across the actions' re-renders (every live refresh), so that an amount being typed is not lost
  const depositAmount = h("input", { id: "deposit-amount", type: "text", inputmode: "decimal", size: 8, placeholder: "0.5", "aria-describedby": "deposit-note" });

  async function loadDetail() {
    try {
      const [detail, health] = await Promise.all([get(`/v1/tasks/${id}`), get("/v1/health")]);
      state.detail = detail;
      state.health = health;
      renderHead(head, detail);
      fill(body("progress"), progress(detail, health));
      fill(body("params"), parameters(detail));
      renderMembers();
      renderActions();
      if (detail.status === "open" || detail.status === "training") startLive();
      return detail;
    } catch (err) {
      fill(head, h("p", { class: "msg error", role: "alert" }, err.message));
      return null;
    }
  }

  function renderMembers() {
    const d = state.detail;
    if (!d) return;
    const me = currentSigner();
    const mayDecide = d.status === "open" && me && me.address.toLowerCase() === d.requester.toLowerCase();
    fill(body("members"), d.members.length ? table(
      "Parties that asked to join: status, order, endpoint and contribution",
      [
        ["Party", (p) => addr(p.address)],
        ["Status", (p) => h("span", { class: `badge ${p.status}` }, p.status)],
        ["Order", (p) => (p.index === null ? "–" : p.index)],
        ["Endpoint", (p) => h("code", {}, p.endpoint)],
        ["Contribution", (p) => num(fixed(p.contribution))],
        ["Decision", (p) => (p.status === "pending" && mayDecide ? h("span", { class: "buttons" },
          h("button", { type: "button", onclick: (e) => sendCall(e.target, "approve", [id, p.address], `/v1/tasks/${id}/join-requests/${p.address}/approve`, {}, `Approve ${short(p.address)}`), "aria-label": `Approve ${p.address}` }, "Approve"),
          h("button", { type: "button", class: "danger", onclick: (e) => sendCall(e.target, "refuse", [id, p.address], `/v1/tasks/${id}/join-requests/${p.address}/refuse`, {}, `Refuse ${short(p.address)}`), "aria-label": `Refuse ${p.address}` }, "Refuse"))
          : p.status === "pending" ? h("span", { class: "note" }, "the requester decides") : "–")],
      ],
      d.members,
      { class: "members" },
    ) : h("p", {}, "No party asked to join yet."));
  }

  function renderActions() {
    const d = state.detail;
    const me = currentSigner();
    const mine = me && d && me.address.toLowerCase() === d.requester.toLowerCase();
    const out = [];
    if (d && d.status === "open" && mine) {
      const integers = h("input", { id: "integers", type: "text", inputmode: "numeric", placeholder: "e.g. 0, 3", size: 10, "aria-describedby": "integers-note" });
      out.push(
        h("span", { class: "start" },
          h("label", { for: "integers" }, "Integer features "), integers,
          h("button", { type: "button", id: "start-training", onclick: (e) => start(e.target, integers.value) }, "Start training"),
          h("span", { id: "integers-note", class: "note" }, "bin edges from the approved parties' sketches")),
        h("button", { type: "button", id: "cancel-task", class: "danger", onclick: (e) => sendCall(e.target, "cancel", [id], `/v1/tasks/${id}/cancel`, {}, "Cancel the task") }, "Cancel task"),
      );
    }
    if (d && d.status === "open" && me) {
      out.push(h("span", { class: "deposit" },
        h("label", { for: "deposit-amount" }, "Reward deposit (ETH) "), depositAmount,
        h("button", { type: "button", id: "deposit-run", onclick: (e) => busy(e.target, async () => {
          say(await deposit(id, depositAmount.value));
          depositAmount.value = "";
          await refreshAll();
        }) }, "Deposit"),
        h("span", { id: "deposit-note", class: "note" }, "from your own account, added to the reward while the task is open")));
    }
    const c = state.contrib;
    if (me && c) {
      const row = c.parties.find((p) => p.party.toLowerCase() === me.address.toLowerCase());
      const due = row ? Number(row.reward_due_wei) : 0;
      const reqDue = mine ? Number(c.requester_due_wei) : 0;
      if (due > 0 || reqDue > 0) out.push(h("button", { type: "button", id: "withdraw", onclick: (e) => sendCall(e.target, "withdraw", [id], `/v1/tasks/${id}/withdraw`, {}, "Withdraw") }, `Withdraw ${eth(due + reqDue)}`));
    }
    fill(actions, out.length ? out : []);
  }

  async function start(button, integersText) {
    await busy(button, async () => {
      const integers = integersText.split(/[\s,]+/).filter(Boolean).map(Number);
      if (integers.some((v) => !Number.isInteger(v) || v < 0)) throw new Error("integer features: indices like 0, 3");
      const q = integers.map((i) => `integers=${i}`).join("&");
      const edges = await get(`/v1/tasks/${id}/bin-edges${q ? `?${q}` : ""}`);
      const auth = await authForCall("start", [id, edges.bin_edges]);
      await post(`/v1/tasks/${id}/start`, { bin_edges: edges.bin_edges, auth });
      say(`Training of task ${id} started with the edges of ${edges.parties} parties.`);
      await refreshAll();
    });
  }

  async function sendCall(button, fn, args, path, extra, what) {
    await busy(button, async () => {
      const auth = await authForCall(fn, args);
      const res = await post(path, { ...extra, auth });
      say(`${what}: done in block ${res.block} (gas ${num(res.gas_used, 0)}).`);
      await refreshAll();
    });
  }

  async function loadContrib() {
    try {
      const c = await get(`/v1/tasks/${id}/contributions`);
      state.contrib = c;
      fill(body("contrib"), contributions(c, state.detail));
      renderActions();
    } catch (err) {
      fill(body("contrib"), h("p", { class: "msg error", role: "alert" }, err.message));
    }
  }

  async function loadTimeline(from) {
    const d = state.detail;
    if (!d) return;
    const trees = d.parameters.trees;
    if (from === undefined || from === null) from = Math.max(0, Math.min(d.progress.tree, trees - 1) - TIMELINE_TREES + 1);
    from = Math.max(0, Math.min(from, trees - 1));
    state.timelineFrom = from;
    try {
      const t = await get(`/v1/tasks/${id}/timeline?from_tree=${from}&trees=${TIMELINE_TREES}`);
      fill(body("timeline"), timelineView(t, (f) => loadTimeline(f), d.progress.tree));
    } catch (err) {
      fill(body("timeline"), h("p", { class: "msg error", role: "alert" }, err.message));
    }
  }

  async function loadModel() {
    const target = body("model");
    try {
      const model = await get(`/v1/tasks/${id}/model`);
      fill(target, modelView(id, model));
      predictionsSection(body("predict"), id, model);
    } catch (err) {
      const why = err.status === 409 ? `No model yet: ${err.detail}` : err.message;
      fill(target, h("p", { class: err.status === 409 ? "note" : "msg error" }, why));
      fill(body("predict"), h("p", { class: "note" }, "Predictions need the model."));
    }
  }

  fill(body("audit"), auditView(id));

  async function refreshAll() {
    const d = await loadDetail();
    if (!d) return;
    const inLatest = state.timelineFrom === null || d.progress.tree < state.timelineFrom + TIMELINE_TREES + 1;
    await Promise.all([loadContrib(), inLatest ? loadTimeline(null) : null]);
    if (d.status === "completed" && !state.modelShown) {
      state.modelShown = true;
      await loadModel();
    }
  }

  const liveRefresh = debounce(() => refreshAll(), 700);
  const streams = {};
  function startLive() {
    // an open task changes by joins, approvals and deposits: the task list's stream, this task's events only
    if (!streams.list) streams.list = follow("/v1/events", { task: (e) => e.task_id === id && liveRefresh() }, { fromLatest: true });
    // training moves level by level: this task's own progress stream, which ends with the task
    if (state.detail.status === "training" && !streams.task) {
      streams.task = follow(`/v1/tasks/${id}/events`, { started: liveRefresh, level: liveRefresh, voting_closed: liveRefresh, histograms_closed: liveRefresh, node: liveRefresh }, {
        fromLatest: true,
        onEnd: (why) => { say(`Task ${id}: ${why === "timeout" ? "the progress stream timed out" : why}.`); stopLive(); refreshAll(); },
      });
    }
  }
  function stopLive() {
    for (const [k, close] of Object.entries(streams)) { close(); delete streams[k]; }
  }

  onSignerChange(() => { renderMembers(); renderActions(); });
  (async () => {
    // the contributions need nothing of the detail (the slowest read of a long task: every event and receipt)
    const contrib = loadContrib();
    const d = await loadDetail();
    if (!d) return;
    await Promise.all([contrib, loadTimeline(null)]);
    if (d.status === "completed") {
      state.modelShown = true;
      await loadModel();
    } else {
      fill(body("model"), h("p", { class: "note" }, "The model is shown when training completes."));
      fill(body("predict"), h("p", { class: "note" }, "Predictions need the model."));
    }
  })();
  return () => stopLive();
}

function renderHead(el, d) {
  fill(el, h("dl", { class: "facts" },
    h("dt", {}, "State"), h("dd", {}, h("span", { class: `badge ${d.status}`, id: "task-status" }, d.status)),
    h("dt", {}, "Requester"), h("dd", {}, addr(d.requester)),
    h("dt", {}, "Reward"), h("dd", { id: "task-reward" }, eth(d.reward_wei)),
    h("dt", {}, "Features"), h("dd", {}, d.task_schema.feature_min.length)));
}

function progress(d, health) {
  const p = d.progress;
  const phase = d.status === "training" ? p.phase : d.status;
  return [
    h("p", { class: "big" }, h("progress", { max: p.trees, value: p.trees_completed, "aria-labelledby": "trees-done" }),
      h("span", { id: "trees-done" }, ` ${p.trees_completed} of ${p.trees} trees done`)),
    h("dl", { class: "facts" },
      h("dt", {}, "Tree, level"), h("dd", { id: "progress-where" }, d.status === "training" ? `tree ${p.tree}, level ${p.level} of ${p.depth}` : "–"),
      h("dt", {}, "Phase"), h("dd", { id: "progress-phase" }, phase),
      h("dt", {}, "Levels started"), h("dd", {}, p.levels_started),
      h("dt", {}, "Open nodes"), h("dd", {}, p.open_nodes.length ? p.open_nodes.join(", ") : "–"),
      h("dt", {}, "Block"), h("dd", {}, `${health.block}${d.status === "training" ? ` (step deadline ${p.step_deadline})` : ""}`),
      h("dt", {}, "Transactions"), h("dd", { id: "progress-txs" }, num(d.gas.transactions, 0)),
      h("dt", {}, "Gas used"), h("dd", {}, num(d.gas.total_gas_used, 0))),
  ];
}

function parameters(d) {
  const rows = Object.entries(d.parameters);
  return h("details", {}, h("summary", {}, `${rows.length} parameters (${d.parameters.trees} trees of depth ${d.parameters.depth}, ${d.parameters.bins} bins, ${d.parameters.objective})`),
    h("dl", { class: "facts params" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v === null ? "none" : String(v))])),
    h("p", { class: "note" }, `Bin edges hash ${d.bin_edges_hash}`));
}

function timelineView(t, go, current) {
  const nav = h("nav", { class: "pager", "aria-label": "Trees of the timeline" },
    h("button", { type: "button", disabled: t.from_tree === 0, onclick: () => go(t.from_tree - TIMELINE_TREES) }, "‹ Earlier trees"),
    h("label", {}, "From tree ", h("input", { type: "number", min: 0, max: t.trees - 1, value: t.from_tree, onchange: (e) => go(Number(e.target.value)) })),
    h("span", {}, `trees ${t.from_tree}–${t.to_tree - 1} of ${t.trees}`),
    h("button", { type: "button", disabled: t.to_tree >= t.trees, onclick: () => go(t.from_tree + TIMELINE_TREES) }, "Later trees ›"));
  if (!t.levels.length) return [nav, h("p", {}, current === 0 && t.from_tree === 0 ? "No level has started yet." : "No level in these trees.")];
  const index = new Map(t.parties.map((p, i) => [p.toLowerCase(), i]));
  const who = (p) => h("span", { class: "who", title: p }, `P${index.has(p.toLowerCase()) ? index.get(p.toLowerCase()) : "?"}`);
  const refusal = (r) => h("li", { class: `refusal ${r.kind}` }, who(r.party), ` ${r.kind}`,
    r.source ? h("span", { class: "source" }, ` (${r.source === "contract" ? "the contract" : "the verifiers"})`) : null,
    `: ${r.reason}`, r.transaction ? h("span", { class: "note", title: r.transaction }, ` tx ${short(r.transaction)}`) : null);
  const outcome = (n) => n.kind === "split" ? `node ${n.node}: f${n.feature} slot ≤ ${n.threshold} (gain ${num(n.gain, 3)})`
    : n.kind === "leaf" ? `node ${n.node}: leaf ${num(n.value, 4)}` : `node ${n.node}: candidates f${n.candidates[0]}, f${n.candidates[1]}`;
  return [
    nav,
    h("p", { class: "note" }, `Parties: ${t.parties.map((p, i) => `P${i} = ${short(p)}`).join(", ")}`),
    table("Levels: who voted, who submitted with how many endorsements, whose histograms were refused and why, and what each node became", [
      ["Tree.level", (l) => `${l.tree}.${l.level}`],
      ["Started", (l) => `block ${l.started_block}`],
      ["Blocks", (l) => l.blocks],
      ["Votes", (l) => (l.voters.length ? l.voters.map(who) : "–")],
      ["Submitted (endorsements)", (l) => (l.submissions.length ? l.submissions.map((s) => h("span", { class: "sub" }, who(s.party), s.endorsements === null ? " (part)" : ` (${s.endorsements})`)) : "–")],
      ["Refused", (l) => (l.declined.length ? h("ul", { class: "plain" }, l.declined.map(refusal)) : "–")],
      ["Resolved", (l) => {
        const done = l.nodes.filter((n) => n.kind !== "candidates");
        if (l.closed_block === null) return h("span", { class: "note" }, "open");
        return done.length ? h("ul", { class: "plain" }, done.map((n) => h("li", {}, outcome(n)))) : "–";
      }],
    ], t.levels, { class: "timeline" }),
  ];
}

function contributions(c, d) {
  const trees = d ? d.parameters.trees : c.parties[0]?.per_tree.length || 0;
  if (!c.parties.length) return h("p", {}, "No approved party yet.");
  return [
    stackedContributions(c.parties, trees),
    table("Each party's contribution, reward share and amounts", [
      ["Party", (p) => addr(p.party)],
      ["Contribution", (p) => num(p.total_float)],
      ["Share", (p) => `${num(100 * p.share, 2)} %`],
      ["Assigned", (p) => eth(p.reward_assigned_wei)],
      ["Due", (p) => eth(p.reward_due_wei)],
      ["Forfeited", (p) => eth(p.reward_forfeited_wei)],
      ["Withdrawn", (p) => eth(p.withdrawn_wei)],
    ], c.parties, { class: "contrib" }),
    h("p", {}, `Reward ${eth(c.reward_wei)}; the requester is due ${eth(c.requester_due_wei)} and withdrew ${eth(c.requester_withdrawn_wei)}.`),
  ];
}

function auditView(id) {
  const verdict = h("div", { id: "audit-verdict", "aria-live": "polite" }, h("p", { class: "note" }, "Not run yet: the audit replays every transaction of the task with the Python reference."));
  const button = h("button", { type: "button", id: "run-audit", onclick: () => busy(button, async () => {
    fill(verdict, h("p", { class: "note" }, "Replaying the task's transactions…"));
    try {
      const a = await get(`/v1/tasks/${id}/audit`);
      fill(verdict, h("p", { class: `verdict ${a.ok ? "ok" : "bad"}` }, a.ok ? "✓ The audit passed: " : "✗ Mismatch: ", a.ok ? "replaying the transactions gives the recorded model and credits." : a.first_mismatch),
        a.summary ? h("p", {}, a.summary) : null);
    } catch (err) {
      fill(verdict, h("p", { class: "msg error", role: "alert" }, err.message));
    }
  }) }, "Run the audit");
  return [button, verdict];
}

function modelView(id, model) {
  const n = model.trees.length;
  const holder = h("div", {});
  const pick = h("input", { id: "tree-pick", type: "number", min: 0, max: n - 1, value: 0 });
  const show = (i) => {
    const t = Math.max(0, Math.min(n - 1, Number(i) || 0));
    pick.value = t;
    fill(holder, drawTree(model, t));
  };
  pick.addEventListener("change", () => show(pick.value));
  show(0);
  return [
    h("p", {}, `${n} trees, ${model.objective}, ${model.feature_names.length} features, ${model.bins} bins. `,
      h("a", { href: `/v1/tasks/${id}/model`, download: `task-${id}-model.json` }, "Download JSON"), " · ",
      h("a", { href: `/v1/tasks/${id}/model?format=lightgbm`, download: `task-${id}-model.txt` }, "Download LightGBM text")),
    importance(model),
    h("div", { class: "pager", role: "group", "aria-label": "Tree shown" },
      h("button", { type: "button", onclick: () => show(Number(pick.value) - 1) }, "‹ Previous tree"),
      h("label", { for: "tree-pick" }, "Tree "), pick, h("span", {}, ` of ${n}`),
      h("button", { type: "button", onclick: () => show(Number(pick.value) + 1) }, "Next tree ›")),
    holder,
  ];
}
