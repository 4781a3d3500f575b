// The UI is served on its own port and reaches `langgraph dev` through this proxy under /api,
// so the browser needs no CORS setting. TURNPLAN_API_URL names the dev server (default: the
// port `langgraph dev` uses unless told otherwise).
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

const api = process.env.TURNPLAN_API_URL ?? "http://127.0.0.1:2024";
const proxy = {
  "/api": { target: api, changeOrigin: true, rewrite: (path: string) => path.replace(/^\/api/, "") },
};

export default defineConfig({
  plugins: [react()],
  server: { proxy },
  preview: { proxy, port: Number(process.env.TURNPLAN_UI_PORT ?? 5173) },
});
