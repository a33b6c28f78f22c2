import { parseArgs, type ParseArgsConfig } from "node:util";

/**
 * node:util's parseArgs for a bench script's command line (a `--` that npm
 * passes through is dropped): `--help` or `-h` prints the usage and exits 0;
 * a command line parseArgs refuses (an unknown option, a missing value)
 * prints its one-line reason and the usage and exits 2, where a stack trace
 * used to say the same less clearly. `argv`: the arguments to read, when not
 * all of the command line's are the script's own.
 */
export function benchArgs<T extends ParseArgsConfig>(usage: string, config: T, argv = process.argv.slice(2)): ReturnType<typeof parseArgs<T>> {
  const args = argv.filter((a) => a !== "--");
  if (args.includes("--help") || args.includes("-h")) {
    process.stdout.write(usage);
    process.exit(0);
  }
  try {
    return parseArgs<T>({ ...config, args });
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${usage}`);
    process.exit(2);
  }
}

/** An option's value as a number above 0 (a whole one unless `integer` is false); otherwise its reason and the usage, exit 2. */
export function positiveOption(usage: string, name: string, raw: string, integer = true): number {
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
    process.stderr.write(`--${name} must be a positive ${integer ? "integer" : "number"}, received ${JSON.stringify(raw)}\n\n${usage}`);
    process.exit(2);
  }
  return n;
}
