import { createContext, useContext } from "react";
import type { Capabilities } from "./api.js";

export const CapsContext = createContext<Capabilities | null>(null);
export function useCaps(): Capabilities {
  const caps = useContext(CapsContext);
  if (!caps) throw new Error("useCaps outside of a logged-in page");
  return caps;
}
