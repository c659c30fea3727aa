// One error type carries an exit code to the top, where it is reported once (changesets' pattern);
// `classify` turns every other error into an exit code and a one-line message, in this one place.
// The API's error classes are recognised by name (up their prototype chain), not imported: this
// module is loaded by every command, and the API layer (zod schemas, undici) only by those that
// talk to a service.
import type { ClapperApiError } from "../api/errors.js";
import type { Problem } from "../manifest/problems.js";
import { ExitCode } from "./exit-code.js";

interface ExitDetails {
  /** Manifest problems behind the exit (`{file, line, field, message}` each). */
  problems?: readonly Problem[];
  /** Data that belongs in the JSON answer beside `error` (a budget table, a report). */
  data?: Record<string, unknown>;
}

export class ExitError extends Error {
  readonly problems: readonly Problem[] | undefined;
  readonly data: Record<string, unknown> | undefined;
  constructor(
    readonly code: number,
    message: string,
    details: ExitDetails = {},
  ) {
    super(message);
    this.problems = details.problems;
    this.data = details.data;
  }
}

// ---------------------------------------------------------------------------------------------
// file system errors: what happened to which path, and what to do
// ---------------------------------------------------------------------------------------------

const FS_REASONS: Record<string, string> = {
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EROFS: "read-only file system",
  ENOENT: "no such file or folder",
  ENOTDIR: "a part of the path is a file, not a folder",
  EISDIR: "is a folder, not a file",
  EEXIST: "already exists",
  ENOSPC: "no space left on the device",
  EDQUOT: "disk quota exceeded",
  ELOOP: "too many symbolic links",
  ENAMETOOLONG: "the name is too long",
  EMFILE: "too many open files",
  EBUSY: "busy",
  EIO: "input/output error",
};

/** A Node file system error (it has an errno code this module knows, and usually a path). */
export function isFsError(error: unknown): error is NodeJS.ErrnoException {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return error instanceof Error && typeof code === "string" && code in FS_REASONS;
}

/** `permission denied (EACCES)`, or the error's own message when it is not a known file system error. */
export function fsReason(error: unknown): string {
  if (!isFsError(error)) return (error as Error)?.message ?? String(error);
  const code = error.code as string;
  if (code === "EEXIST" && error.syscall === "mkdir") return "a file is there, not a folder (EEXIST)";
  return `${FS_REASONS[code]} (${code})`;
}

/** Hints that fit a code whatever the action: the user can act on the path itself. */
function defaultHint(code: string | undefined): string | undefined {
  switch (code) {
    case "EACCES":
    case "EPERM":
      return "check the permissions, or choose a place this user can write";
    case "EROFS":
      return "choose a place on a writable file system";
    case "ENOSPC":
    case "EDQUOT":
      return "free some space and run again";
    default:
      return undefined;
  }
}

/**
 * `cannot write the state folder /app/jobs/.clapper: permission denied (EACCES); pass --state FILE
 * in a writable place`. Exit 2 by default: the path is one the user gave or implied.
 */
export function fsExit(
  error: unknown,
  o: { action: string; path: string; hint?: string; code?: number },
): ExitError {
  const hint = o.hint ?? defaultHint((error as NodeJS.ErrnoException)?.code);
  return new ExitError(
    o.code ?? ExitCode.Usage,
    `cannot ${o.action} ${o.path}: ${fsReason(error)}${hint ? `; ${hint}` : ""}`,
  );
}

const SYSCALL_ACTIONS: Record<string, string> = {
  open: "open",
  mkdir: "create the folder",
  rmdir: "remove the folder",
  write: "write",
  read: "read",
  rename: "rename",
  unlink: "remove",
  scandir: "read the folder",
  stat: "look at",
  lstat: "look at",
  access: "reach",
  copyfile: "copy",
  chmod: "change the mode of",
};

// ---------------------------------------------------------------------------------------------
// every error, classified: an exit code and one line
// ---------------------------------------------------------------------------------------------

/** Whether `error` is an instance of the class named `name` (or of a subclass of it). */
function isA(error: unknown, name: string): boolean {
  for (let proto = error ? Object.getPrototypeOf(error) : null; proto; proto = Object.getPrototypeOf(proto)) {
    if ((proto.constructor as { name?: string } | undefined)?.name === name) return true;
  }
  return false;
}

/** Which service an API error came from ("video", "speech"), when the caller tagged it. */
const services = new WeakMap<object, string>();

export function tagService(error: unknown, service: string): unknown {
  if (isA(error, "ClapperApiError") && !services.has(error as object)) services.set(error as object, service);
  return error;
}

export interface Classified {
  code: number;
  message: string;
  problems?: readonly Problem[];
  data?: Record<string, unknown>;
  /** Set for internal errors (exit 70): the stack, printed only at debug level. */
  stack?: string;
}

interface ClassifyContext {
  /** The service address of the command, for "unreachable" messages. */
  baseUrl?: string;
  /** Where bugs are reported. */
  bugs: string;
}

/** The exit code and the one-line message of any error that reached the top. */
export function classify(error: unknown, ctx: ClassifyContext): Classified {
  if (error instanceof ExitError) {
    return {
      code: error.code,
      message: error.message,
      ...(error.problems?.length ? { problems: error.problems } : {}),
      ...(error.data ? { data: error.data } : {}),
    };
  }
  if (isA(error, "AbortedError")) {
    return {
      code: ExitCode.Interrupted,
      message: `interrupted: ${(error as Error).message}; nothing more was done`,
    };
  }
  if (isA(error, "ClapperApiError")) return classifyApi(error as ClapperApiError, ctx);
  if (isA(error, "ResultUrlError")) return { code: ExitCode.Failed, message: (error as Error).message };
  if (isFsError(error)) {
    const e = error as NodeJS.ErrnoException;
    const action = SYSCALL_ACTIONS[e.syscall ?? ""] ?? e.syscall ?? "use";
    const where = e.path ? ` ${e.path}` : "";
    const hint = defaultHint(e.code);
    return {
      code: ExitCode.Usage,
      message: `cannot ${action}${where}: ${fsReason(e)}${hint ? `; ${hint}` : ""}`,
    };
  }
  const e = error instanceof Error ? error : new Error(String(error));
  return {
    code: ExitCode.Internal,
    message: `internal error (a bug in clapper): ${e.message || e.name}; please report it at ${ctx.bugs} with the command and this message (--log-level debug shows the stack)`,
    ...(e.stack ? { stack: e.stack } : {}),
  };
}

function classifyApi(error: ClapperApiError, ctx: ClassifyContext): Classified {
  const service = services.get(error);
  const who = `the ${service ? `${service} ` : ""}service${ctx.baseUrl ? ` at ${ctx.baseUrl}` : ""}`;
  if (isA(error, "AuthenticationError")) {
    return {
      code: ExitCode.Usage,
      message: `${error.message}: check the key (CLAPPER_API_KEY or --api-key-file) and the address (${ctx.baseUrl ?? "CLAPPER_BASE_URL"})`,
    };
  }
  if (isA(error, "ConnectionError")) {
    const cause = (error.cause as NodeJS.ErrnoException | undefined)?.code;
    const why = isA(error, "TimeoutError") ? "did not answer in time" : "is unreachable";
    return {
      code: ExitCode.Unreachable,
      message: `${who} ${why}${cause ? ` (${cause})` : ""}: ${error.message}; check the address and the network, then run again`,
    };
  }
  if (isA(error, "RateLimitError")) {
    return {
      code: ExitCode.Unreachable,
      message: `${who} refuses service (rate limited, HTTP 429) after every retry: ${error.message}; run again later`,
    };
  }
  if (isA(error, "BusyError")) {
    return {
      code: ExitCode.Unreachable,
      message: `${who} is busy and refused service after every retry: ${error.message}; run again later`,
    };
  }
  if (isA(error, "ServiceError") && error.status !== undefined && error.status >= 500) {
    return {
      code: ExitCode.Unreachable,
      message: `${who} refuses service (HTTP ${error.status}) after every retry: ${error.message}; run again later`,
    };
  }
  // An answer its specification does not allow (a shape or a value no service gives): the service's
  // fault, not the command's; nothing the user changes cures it, a later answer may.
  if (isA(error, "ServiceError")) {
    return {
      code: ExitCode.Unreachable,
      message: `${who} gave an answer its specification does not allow: ${error.message}; run again once it answers as documented`,
    };
  }
  if (isA(error, "InsufficientPointsError")) return { code: ExitCode.Budget, message: error.message };
  // A reference audio file the service would refuse: the user's file, checked before any upload.
  if (isA(error, "ReferenceAudioError")) return { code: ExitCode.Usage, message: error.message };
  // The service answered and said no (400, 404, 409, a business error): the command did not happen.
  return { code: ExitCode.Failed, message: error.message };
}
