import type { Credentials, StoredCredential } from '../../../shared/domain/port.js';

/**
 * The command port's credentials in memory, like `service.user_credentials`: a hash per
 * credential id, read only for its own user. `rows()` answers what is stored, in the order stored,
 * so a test sees what was forgotten.
 */
export class InMemoryCredentials implements Credentials {
  private readonly byId = new Map<string, StoredCredential>();

  async store(credential: StoredCredential): Promise<void> {
    if (this.byId.has(credential.credentialId)) throw new Error(`credential ${credential.credentialId} stored twice`);
    this.byId.set(credential.credentialId, { ...credential });
  }

  async read(userId: string, credentialId: string): Promise<string | null> {
    const credential = this.byId.get(credentialId);
    return credential && credential.userId === userId ? credential.passwordHash : null;
  }

  async forgetAllBut(userId: string, keep: string | null): Promise<void> {
    for (const [id, credential] of this.byId) if (credential.userId === userId && id !== keep) this.byId.delete(id);
  }

  rows(): StoredCredential[] {
    return [...this.byId.values()].map((c) => ({ ...c }));
  }
}
