/**
 * Which peers may speak for the client (X-Forwarded-For, X-Request-ID): the
 * `trustProxy` option and HUB_TRUST_PROXY, with Fastify's meanings (true:
 * every peer; a number: that many hops from this server; addresses and CIDR
 * ranges: those peers). One predicate serves Fastify (`request.ip`, the
 * logs), Express (`req.ip`) and the request id, so the three agree. Node's
 * BlockList matches the ranges, for IPv4 and IPv6 alike.
 */
import net from "node:net";
import type { Parsed } from "./parse.js";

/** false: no peer is trusted; true: every peer; a number: hops; a list: addresses, CIDR ranges, or loopback/linklocal/uniquelocal. */
export type TrustProxy = boolean | number | string[];

/** (address, hop): hop 0 is the peer connected to this server, 1 the address it forwarded for, and so on. */
export type TrustFunction = (address: string, hop: number) => boolean;

const EXPECTED = "true, false, a number of hops, or comma-separated IP addresses / CIDR ranges (such as 10.0.0.0/8,127.0.0.1; loopback, linklocal, uniquelocal)";

const NAMED_RANGES: Record<string, string[]> = {
  loopback: ["127.0.0.1/8", "::1/128"],
  linklocal: ["169.254.0.0/16", "fe80::/10"],
  uniquelocal: ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"],
};

/** An address or range as BlockList takes it, or undefined when it is neither. */
function rangeOf(entry: string): { address: string; prefix: number; family: "ipv4" | "ipv6" } | undefined {
  const [address = "", prefixText, ...rest] = entry.split("/");
  const version = net.isIP(address);
  if (version === 0 || rest.length > 0) return undefined;
  const max = version === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  return prefix <= max ? { address, prefix, family: version === 4 ? "ipv4" : "ipv6" } : undefined;
}

function addressList(entries: readonly unknown[]): Parsed<string[]> {
  const list: string[] = [];
  for (const raw of entries) {
    const entry = typeof raw === "string" ? raw.trim() : "";
    if (entry === "" || !(entry in NAMED_RANGES || rangeOf(entry))) return { expected: EXPECTED };
    list.push(entry);
  }
  return list.length > 0 ? { value: list } : { expected: EXPECTED };
}

/** HUB_TRUST_PROXY's text. */
export const trustProxyText = (raw: unknown): Parsed<TrustProxy> => {
  if (typeof raw !== "string") return { expected: EXPECTED };
  if (raw === "true" || raw === "false") return { value: raw === "true" };
  if (/^\d{1,3}$/.test(raw)) return { value: Number(raw) };
  return addressList(raw.split(","));
};

/** The trustProxy option: a boolean, a whole number of hops, a string as the variable takes it, or an array of addresses. */
export const trustProxyOption = (v: unknown): Parsed<TrustProxy> => {
  if (typeof v === "boolean") return { value: v };
  if (typeof v === "number") return Number.isInteger(v) && v >= 0 ? { value: v } : { expected: EXPECTED };
  if (typeof v === "string") return v === "true" || v === "false" ? { expected: EXPECTED } : trustProxyText(v);
  if (Array.isArray(v)) return addressList(v);
  return { expected: EXPECTED };
};

/** An IPv4 address that reached an IPv6 socket (::ffff:a.b.c.d) is matched as the IPv4 address it is. */
function plainAddress(address: string): { address: string; family: "ipv4" | "ipv6" } {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return { address: mapped[1]!, family: "ipv4" };
  return { address, family: net.isIPv4(address) ? "ipv4" : "ipv6" };
}

/** The predicate for a setting; undefined for false (no peer trusted), which lets Fastify and Express skip the header altogether. */
export function trustFunction(setting: TrustProxy): TrustFunction | undefined {
  if (setting === false || setting === 0) return undefined;
  if (setting === true) return () => true;
  if (typeof setting === "number") return (_address, hop) => hop < setting;
  const blocks = new net.BlockList();
  for (const entry of setting.flatMap((e) => NAMED_RANGES[e] ?? [e])) {
    const range = rangeOf(entry)!;
    blocks.addSubnet(range.address, range.prefix, range.family);
  }
  return (address) => {
    if (net.isIP(address) === 0) return false;
    const plain = plainAddress(address);
    return blocks.check(plain.address, plain.family);
  };
}
