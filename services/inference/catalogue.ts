/**
 * The merged model list: every reachable provider's models, cached briefly (shared through Redis
 * when configured), and the model → provider lookup of the hot path, which never fetches lists
 * while the cached one knows the model.
 */
import { withRedisTimeout } from "./redis-timeout";
import type Redis from "ioredis";
import type { Provider, ProviderModel } from "./providers";

export type ModelEntry = {
  /** What clients send as `model`. */
  name: string;
  provider: string;
  /** The provider's own id for it. */
  upstreamId: string;
  parameterSize: string;
  description: string;
};

export type Snapshot = { entries: ModelEntry[]; unreachable: string[]; fetchedAt: number; expiresAt: number };

export type ProviderListing = { provider: string; models: ProviderModel[] | null };

/**
 * Providers in configuration order; a provider that is down (null) drops out. A name two
 * providers share stays with the first; the later copies are listed as `<provider>/<name>`.
 */
export function mergeModels(listings: ProviderListing[]): Pick<Snapshot, "entries" | "unreachable"> {
  const entries: ModelEntry[] = [];
  const taken = new Set<string>();
  const unreachable: string[] = [];
  for (const { provider, models } of listings) {
    if (!models) {
      unreachable.push(provider);
      continue;
    }
    for (const m of models) {
      const name = taken.has(m.id) ? `${provider}/${m.id}` : m.id;
      if (taken.has(name)) continue;
      taken.add(name);
      entries.push({ name, provider, upstreamId: m.id, parameterSize: m.parameterSize, description: m.description });
    }
  }
  return { entries, unreachable };
}

export interface SnapshotStore {
  get(): Promise<Snapshot | undefined>;
  set(snapshot: Snapshot): Promise<void>;
}

/** Shares the list between replicas; a slow or failing Redis only costs a provider fetch. */
export class RedisSnapshotStore implements SnapshotStore {
  constructor(
    private readonly redis: Redis,
    private readonly key: string,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {}

  async get(): Promise<Snapshot | undefined> {
    try {
      const raw = await withRedisTimeout(this.redis.get(this.key));
      return raw ? (JSON.parse(raw) as Snapshot) : undefined;
    } catch (err) {
      this.onError(err);
      return undefined;
    }
  }

  async set(snapshot: Snapshot): Promise<void> {
    const ttlMs = snapshot.expiresAt - snapshot.fetchedAt;
    if (ttlMs <= 0) return;
    try {
      await withRedisTimeout(this.redis.set(this.key, JSON.stringify(snapshot), "PX", ttlMs));
    } catch (err) {
      this.onError(err);
    }
  }
}

export type CatalogueOptions = {
  providers: Provider[];
  ttlMs: number;
  /** A list missing a provider is kept at most this long, so one coming back shows up soon. */
  partialTtlMs: number;
  /** Per provider, for fetching its list. */
  fetchTimeoutMs: number;
  /** An unknown model refreshes the list, but not more often than this. */
  minRefreshMs: number;
  store?: SnapshotStore;
  now?: () => number;
};

export class ModelCatalogue {
  private snapshot?: Snapshot;
  private index = new Map<string, ModelEntry>();
  private inflight?: Promise<Snapshot>;
  private readonly now: () => number;

  constructor(private readonly opts: CatalogueOptions) {
    this.now = opts.now ?? Date.now;
  }

  /** The list, from the cache while it is fresh. */
  async current(): Promise<Snapshot> {
    if (this.snapshot && this.snapshot.expiresAt > this.now()) return this.snapshot;
    return this.refresh(true);
  }

  /**
   * The entry for `name`. A known name answers from the cache even when stale (refreshed in the
   * background); an unknown one refreshes the list from the providers first.
   */
  async resolve(name: string): Promise<{ entry?: ModelEntry; snapshot: Snapshot }> {
    const snapshot = this.snapshot;
    if (snapshot) {
      const entry = this.index.get(name);
      if (entry) {
        if (snapshot.expiresAt <= this.now()) this.current().catch(() => undefined);
        return { entry, snapshot };
      }
      if (this.now() - snapshot.fetchedAt < this.opts.minRefreshMs) return { snapshot };
    }
    // A first lookup may adopt another replica's list; a miss asks the providers themselves.
    const fresh = await this.refresh(!snapshot);
    return { entry: this.index.get(name), snapshot: fresh };
  }

  /** A provider said it does not know a listed model: the next list is fetched again. */
  invalidate(): void {
    if (this.snapshot) this.snapshot = { ...this.snapshot, expiresAt: 0 };
  }

  private refresh(useShared: boolean): Promise<Snapshot> {
    this.inflight ??= this.load(useShared).finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  private async load(useShared: boolean): Promise<Snapshot> {
    if (useShared && this.opts.store) {
      const shared = await this.opts.store.get();
      if (shared && shared.expiresAt > this.now()) return this.adopt(shared);
    }
    const listings = await Promise.all(
      this.opts.providers.map(async (provider): Promise<ProviderListing> => {
        const signal = AbortSignal.timeout(this.opts.fetchTimeoutMs);
        try {
          return { provider: provider.name, models: await provider.listModels(signal) };
        } catch {
          return { provider: provider.name, models: null };
        }
      }),
    );
    const fetchedAt = this.now();
    const merged = mergeModels(listings);
    const ttl = merged.unreachable.length ? Math.min(this.opts.ttlMs, this.opts.partialTtlMs) : this.opts.ttlMs;
    const snapshot = this.adopt({ ...merged, fetchedAt, expiresAt: fetchedAt + ttl });
    await this.opts.store?.set(snapshot);
    return snapshot;
  }

  private adopt(snapshot: Snapshot): Snapshot {
    this.snapshot = snapshot;
    this.index = new Map(snapshot.entries.map((e) => [e.name, e]));
    return snapshot;
  }
}
