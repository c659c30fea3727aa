// The sandbox stands apart from the pipeline: it shares only the API schemas in src/api/.
export { type Sandbox, SandboxOptions, startSandbox } from "./server.js";
