// The resolve hook of test/helpers/ts-specifiers.mjs (module.register runs it in the loader's thread).
import fs from "node:fs";

export async function resolve(specifier, context, next) {
  if ((specifier.startsWith("./") || specifier.startsWith("../")) && specifier.endsWith(".js") && context.parentURL?.endsWith(".ts")) {
    const url = new URL(specifier, context.parentURL);
    if (!fs.existsSync(url)) {
      const ts = new URL(`${specifier.slice(0, -3)}.ts`, context.parentURL);
      if (fs.existsSync(ts)) return next(ts.href, context);
    }
  }
  return next(specifier, context);
}
