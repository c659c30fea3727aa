// One error type carries an exit code to the top, where it is reported once (changesets' pattern).
export class ExitError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}
