#!/usr/bin/env node
// A stand-in for the native solc binary, backed by solc-js from the project's node_modules. It answers the two
// things py-solc-x asks of a compiler: `--version` in solc's own format, and `--standard-json` read from stdin.
// Kept this small on purpose: py-solc-x does the rest (error handling, JSON parsing).
"use strict";
const path = require("path");
const fs = require("fs");

const root = process.env.FGBDT_NODE_ROOT || path.resolve(__dirname, "..");
const solc = require(require.resolve("solc", { paths: [root] }));
const args = process.argv.slice(2);

if (args.includes("--version")) {
  process.stdout.write("solc, the solidity compiler commandline interface\nVersion: " + solc.version() + "\n");
} else if (args.includes("--standard-json")) {
  const input = fs.readFileSync(0, "utf8");
  const findImports = (p) => {
    for (const base of [process.cwd(), root]) {
      const full = path.resolve(base, p);
      if (fs.existsSync(full)) return { contents: fs.readFileSync(full, "utf8") };
    }
    return { error: "File not found: " + p };
  };
  // No process.exit here: it would cut a large output short while the pipe is still draining.
  process.stdout.write(solc.compile(input, { import: findImports }));
} else {
  process.stderr.write("solcjs_shim: only --version and --standard-json are supported\n");
  process.exitCode = 1;
}
