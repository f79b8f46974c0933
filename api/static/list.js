// The task list: a page of tasks (newest first), refreshed when the chain's event stream touches any task.

import { get } from "./api.js";
import { addr, debounce, eth, fill, h, say, table } from "./dom.js";
import { follow } from "./live.js";

const SIZES = [20, 50, 100];

/** Render the list into `main` from the route's query (`page`, `size`); returns a function that stops it. */
export function taskList(main, query) {
  const size = SIZES.includes(Number(query.get("size"))) ? Number(query.get("size")) : SIZES[0];
  let page = Math.max(1, Number(query.get("page")) || 1);
  const status = h("p", { class: "note", id: "list-status" });
  const body = h("div", { id: "task-table" });
  const pager = h("nav", { class: "pager", "aria-label": "Pages of tasks" });
  fill(main, h("h1", { tabindex: "-1" }, "Tasks"), status, body, pager);

  let total = 0;
  async function load() {
    try {
      const list = await get(`/v1/tasks?offset=${(page - 1) * size}&limit=${size}`);
      total = list.total;
      const pages = Math.max(1, Math.ceil(total / size));
      if (page > pages) {
        page = pages;
        return load();
      }
      fill(body, render(list.tasks));
      fill(status, total ? `${total} tasks; page ${page} of ${pages}, newest first.` : "No task yet.");
      fill(pager, pagerLinks(page, pages, size));
    } catch (err) {
      say(err.message, "error");
    }
  }
  load();
  const refresh = debounce(load, 500);
  return follow("/v1/events", { task: refresh }, { fromLatest: true });
}

function render(tasks) {
  if (!tasks.length) return h("p", {}, "No task on this page.");
  return table(
    "Tasks: state, requester, parties, trees done and reward",
    [
      ["Task", (t) => h("a", { href: `#/tasks/${t.task_id}` }, `#${t.task_id}`)],
      ["State", (t) => h("span", { class: `badge ${t.status}` }, t.status)],
      ["Requester", (t) => addr(t.requester)],
      ["Parties", (t) => t.parties],
      [
        "Trees done",
        (t) =>
          h(
            "span",
            { class: "trees" },
            h("progress", { max: t.trees, value: t.trees_completed, "aria-label": `task ${t.task_id} trees done` }),
            ` ${t.trees_completed} / ${t.trees}`,
          ),
      ],
      ["Depth", (t) => t.depth],
      ["Reward", (t) => eth(t.reward_wei)],
    ],
    tasks,
    { class: "tasks" },
  );
}

function pagerLinks(page, pages, size) {
  const link = (p, label, rel) =>
    p < 1 || p > pages || p === page
      ? h("span", { class: "off", "aria-disabled": "true" }, label)
      : h("a", { href: `#/?page=${p}&size=${size}`, rel }, label);
  const sizes = h(
    "label",
    {},
    "Per page ",
    h(
      "select",
      { onchange: (e) => (location.hash = `#/?page=1&size=${e.target.value}`) },
      SIZES.map((n) => h("option", { value: n, selected: n === size }, n)),
    ),
  );
  return [link(1, "« First"), link(page - 1, "‹ Newer", "prev"), h("span", {}, `${page} / ${pages}`), link(page + 1, "Older ›", "next"), link(pages, "Oldest »"), sizes];
}
