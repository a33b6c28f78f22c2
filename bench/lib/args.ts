import { parseArgs, type ParseArgsConfig } from "node:util";

/**
 * node:util's parseArgs for a bench script's command line (a `--` that npm
 * passes through is dropped): `--help` or `-h` prints the usage and exits 0;
 * a command line parseArgs refuses (an unknown option, a missing value)
 * prints its one-line reason and the usage and exits 2, where a stack trace
 * used to say the same less clearly.
 */
export function benchArgs<T extends ParseArgsConfig>(usage: string, config: T): ReturnType<typeof parseArgs<T>> {
  const args = process.argv.slice(2).filter((a) => a !== "--");
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
