import { Slabs } from '../../../core/wire/slabs.js';

export type { SlabView } from '../../../core/wire/slabs.js';

/**
 * Where the replay log keeps its large frames: copied into slabs (core/wire/slabs.ts) that are
 * reused as the log turns over. The log keeps a session's newest frames (8 MiB), long enough
 * for V8 to move them to its old generation; at 100 KB frames their garbage once cost a quarter
 * to nearly half of the gateway's time in full mark-compacts.
 *
 * Views are released as the log evicts them. A view must not be handed to anything that may
 * outlive its release (a socket's send queue): hand out a copy ({@link ReplaySlabs.copyOut}).
 */
export class ReplaySlabs extends Slabs {
  /** A copy of a kept view that may go anywhere (a replay to a client). */
  static copyOut(bytes: Buffer): Buffer {
    return Buffer.from(bytes);
  }
}
