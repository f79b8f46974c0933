// The dashboard's entry: hash routes (#/, #/tasks/7, #/new) rendered without reloading the page, and the signer
// (browser wallet or key file) shown in the header.

import { createPage } from "./create.js";
import { h, say, short } from "./dom.js";
import { taskList } from "./list.js";
import { currentSigner, forgetSigner, onSignerChange, useKeyFile, useWallet } from "./sign.js";
import { taskPage } from "./task.js";

const main = document.getElementById("main");
let stop = null; // closes the current page's event stream

function route() {
  if (stop) stop();
  stop = null;
  const [path, search] = (location.hash.slice(1) || "/").split("?");
  const query = new URLSearchParams(search || "");
  const task = path.match(/^\/tasks\/(\d+)$/);
  if (task) {
    document.title = `Task #${task[1]} · FGBDT-Chain`;
    stop = taskPage(main, Number(task[1]));
  } else if (path === "/new") {
    document.title = "New task · FGBDT-Chain";
    createPage(main);
  } else {
    document.title = "Tasks · FGBDT-Chain";
    stop = taskList(main, query);
  }
  for (const a of document.querySelectorAll("header nav a")) {
    const here = a.getAttribute("href") === `#${path}` || (path.startsWith("/tasks") && a.getAttribute("href") === "#/");
    if (here) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const heading = main.querySelector("h1");
  if (heading && document.activeElement !== document.body) heading.focus();
}

function showSigner(signer) {
  const status = document.getElementById("signer-status");
  status.replaceChildren(
    signer
      ? h("span", {}, `Signing as `, h("strong", { title: signer.address, id: "signer-address" }, short(signer.address)), ` (${signer.kind === "key" ? "key file" : "wallet"})`)
      : "Not signing",
  );
  document.getElementById("signer-forget").hidden = !signer;
}

const walletButton = document.getElementById("wallet-connect");
walletButton.hidden = !window.ethereum;
walletButton.addEventListener("click", () => useWallet().catch((err) => say(err.message, "error")));
document.getElementById("key-file").addEventListener("change", async (e) => {
  const file = e.target.files[0];
  if (!file) return;
  try {
    const signer = await useKeyFile(file);
    say(`Key file loaded: signing as ${signer.address}.`);
  } catch (err) {
    say(`${file.name}: ${err.message}`, "error");
  } finally {
    e.target.value = ""; // the file's text is not kept in the input either
  }
});
document.getElementById("signer-forget").addEventListener("click", () => forgetSigner());
// the skip link moves the focus to the content without changing the hash, which is the page's route
document.querySelector("a.skip").addEventListener("click", (e) => {
  e.preventDefault();
  main.focus();
});
onSignerChange(showSigner);
showSigner(currentSigner());
window.addEventListener("hashchange", route);
route();
