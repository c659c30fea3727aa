// Requests to the services by service and answer, heard on undici's own diagnostics channels (the
// HTTP layer, src/api/attempt.ts, sends every attempt through undici's `request`): the layer stays
// unaware of metrics, and pays nothing while no run asks for them.
import { subscribe, unsubscribe } from "node:diagnostics_channel";

type Service = "video" | "speech";

interface UndiciRequest {
  path?: unknown;
  headers?: unknown;
}

/** What is counted: an answer's status code (as text), or `error` when no answer came. */
type RequestTally = (service: Service, code: string) => void;

/**
 * An API request carries the key in its authorization header; signed uploads and result downloads
 * carry none, and are not requests to the services' APIs.
 */
function isApi(request: UndiciRequest): boolean {
  const headers = request.headers;
  if (Array.isArray(headers))
    return headers.some((h, i) => i % 2 === 0 && String(h).toLowerCase() === "authorization");
  return typeof headers === "string" && headers.toLowerCase().includes("authorization:");
}

/** The service a path belongs to (`/vid/...`, `/audio/...`), also under a base URL with a path of its own. */
function serviceOf(request: UndiciRequest): Service | undefined {
  const path = typeof request.path === "string" ? request.path : "";
  if (path.includes("/audio/")) return "speech";
  if (path.includes("/vid/")) return "video";
  return undefined;
}

/** Counts every API answer and failed attempt until the returned function is called. */
export function watchRequests(tally: RequestTally): () => void {
  const onHeaders = (message: unknown) => {
    const { request, response } = message as { request: UndiciRequest; response: { statusCode: number } };
    const service = isApi(request) ? serviceOf(request) : undefined;
    if (service) tally(service, String(response.statusCode));
  };
  const onError = (message: unknown) => {
    const { request, error } = message as { request: UndiciRequest; error: { name?: string } };
    // An abort is the run stopping a request it no longer needs, not a failure of the service.
    if (error?.name === "AbortError") return;
    const service = isApi(request) ? serviceOf(request) : undefined;
    if (service) tally(service, "error");
  };
  subscribe("undici:request:headers", onHeaders);
  subscribe("undici:request:error", onError);
  return () => {
    unsubscribe("undici:request:headers", onHeaders);
    unsubscribe("undici:request:error", onError);
  };
}
