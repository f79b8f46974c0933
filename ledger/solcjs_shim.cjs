#!/usr/bin/env node
// A stand-in for the native solc binary, backed by solc-js from the project's node_modules, so that nothing needs a
// native compiler. It answers the three call shapes its users make:
//   --version                           solc's own format (py-solc-x, forge, Slither's crytic-compile)
//   --standard-json [--base-path D] [--include-path D]...
//                                       the input on stdin (py-solc-x for the shipped artifacts, forge and halmos)
//   [REMAP=TARGET]... FILE... --combined-json ITEMS [--optimize] [--optimize-runs N] [--via-ir] [--evm-version V]
//                                       translated to standard JSON and back (Slither's solc path)
// Imports are read from the base path, each include path, the working directory and the project's root, in order.
// Two environment variables serve the analysers: FGBDT_SOLC_SETTINGS (JSON merged into the standard-JSON settings;
// Slither's standard-JSON path never sends viaIR) and FGBDT_SOLC_NO_CODEGEN=1 (ABI, AST and NatSpec only, no
// bytecode: Slither reads the AST, and code generation is four fifths of its run).
"use strict";
const path = require("path");
const fs = require("fs");

const root = process.env.FGBDT_NODE_ROOT || path.resolve(__dirname, "..");
const solc = require(require.resolve("solc", { paths: [root] }));
const args = process.argv.slice(2);

// --name value, or --name=value; every occurrence
function optionValues(name) {
  const out = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === name && i + 1 < args.length) out.push(args[++i]);
    else if (args[i].startsWith(name + "=")) out.push(args[i].slice(name.length + 1));
  }
  return out;
}

const searchDirs = [...optionValues("--base-path"), ...optionValues("--include-path"), process.cwd(), root];

function findImports(p) {
  const candidates = path.isAbsolute(p) ? [p] : searchDirs.map((base) => path.resolve(base, p));
  for (const full of candidates) {
    if (fs.existsSync(full) && fs.statSync(full).isFile()) return { contents: fs.readFileSync(full, "utf8") };
  }
  return { error: "File not found: " + p };
}

// outputs that need code generation (the slow part), dropped under FGBDT_SOLC_NO_CODEGEN
const CODEGEN = /^(evm|ir|irOptimized|ewasm)/;

function adjust(input) {
  input.settings = input.settings || {};
  if (process.env.FGBDT_SOLC_SETTINGS) Object.assign(input.settings, JSON.parse(process.env.FGBDT_SOLC_SETTINGS));
  if (process.env.FGBDT_SOLC_NO_CODEGEN) {
    const selection = input.settings.outputSelection || {};
    for (const file of Object.values(selection)) {
      for (const [contract, outputs] of Object.entries(file)) {
        file[contract] = outputs.filter((o) => !CODEGEN.test(o) || o === "evm.methodIdentifiers");
      }
    }
  }
  return input;
}

// --combined-json item => standard-JSON output selection (contract level, or "" for the file level)
const COMBINED = {
  abi: "abi",
  ast: "",
  bin: "evm.bytecode.object",
  "bin-runtime": "evm.deployedBytecode.object",
  srcmap: "evm.bytecode.sourceMap",
  "srcmap-runtime": "evm.deployedBytecode.sourceMap",
  userdoc: "userdoc",
  devdoc: "devdoc",
  hashes: "evm.methodIdentifiers",
  metadata: "metadata",
  "storage-layout": "storageLayout",
  opcodes: "evm.bytecode.opcodes",
};
// options that take a value, and flags, of the combined-json call shape
const VALUED = new Set([
  "--combined-json",
  "--optimize-runs",
  "--evm-version",
  "--allow-paths",
  "--base-path",
  "--include-path",
]);
const FLAGS = new Set(["--optimize", "--via-ir", "--no-color", "--pretty-json"]);

function pick(output, dotted) {
  return dotted.split(".").reduce((o, k) => (o === undefined ? undefined : o[k]), output);
}

function combinedJson() {
  const items = optionValues("--combined-json")[0].split(",").filter((i) => i !== "compact-format");
  const files = [];
  const remappings = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const name = a.split("=")[0];
    if (VALUED.has(a)) i++;
    else if (VALUED.has(name) || FLAGS.has(a)) continue;
    else if (a.startsWith("-")) throw new Error("unsupported option " + a);
    else if (a.includes("=")) remappings.push(a);
    else files.push(a);
  }
  const unknown = items.filter((i) => !(i in COMBINED));
  if (unknown.length) throw new Error("unsupported --combined-json items: " + unknown.join(","));
  const sources = {};
  for (const f of files) {
    const rel = path.relative(process.cwd(), path.resolve(f));
    const unit = rel.startsWith("..") ? path.resolve(f) : rel.split(path.sep).join("/");
    sources[unit] = { content: fs.readFileSync(f, "utf8") };
  }
  const selected = items.map((i) => COMBINED[i]).filter((o) => o !== "");
  const settings = {
    remappings,
    optimizer: { enabled: args.includes("--optimize") },
    outputSelection: { "*": { "*": selected, "": items.includes("ast") ? ["ast"] : [] } },
  };
  const runs = optionValues("--optimize-runs")[0];
  if (runs !== undefined) settings.optimizer.runs = Number(runs);
  if (args.includes("--via-ir")) settings.viaIR = true;
  const evm = optionValues("--evm-version")[0];
  if (evm) settings.evmVersion = evm;
  const input = adjust({ language: "Solidity", sources, settings });
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
  const errors = output.errors || [];
  for (const e of errors) process.stderr.write(e.formattedMessage || e.message + "\n");
  if (errors.some((e) => e.severity === "error")) {
    process.exitCode = 1;
    return;
  }
  const contracts = {};
  for (const [unit, byName] of Object.entries(output.contracts || {})) {
    for (const [name, data] of Object.entries(byName)) {
      const entry = {};
      for (const item of items) {
        if (item === "ast") continue;
        const value = pick(data, COMBINED[item]);
        entry[item] = value === undefined ? (item === "hashes" || item.endsWith("doc") ? {} : "") : value;
      }
      contracts[unit + ":" + name] = entry;
    }
  }
  const units = Object.entries(output.sources || {}).sort((a, b) => a[1].id - b[1].id);
  const result = {
    contracts,
    sourceList: units.map(([unit]) => unit),
    sources: Object.fromEntries(units.map(([unit, s]) => [unit, { AST: s.ast, id: s.id }])),
    version: solc.version(),
  };
  process.stdout.write(JSON.stringify(result));
}

if (args.includes("--version")) {
  process.stdout.write("solc, the solidity compiler commandline interface\nVersion: " + solc.version() + "\n");
} else if (args.includes("--standard-json")) {
  const input = adjust(JSON.parse(fs.readFileSync(0, "utf8")));
  // No process.exit here: it would cut a large output short while the pipe is still draining.
  process.stdout.write(solc.compile(JSON.stringify(input), { import: findImports }));
} else if (optionValues("--combined-json").length) {
  try {
    combinedJson();
  } catch (err) {
    process.stderr.write("solcjs_shim: " + err.message + "\n");
    process.exitCode = 1;
  }
} else {
  process.stderr.write("solcjs_shim: only --version, --standard-json and --combined-json are supported\n");
  process.exitCode = 1;
}
