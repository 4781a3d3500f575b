// How the web UI reaches `langgraph dev`: the SDK client, with the user's bearer token.
//
// With TURNPLAN_AUTH_TOKENS set the server refuses requests without `Authorization: Bearer
// <token>`, so the UI has a Token field; the client sends what is typed there on every request.
// The token is kept in this browser's localStorage for the UI's origin (so a reload keeps it),
// never in the URL or the built bundle; clearing the field forgets it. With no tokens set on the
// server, leave it empty.
import { Client } from "@langchain/langgraph-sdk";

export const TOKEN_KEY = "turnplan.token";

/** The headers that authenticate the UI's requests: none without a token. */
export function authHeaders(token: string): Record<string, string> {
  const value = token.trim();
  return value ? { Authorization: `Bearer ${value}` } : {};
}

/** An SDK client for the API at `apiUrl` that sends `token` as a bearer token. */
export function makeClient(apiUrl: string, token: string): Client {
  return new Client({ apiUrl, defaultHeaders: authHeaders(token) });
}

type TokenStorage = Pick<Storage, "getItem" | "setItem" | "removeItem">;

/** The token saved in `storage` by an earlier visit ("" when none). */
export function savedToken(storage: TokenStorage): string {
  return storage.getItem(TOKEN_KEY) ?? "";
}

/** Remember `token` in `storage` (an empty one is forgotten). */
export function saveToken(storage: TokenStorage, token: string): void {
  if (token.trim()) storage.setItem(TOKEN_KEY, token.trim());
  else storage.removeItem(TOKEN_KEY);
}
