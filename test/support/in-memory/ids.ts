import type { IdSequence, Ids, MintedKeyResource } from '../../../shared/domain/port.js';

/**
 * The command port's ids as counters in memory: each sequence, each org's minted-key numbers
 * and the org ids count up from 1 (or from where a test sets them), never reused, like the
 * Postgres sequences and `service.key_counters`.
 */
export class InMemoryIds implements Ids {
  private readonly sequences = new Map<string, number>();
  private readonly keyNumbers = new Map<string, number>();

  /** The next `nextId` of `sequence` (or of org ids) answers `next`. */
  startAt(sequence: IdSequence | 'org_ids', next: number): this {
    this.sequences.set(sequence, next - 1);
    return this;
  }

  /** The next minted-key number of the org's resource answers `next` (as if keys before it were minted). */
  startKeysAt(orgId: number, resource: MintedKeyResource, next: number): this {
    this.keyNumbers.set(`${orgId}/${resource}`, next - 1);
    return this;
  }

  async nextId(sequence: IdSequence): Promise<number> {
    return this.next(sequence);
  }

  async nextIds(sequence: IdSequence, count: number): Promise<number[]> {
    return Array.from({ length: count }, () => this.next(sequence));
  }

  async nextKeyNumber(orgId: number, resource: MintedKeyResource): Promise<number> {
    const key = `${orgId}/${resource}`;
    const value = (this.keyNumbers.get(key) ?? 0) + 1;
    this.keyNumbers.set(key, value);
    return value;
  }

  async nextIdAndKeyNumber(sequence: IdSequence, orgId: number, resource: MintedKeyResource): Promise<{ id: number; keyNumber: number }> {
    return { keyNumber: await this.nextKeyNumber(orgId, resource), id: this.next(sequence) };
  }

  async nextOrgId(): Promise<number> {
    return this.next('org_ids');
  }

  private next(sequence: string): number {
    const value = (this.sequences.get(sequence) ?? 0) + 1;
    this.sequences.set(sequence, value);
    return value;
  }
}
