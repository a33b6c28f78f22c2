/** A property of target, read as a method call would see it: functions come bound to target. */
export function boundProperty(target: object, prop: string | symbol): unknown {
  const value = Reflect.get(target, prop, target) as unknown;
  return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
}

/**
 * A stable object a module can import before any server starts (the exported
 * `logger`, `superuserPool`): each property read is forwarded to what
 * `current()` returns at that moment, so it follows the running server. While
 * there is none, `whenMissing(prop)` answers (or throws).
 */
export function forwardingProxy<T extends object>(current: () => T | undefined, whenMissing: (prop: string | symbol) => unknown): T {
  return new Proxy({} as T, {
    get(_target, prop) {
      const target = current();
      return target === undefined ? whenMissing(prop) : boundProperty(target, prop);
    },
  });
}
