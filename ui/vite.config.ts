// The UI is served on its own port and reaches `langgraph dev` through this proxy under /api,
// so the browser needs no CORS setting. TURNPLAN_API_URL names the dev server (default: the
// port `langgraph dev` uses unless told otherwise).
//
// Origins: the API refuses writes from web pages of origins it does not list (agent/origins.py).
// A request of the UI's own page is a same-origin request to this server, on whatever port
// it runs, so the proxy drops its Origin header (the API then treats it as the non-browser
// client it stands for); a foreign page's request keeps its Origin and is refused. Only on
// loopback host names: a foreign name rebound to 127.0.0.1 keeps its own Origin. The UI server
// answers no cross-origin reads either (`cors: false`).
import type { IncomingMessage } from "node:http";
import react from "@vitejs/plugin-react";
import { defineConfig, type ProxyOptions } from "vite";

const api = process.env.TURNPLAN_API_URL ?? "http://127.0.0.1:2024";
const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]"]);

/** Whether a request comes from a page this UI server served on a loopback address. */
export function fromOwnPage(request: IncomingMessage): boolean {
  const { origin, host } = request.headers;
  if (!origin || !host) return false;
  const hostname = host.replace(/:\d+$/, "");
  return LOOPBACK.has(hostname) && (origin === `http://${host}` || origin === `https://${host}`);
}

const proxy: Record<string, ProxyOptions> = {
  "/api": {
    target: api,
    changeOrigin: true,
    rewrite: (path: string) => path.replace(/^\/api/, ""),
    configure: (server) => {
      server.on("proxyReq", (proxied, request) => {
        if (fromOwnPage(request)) proxied.removeHeader("origin");
      });
    },
  },
};

export default defineConfig({
  plugins: [react()],
  server: { proxy, cors: false },
  preview: { proxy, cors: false, port: Number(process.env.TURNPLAN_UI_PORT ?? 5173) },
});
