/**
 * Which host key each agent identity registered with first (trust on first use, like ssh's
 * known_hosts): afterwards a hello for that identity must prove it holds the same key, so a
 * leaked agent token alone can neither register nor supersede the live agent. Kept in a JSON
 * file (0600) when given one, so pins survive restarts; an owner who moves an agent to a new
 * key removes its line.
 */
import { chmodSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { verifyHostKeyProof } from '../core/auth/host-key.js';
import { TetherError } from '../core/errors.js';
import type { HostKeyProof } from '../core/protocol/methods.js';

export class HostKeyPins {
  /** Fingerprint by identity (`<token sub>/<agent name>`). */
  private readonly pins = new Map<string, string>();

  /** In memory only without a path; otherwise loaded now and rewritten on each new pin. */
  constructor(private readonly path?: string) {
    if (!path) return;
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw new TetherError('FAILED_PRECONDITION', `cannot read agent host key pins ${path}: ${(err as NodeJS.ErrnoException).code}`);
    }
    try {
      for (const [identity, fingerprint] of Object.entries(JSON.parse(text) as Record<string, unknown>)) if (typeof fingerprint === 'string') this.pins.set(identity, fingerprint);
    } catch {
      throw new TetherError('FAILED_PRECONDITION', `agent host key pins ${path} is not a JSON object; fix or remove it`);
    }
  }

  /**
   * Checks an agent hello: a proof, when present, must verify; an identity with a pinned key
   * must prove that key. The first valid proof of an identity pins its key. Returns the
   * fingerprint (undefined for an agent without a host key and no pin). PERMISSION_DENIED
   * otherwise, before the agent is registered, so a live agent of that name keeps its link.
   */
  check(sub: string, agentName: string, proof: HostKeyProof | undefined, now = Date.now()): string | undefined {
    const identity = `${sub}/${agentName}`;
    const pinned = this.pins.get(identity);
    const fingerprint = proof && verifyHostKeyProof(proof, agentName, now);
    if (pinned !== undefined && fingerprint !== pinned) {
      throw new TetherError('PERMISSION_DENIED', `agent "${agentName}" is bound to host key ${pinned}; this hello ${fingerprint ? `proves ${fingerprint}` : 'has no host key'}`);
    }
    if (fingerprint && pinned === undefined) {
      this.pins.set(identity, fingerprint);
      this.save();
    }
    return fingerprint;
  }

  private save(): void {
    if (!this.path) return;
    const tmp = `${this.path}.tmp`;
    writeFileSync(tmp, JSON.stringify(Object.fromEntries(this.pins), null, 2) + '\n', { mode: 0o600 });
    chmodSync(tmp, 0o600);
    renameSync(tmp, this.path);
  }
}
