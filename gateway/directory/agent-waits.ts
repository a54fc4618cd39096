import { TetherError } from '../../core/errors.js';
import type { AgentDescriptor } from '../../core/protocol/methods.js';
import { AGENT_WAIT_MS } from '../../core/timeouts.js';
import type { AgentLink } from './agent-link.js';

/** How long a create or stop waits for an agent whose link dropped, unless agentWaitMs says otherwise. */
export const DEFAULT_AGENT_WAIT_MS = AGENT_WAIT_MS;
/** Lost agents remembered at once (the oldest is forgotten first). */
const MAX_LOST_AGENTS = 10_000;

/** What the gateway remembers of an agent whose link dropped. */
export interface LostAgent {
  /** Its last hello: what it can run. */
  descriptor: AgentDescriptor;
}

/**
 * Which agents the gateway is waiting for (their link dropped less than the agent-lost grace
 * ago), and a bounded wait for one of them
 * to come back. The directory reports every agent up and down here.
 */
export class AgentWaits {
  private readonly lost = new Map<string, { descriptor: AgentDescriptor; until: number }>();
  private readonly waiters = new Set<{ name: string; wake: (link: AgentLink) => void; fail: (e: TetherError) => void }>();

  constructor(
    /** The connected agent of that name (the directory's). */
    private readonly agentNamed: (name: string) => AgentLink | undefined,
    /** How long after its link dropped an agent still counts as awaited (the agent-lost grace). */
    private readonly graceMs: number,
  ) {}

  /** An agent registered: it is no longer lost, and everyone waiting for it gets its link. */
  up(link: AgentLink): void {
    this.lost.delete(link.name);
    for (const w of [...this.waiters]) {
      if (w.name !== link.name) continue;
      this.waiters.delete(w);
      w.wake(link);
    }
  }

  /** An agent's link dropped: remember it for the grace period. */
  down(link: AgentLink): void {
    this.lost.delete(link.name);
    this.lost.set(link.name, { descriptor: link.descriptor, until: Date.now() + this.graceMs });
    if (this.lost.size > MAX_LOST_AGENTS) this.lost.delete(this.lost.keys().next().value as string);
  }

  /** The agent if the gateway is waiting for it to come back; undefined if it is simply unknown. */
  awaited(name: string): LostAgent | undefined {
    const l = this.lost.get(name);
    if (l && l.until > Date.now()) return { descriptor: l.descriptor };
    if (l) this.lost.delete(name);
    return undefined;
  }

  /**
   * The agent's live link: now if connected, else once it registers again. Rejects with
   * UNAVAILABLE at `deadline` (epoch ms).
   */
  linkOf(name: string, deadline: number): Promise<AgentLink> {
    const now = this.agentNamed(name);
    if (now && !now.peer.channel.isClosed) return Promise.resolve(now);
    const waitedMs = Math.max(0, deadline - Date.now());
    return new Promise((resolve, reject) => {
      const settle = (result: AgentLink | TetherError) => {
        clearTimeout(timer);
        this.waiters.delete(waiter);
        if (result instanceof TetherError) reject(result);
        else resolve(result);
      };
      const waiter = { name, wake: (link: AgentLink) => settle(link), fail: (e: TetherError) => settle(e) };
      const timer = setTimeout(
        () => settle(new TetherError('UNAVAILABLE', `agent "${name}" did not come back within ${waitedMs} ms`)),
        waitedMs,
      );
      timer.unref();
      this.waiters.add(waiter);
    });
  }

  /** How many waits for this agent are pending (creates and stops that wait for it). */
  waiting(name: string): number {
    return [...this.waiters].filter((w) => w.name === name).length;
  }

  /** Rejects every wait (gateway shutting down). */
  dispose(): void {
    for (const w of [...this.waiters]) w.fail(new TetherError('UNAVAILABLE', 'gateway shutting down'));
    this.lost.clear();
  }
}
