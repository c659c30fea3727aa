// The typed clients of both services over one HTTP layer.
import { HttpClient, type HttpClientOptions } from "./http.js";
import { SpeechClient } from "./speech-client.js";
import { VideoClient } from "./video-client.js";

export * from "./errors.js";
export { HttpClient, type HttpClientOptions, type Logger } from "./http.js";
export {
  collectList,
  IncompleteListError,
  incompleteWarning,
  type ListResult,
  MAX_LIST_PAGES,
  takeList,
} from "./paginate.js";
export { inspectReferenceAudio, ReferenceAudioError, uploadReferenceAudio } from "./reference-audio.js";
export { DEFAULT_POLICIES, parseRetryAfter, type RetryPolicy, retryDelay } from "./retry.js";

export interface Clients {
  http: HttpClient;
  video: VideoClient;
  speech: SpeechClient;
  close(): Promise<void>;
}

/** Both clients over one pool. */
export function createClients(options: HttpClientOptions): Clients {
  const http = new HttpClient(options);
  return { http, video: new VideoClient(http), speech: new SpeechClient(http), close: () => http.close() };
}
