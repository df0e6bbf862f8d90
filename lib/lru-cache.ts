/** A size-bounded map that forgets the least recently used entry first (caches on hot paths). */
export class LruCache<K, V> {
  private readonly entries = new Map<K, V>();
  /** The most recent entry's key: a hit on it (one caller asking again and again) moves nothing. */
  private newest: K | undefined;
  private hasNewest = false;

  constructor(private readonly maxEntries: number) {}

  get(key: K): V | undefined {
    const value = this.entries.get(key);
    if (value === undefined) return undefined;
    // Map keeps insertion order: re-inserting marks the entry as the most recent.
    if (!this.hasNewest || this.newest !== key) this.reinsert(key, value);
    return value;
  }

  set(key: K, value: V): void {
    this.reinsert(key, value);
    if (this.entries.size > this.maxEntries) this.delete(this.entries.keys().next().value as K);
  }

  delete(key: K): void {
    this.entries.delete(key);
    if (this.hasNewest && this.newest === key) {
      this.hasNewest = false;
      this.newest = undefined;
    }
  }

  get size(): number {
    return this.entries.size;
  }

  private reinsert(key: K, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    this.newest = key;
    this.hasNewest = true;
  }
}
