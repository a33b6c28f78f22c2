/** See memory-tmp.mjs. */
export function roomyTmpfs(dir: string, bytes: number): boolean;
