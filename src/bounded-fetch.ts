/**
 * Reading what an outside system (a casino) answers, with a bound on its
 * size: the body is streamed and reading stops at the limit, so a hostile or
 * broken server costs at most `limit` bytes of memory, never its whole answer.
 */

/** The most bytes the hub reads of any answer of a casino (a transfer or take-request page, an outcome). */
export const CASINO_ANSWER_MAX_BYTES = 1024 * 1024;

/** An answer larger than the reader's limit: nothing of it was used. */
export class AnswerTooLargeError extends Error {
  constructor(
    readonly limit: number,
    /** What the answer declared (Content-Length), when it did. */
    readonly declared: number | undefined,
  ) {
    super(
      declared !== undefined
        ? `the answer declares ${declared} bytes, more than the ${limit} bytes the hub reads`
        : `the answer is larger than the ${limit} bytes the hub reads; reading stopped there`,
    );
    this.name = "AnswerTooLargeError";
  }
}

/**
 * The body of `response` as text, reading at most `limit` bytes (after any
 * content decoding). A declared length over the limit is refused before
 * reading; an undeclared one is cut at the limit. Either way the rest of the
 * body is discarded and the connection released. The request's own abort
 * signal (its time limit) still applies while the body is read.
 */
export async function readBoundedText(response: Response, limit: number): Promise<string> {
  const header = response.headers.get("content-length");
  const declared = header !== null && /^\d+$/.test(header) ? Number(header) : undefined;
  if (declared !== undefined && declared > limit) {
    await response.body?.cancel().catch(() => undefined);
    throw new AnswerTooLargeError(limit, declared);
  }
  if (!response.body) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      throw new AnswerTooLargeError(limit, undefined);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, size).toString("utf8");
}
