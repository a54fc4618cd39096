/** How long changes are gathered before watchers are told once (a streaming turn changes a listing many times). */
export const FLEET_CHANGE_COALESCE_MS = 100;

/**
 * Tells watchers (clients after `fleet.watch`) that agents, sessions or what waits for someone
 * changed: here (the directory's sessions and agents) or on another gateway of the cluster
 * (which the cluster hands in). Coalesced: however many changes come within
 * FLEET_CHANGE_COALESCE_MS, each watcher is told once, and the cluster once for this
 * gateway's own. Carries no data, so nobody learns of a session they may not see.
 */
export class FleetFeed {
  private readonly watchers = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;
  private localChange = false;
  /** Tells the other gateways of the cluster that something changed here (set by the cluster). */
  announce: (() => void) | undefined;

  /** Calls `tell` after each coalesced change until the returned function is called (idempotent). */
  watch(tell: () => void): () => void {
    const w = () => tell();
    this.watchers.add(w);
    return () => this.watchers.delete(w);
  }

  /** Something this gateway holds changed. */
  changed(): void {
    this.localChange = true;
    this.schedule();
  }

  /** Another gateway of the cluster said something it holds changed. */
  changedElsewhere(): void {
    this.schedule();
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.localChange) this.announce?.();
      this.localChange = false;
      for (const w of this.watchers) w();
    }, FLEET_CHANGE_COALESCE_MS);
    this.timer.unref();
  }
}
