/**
 * Which host key each agent identity registered with first (trust on first use, like ssh's
 * known_hosts): afterwards a hello for that identity must prove it holds the same key, so a
 * leaked agent token alone can neither register nor supersede the live agent. Kept in a JSON
 * file (0600) when given one, so pins survive restarts; an owner who moves an agent to a new
 * key removes its line.
 */
import { chmodSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { verifyHostKeyProof } from '../../core/auth/host-key.js';
import { TetherError } from '../../core/errors.js';
import type { HostKeyProof } from '../../core/protocol/methods.js';

/** Pins kept beyond this gateway (a cluster's store): the first claim of an identity wins everywhere. */
export interface SharedPins {
  /** The fingerprint pinned for `identity`, if any. */
  pinOf(identity: string): Promise<string | undefined>;
  /** Pins `fingerprint` unless one is pinned already; returns the pin in force. */
  claim(identity: string, fingerprint: string): Promise<string>;
}

export class HostKeyPins {
  /** Fingerprint by identity (`<token sub>/<agent name>`). */
  private readonly pins = new Map<string, string>();
  /** In a cluster: the pins every gateway checks (the file's pins are carried over to it). */
  private shared: SharedPins | undefined;

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
      for (const [identity, fingerprint] of Object.entries(JSON.parse(text) as Record<string, unknown>))
        if (typeof fingerprint === 'string') this.pins.set(identity, fingerprint);
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
    refuseUnless(agentName, pinned, fingerprint);
    if (fingerprint && pinned === undefined) {
      this.pins.set(identity, fingerprint);
      this.save();
    }
    return fingerprint;
  }

  /** From now on the pins of `shared` (a cluster's) decide; this gateway's file pins are claimed there. */
  share(shared: SharedPins): void {
    this.shared = shared;
  }

  /**
   * {@link check}, or in a cluster the same against the cluster's pins (read at each hello,
   * so a pin made through another gateway holds here at once). UNAVAILABLE when the
   * cluster's store cannot be read and this gateway never saw the identity's pin.
   */
  async admit(sub: string, agentName: string, proof: HostKeyProof | undefined, now = Date.now()): Promise<string | undefined> {
    if (!this.shared) return this.check(sub, agentName, proof, now);
    const identity = `${sub}/${agentName}`;
    const fingerprint = proof && verifyHostKeyProof(proof, agentName, now);
    let pinned = await this.shared.pinOf(identity);
    const local = this.pins.get(identity);
    if (pinned === undefined && local !== undefined) pinned = await this.shared.claim(identity, local);
    if (pinned === undefined && fingerprint) pinned = await this.shared.claim(identity, fingerprint);
    refuseUnless(agentName, pinned, fingerprint);
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

/** PERMISSION_DENIED when an identity has a pin and the hello does not prove that key. */
function refuseUnless(agentName: string, pinned: string | undefined, fingerprint: string | undefined): void {
  if (pinned !== undefined && fingerprint !== pinned) {
    throw new TetherError(
      'PERMISSION_DENIED',
      `agent "${agentName}" is bound to host key ${pinned}; this hello ${fingerprint ? `proves ${fingerprint}` : 'has no host key'}`,
    );
  }
}
