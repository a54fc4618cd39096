import { randomUUID } from 'node:crypto';

/**
 * Stamps a user message the gateway forwards to the engine with a `uuid` when its sender gave
 * none: the engine's handle on the prompt (its `command_lifecycle` frames, a withdrawal with
 * `cancel_async_message`, the result's `user_message_uuids`). Returns the uuid.
 *
 * The meeting point of issue #31's two halves: the queue needs the uuid; the approval half
 * adds the message's origin here (who sent it) when the branches merge. The queue stamps only
 * prompts it queues: a uuid makes the CLI write `command_lifecycle` frames, which a bare CLI fed
 * the client's own line would not (test/sdk-drop-in-fidelity.test.ts compares the two).
 */
export function stampUserMessage(line: Record<string, unknown>): string {
  if (typeof line.uuid !== 'string' || line.uuid === '') line.uuid = randomUUID();
  return line.uuid as string;
}
