/**
 * Per-account limits and fair-share weight: the one place the scheduler asks for them. Today every
 * account has the environment's defaults (EnvAccountLimits); an admin table can feed another
 * implementation of `AccountLimits` later without touching placement or submission.
 */
export type AccountLimit = {
  /** Fair-share weight (> 0): an account's usage is divided by it. */
  weight: number;
  /** The most GPUs its jobs may hold at once (QUOTA_RUNNING_GPUS); null: no limit. Over it jobs wait. */
  runningGpus: number | null;
  /** The most jobs it may have queued (QUOTA_QUEUED_JOBS); over it a submission is 403 QUOTA_EXCEEDED. */
  queuedJobs: number;
};

export interface AccountLimits {
  limitsFor(clientIds: readonly string[]): Promise<Map<string, AccountLimit>>;
}

/** Every account gets the environment's defaults. */
export class EnvAccountLimits implements AccountLimits {
  constructor(private readonly defaults: AccountLimit) {}

  limitsFor(clientIds: readonly string[]): Promise<Map<string, AccountLimit>> {
    return Promise.resolve(new Map(clientIds.map((id) => [id, this.defaults])));
  }
}
