/** What the set needs of an engine: a synchronous SIGKILL of its whole process group. */
export interface KillableEngine {
  kill(): void;
}

/**
 * The engines of one program whose process groups may still be alive, so the program can
 * kill them all synchronously as it exits. A value the composition root (bin/) builds and
 * hands to the agent, which hands it to each engine it spawns: engines add themselves when
 * they start and leave when their leader exits.
 */
export class EngineSet {
  /** A new set whose engines are killed when the process exits (what a program's entry point wants). */
  static killedOnExit(): EngineSet {
    const set = new EngineSet();
    set.killOnExit();
    return set;
  }

  private readonly live = new Set<KillableEngine>();
  private exitHook: (() => void) | undefined;

  /** Tracks an engine that has started. */
  add(engine: KillableEngine): void {
    this.live.add(engine);
  }

  /** Stops tracking an engine whose leader has exited. */
  delete(engine: KillableEngine): void {
    this.live.delete(engine);
  }

  /** How many engines may still be alive. */
  get size(): number {
    return this.live.size;
  }

  /** Kills (SIGKILL) the process group of every engine that has not exited yet, synchronously. */
  killAll(): void {
    for (const engine of [...this.live]) engine.kill();
  }

  /**
   * Runs killAll() on the process's 'exit' event (once per set, however often called). Note:
   * 'exit' does not run when the process dies of an unhandled signal, so SIGTERM/SIGINT
   * handlers must stop engines themselves. Returns a function that removes the hook.
   */
  killOnExit(): () => void {
    if (!this.exitHook) {
      this.exitHook = () => this.killAll();
      process.on('exit', this.exitHook);
    }
    return () => {
      if (this.exitHook) process.off('exit', this.exitHook);
      this.exitHook = undefined;
    };
  }
}
