/** What an {@link EndOfTurn} calls: a channel's write of the frames it held this turn. */
export interface TurnEnd {
  /** Called once at the end of each turn it was listed in; must not throw (a channel closes itself on failure). */
  endTurn(): void;
}

/**
 * Calls `endTurn()` of everything listed during one turn of the event loop, at its end, with
 * one `process.nextTick` for all of them (at 1,000 viewers one tick, not 1,000). Channels that
 * hold a turn's frames to write them together (WebSocket corks its socket, gRPC batches) list
 * themselves here. A listener makes one and hands it to every channel it accepts; a channel
 * given none makes its own, so nothing of it is module state.
 */
export class EndOfTurn {
  private due: TurnEnd[] = [];

  /** Lists `item` for the end of this turn. Each item keeps its own flag so it is listed once per turn. */
  add(item: TurnEnd): void {
    if (this.due.push(item) === 1) process.nextTick(this.run);
  }

  private readonly run = (): void => {
    const due = this.due;
    this.due = []; // an item listed while these run waits for the end of the next turn
    for (const item of due) item.endTurn();
  };
}
