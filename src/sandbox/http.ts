// Answers in the exact shapes of the two specs. Handlers throw these; the server renders them.
import type { ServerResponse } from "node:http";
import { formatIssue, type Issue } from "../api/common.js";

/** 400-style body: `{type: "error", error: {type, message, http_code: "400"}, request_id}`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  static badRequest(issues: Issue | readonly Issue[]): ApiError {
    const list = Array.isArray(issues) ? issues : [issues as Issue];
    return new ApiError(400, "bad_request_error", list.map(formatIssue).join("; "));
  }
}

/**
 * Business errors keep the downstream shape `{RetCode, Message, request_uuid}`. The status is what
 * the (emulated) downstream answered; some business failures come back as HTTP 200.
 */
export class BusinessError extends Error {
  constructor(
    readonly status: number,
    readonly retCode: number,
    message: string,
  ) {
    super(message);
  }
}

/** RetCodes the sandbox uses. The specs show none; these are documented in docs/sandbox.md. */
export const RetCode = {
  notFound: 40401,
  officialSkill: 40301,
  presetVoice: 40302,
  invalidState: 40901,
  voiceInUse: 40902,
  uploadMismatch: 40903,
  alreadyRegistered: 40904,
  insufficientPoints: 40201,
  billingDisabled: 40202,
} as const;

export const notFound = (what: string, id: string) =>
  new BusinessError(404, RetCode.notFound, `${what} not found: ${id}`);

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(payload),
    ...headers,
  });
  res.end(payload);
}

export function renderError(res: ServerResponse, error: unknown, requestId: string): void {
  if (error instanceof ApiError) {
    sendJson(
      res,
      error.status,
      {
        type: "error",
        error: { type: error.type, message: error.message, http_code: String(error.status) },
        request_id: requestId,
      },
      error.headers,
    );
  } else if (error instanceof BusinessError) {
    sendJson(res, error.status, { RetCode: error.retCode, Message: error.message, request_uuid: requestId });
  } else {
    sendJson(res, 500, {
      type: "error",
      error: { type: "internal_error", message: "internal sandbox error", http_code: "500" },
      request_id: requestId,
    });
  }
}
