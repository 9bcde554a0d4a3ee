// The configs of the Workers behind the entry as `npm start`
// (scripts/start.sh) runs them: wrangler.write.toml and wrangler.extras.toml,
// each with every `--var` of the command line in its [vars].
// `wrangler dev -c wrangler.toml -c <these>` gives its own flags (--var,
// --port …) to the first config only, so the Workers behind it would
// otherwise not see them; each Worker reads the vars it needs (the tier
// overrides all three). Written as JSON into a directory of its own
// (start.sh makes one per run and removes it): `write.json` and
// `extras.json`, with `main` made absolute, no [build] (start.sh built every
// Worker) and a `.dev.vars` link to the repository's, where the local
// service signing key is.
//
//   node scripts/dev-config.mjs DIR [NAME:VALUE …]
import { experimental_readRawConfig } from "wrangler";
import { existsSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const [dir, ...pairs] = process.argv.slice(2);
if (!dir) throw new Error("usage: node scripts/dev-config.mjs DIR [NAME:VALUE …]");

const vars = {};
for (const pair of pairs) {
  const at = pair.indexOf(":");
  if (at <= 0) throw new Error(`--var ${pair}: not NAME:VALUE`);
  vars[pair.slice(0, at)] = pair.slice(at + 1);
}
for (const [source, out] of [
  ["wrangler.write.toml", "write.json"],
  ["wrangler.extras.toml", "extras.json"],
]) {
  const { rawConfig } = experimental_readRawConfig({ config: path.join(ROOT, source) });
  const config = { ...rawConfig, main: path.resolve(ROOT, rawConfig.main), vars: { ...(rawConfig.vars ?? {}), ...vars } };
  delete config.build;
  writeFileSync(path.join(dir, out), JSON.stringify(config, null, 2));
}
const devVars = path.join(ROOT, ".dev.vars");
if (existsSync(devVars)) symlinkSync(devVars, path.join(dir, ".dev.vars"));
