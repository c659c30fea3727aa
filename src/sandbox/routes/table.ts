// The route tables put behind one lookup: a request's method and path to its route, or the 404 or
// 405 the specs' error shape gives.
import FindMyWay from "find-my-way";
import { ApiError } from "../http.js";
import type { Route } from "./route.js";

const METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE"] as const;

/** A route as found: `template` names it in the stats (`GET /vid/v2/query/video_generation/{task_id}`). */
interface FoundRoute extends Route {
  template: string;
}

export class RouteTable {
  private readonly router = FindMyWay<FindMyWay.HTTPVersion.V1>({ ignoreTrailingSlash: true });

  constructor(routes: readonly Route[]) {
    for (const route of routes) this.add(route);
  }

  private add(route: Route): void {
    const template = `${route.method} ${route.path.replace(/:(\w+)/g, "{$1}")}`;
    const store: FoundRoute = { ...route, template };
    this.router.on(route.method, route.path, () => undefined, store);
    // Result and upload URLs answer HEAD too, so a client can learn a size without the body.
    if (route.method === "GET" && route.kind === "media") {
      this.router.on("HEAD", route.path, () => undefined, {
        ...store,
        template: `HEAD ${template.slice(4)}`,
      });
    }
  }

  /** The route and its path parameters; throws a 405 (with `Allow`) or a 404 when there is none. */
  find(method: string, pathname: string): { route: FoundRoute; params: Record<string, string | undefined> } {
    const found = this.router.find(method as FindMyWay.HTTPMethod, pathname);
    const route = found?.store as FoundRoute | undefined;
    if (found && route) return { route, params: found.params };
    const allowed = METHODS.filter((m) => m !== method && this.router.find(m, pathname));
    if (allowed.length > 0) {
      throw new ApiError(405, "method_not_allowed_error", `${method} is not allowed on ${pathname}`, {
        allow: allowed.join(", "),
      });
    }
    throw new ApiError(404, "not_found_error", `no such endpoint: ${method} ${pathname}`);
  }
}
