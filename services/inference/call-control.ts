/** A provider call's cancellation: a deadline (re-armed by `touch` while a stream moves) or an abort. */
import { ProviderFailure } from "./providers";

export class CallControl {
  private readonly controller = new AbortController();
  private timer?: NodeJS.Timeout;

  constructor(private readonly timeoutMs: number) {
    this.touch();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  touch(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.controller.abort(new ProviderFailure("timeout", `No answer within ${this.timeoutMs} ms`)), this.timeoutMs);
  }

  abort(reason: string): void {
    this.controller.abort(new ProviderFailure("aborted", reason));
  }

  dispose(): void {
    clearTimeout(this.timer);
  }
}
