import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

const here = fileURLToPath(new URL(".", import.meta.url));

// The operator's dashboard, built into dist/dashboard and served by the hub
// (adapters/dashboard.ts). Relative asset URLs, so the hub can serve it under
// any path; no inline script anywhere, so the page's CSP can forbid them.
export default defineConfig({
  root: here,
  base: "./",
  plugins: [react()],
  logLevel: "warn",
  build: {
    outDir: fileURLToPath(new URL("../../dist/dashboard", import.meta.url)),
    emptyOutDir: true,
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    sourcemap: false,
  },
});
