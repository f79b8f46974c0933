// Following the API's server-sent event streams (the task list's and one task's).

import { get } from "./api.js";
import { say } from "./dom.js";

const END = ["completed", "cancelled", "timeout"];

/** Follow `path`'s events, calling `handlers[name](data)`; from the chain's next block when `fromLatest` (past
 * events are read by the page itself). Streams that end (a finished task, a timeout) are not reopened. Returns a
 * function that closes the stream. */
export function follow(path, handlers, { fromLatest = false, onEnd = null } = {}) {
  let source = null;
  let closed = false;
  (async () => {
    let from = 0;
    if (fromLatest) {
      try {
        from = (await get("/v1/health")).block + 1;
      } catch (err) {
        say(`live updates are off: ${err.message}`, "error");
        return;
      }
    }
    if (closed) return;
    source = new EventSource(`${path}${path.includes("?") ? "&" : "?"}from_block=${from}`);
    for (const [name, fn] of Object.entries(handlers)) {
      source.addEventListener(name, (e) => fn(JSON.parse(e.data)));
    }
    source.addEventListener("error", (e) => {
      if (e.data) say(`live updates: ${JSON.parse(e.data).detail}`, "error");
    });
    for (const name of END) {
      source.addEventListener(name, () => {
        source.close();
        if (onEnd) onEnd(name);
      });
    }
  })();
  return () => {
    closed = true;
    if (source) source.close();
  };
}
