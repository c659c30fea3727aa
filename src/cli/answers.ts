// JSON shaping of outcomes: everything one invocation prints and the exit code it ends with.
import { redact } from "../api/redact.js";
import { formatProblems, type Problem } from "../manifest/problems.js";
import type { Classified } from "./errors.js";
import { ExitCode } from "./exit-code.js";
import { inGithubActions, json, type Outcome, workflowCommand } from "./output.js";
import { printedKind } from "./parse.js";

/** Where the answers go: results to stdout, reasons to stderr, each without its trailing newline. */
interface AnswerIo {
  stdout?: ((text: string) => void) | undefined;
  stderr?: ((text: string) => void) | undefined;
}

/**
 * Everything one invocation prints, and the exit code it ends with: text for people, or in JSON
 * mode exactly one object on stdout. Every line may quote a service or a file: redacted by value
 * on the way out.
 */
export class Answers {
  /** With --json (or CLAPPER_JSON): guessed from the words until yargs has parsed them. */
  json: boolean;
  /** Something went to stdout already. */
  private answered = false;
  /** The command printed its answer itself already (the sandbox's first line). */
  private printedAlready = false;
  private readonly rawStdout: (text: string) => void;
  private readonly rawStderr: (text: string) => void;

  constructor(
    io: AnswerIo,
    private readonly env: NodeJS.ProcessEnv,
    json: boolean,
  ) {
    this.json = json;
    this.rawStdout = io.stdout ?? ((text: string) => void process.stdout.write(`${text}\n`));
    this.rawStderr = io.stderr ?? ((text: string) => void process.stderr.write(`${text}\n`));
  }

  stdout(text: string): void {
    this.answered = true;
    this.rawStdout(redact(text));
  }

  stderr(text: string): void {
    this.rawStderr(redact(text));
  }

  /** Prints at once, for a command that answers before it ends. */
  print(text: string): void {
    this.printedAlready = true;
    this.stdout(text);
  }

  /** A second stop signal: the one JSON object of this exit, unless the answer went out already. */
  forced(name: NodeJS.Signals): void {
    if (this.json && !this.answered) {
      this.rawStdout(
        json({
          error: {
            code: ExitCode.Interrupted,
            message: `second ${name}: exited at once; the state is saved, run again to resume`,
          },
        }),
      );
    }
  }

  /** What yargs printed instead of running a command (help, version, a completion script). */
  instead(argv: readonly string[], output: string): number {
    const text = output.replace(/\n+$/, "");
    // The shell's completion callback reads plain words, whatever CLAPPER_JSON says.
    const completing = argv.includes("--get-yargs-completions");
    if (!this.json || completing) this.stdout(text);
    else this.stdout(json({ [printedKind(argv)]: text }));
    return 0;
  }

  /** What a command ended with. */
  outcome(o: Outcome): number {
    if (inGithubActions(this.env) && o.problems?.length) {
      for (const p of o.problems) this.stderr(workflowCommand(p));
    }
    if (this.json) {
      if (o.printed && this.printedAlready && o.code === ExitCode.Ok) return o.code;
      this.stdout(json(answer(o)));
      if (o.code !== ExitCode.Ok && o.message) this.stderr(`clapper: ${o.message}`);
      return o.code;
    }
    if (o.text && o.textTo === "stderr") this.stderr(o.text);
    else if (o.text) this.stdout(o.text);
    for (const note of o.notes ?? []) this.stderr(note);
    if (o.code !== ExitCode.Ok && o.message && !o.text && !o.notes?.length)
      this.stderr(`clapper: ${o.message}`);
    return o.code;
  }

  /** A failure that reached the top, printed as one line (and its problems), or as `{error}`. */
  failure(c: Classified): number {
    const problems = (c.problems ?? []) as Problem[];
    const errors = problems.filter((p) => p.severity === "error");
    const warnings = problems.filter((p) => p.severity === "warning");
    const notes = [
      ...formatProblems(errors).map((line) => `  ${line}`),
      ...formatProblems(warnings).map((line) => `  warning: ${line}`),
    ];
    if (this.printedAlready && this.json) {
      // An answer went out already (the sandbox's first line): the failure goes to stderr only.
      this.stderr(`clapper: ${c.message}`);
      return c.code;
    }
    if (inGithubActions(this.env)) for (const p of problems) this.stderr(workflowCommand(p));
    if (this.json) {
      this.stdout(
        json(answer({ code: c.code, message: c.message, problems, ...(c.data ? { json: c.data } : {}) })),
      );
    }
    this.stderr(`clapper: ${c.message}`);
    for (const line of notes) this.stderr(line);
    return c.code;
  }
}

/** The one JSON object of an outcome: its data, and with a non-zero code `error` beside it. */
function answer(o: Outcome): unknown {
  if (o.code === ExitCode.Ok || o.whole) return o.json ?? {};
  const data =
    o.json === undefined
      ? {}
      : typeof o.json === "object" && o.json !== null && !Array.isArray(o.json)
        ? (o.json as Record<string, unknown>)
        : { data: o.json };
  const problems = (o.problems ?? []).map((p) => ({
    severity: p.severity,
    file: p.file,
    line: p.line,
    field: p.field,
    message: p.message,
  }));
  const message = o.message ?? o.text?.split("\n")[0] ?? `exit code ${o.code}`;
  return { ...data, error: { code: o.code, message, ...(problems.length > 0 ? { problems } : {}) } };
}
