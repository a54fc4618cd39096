import { TetherError } from '../errors.js';

/**
 * Tether's gateway protocol version. Majors must match; minors add optional things only.
 * 2.0: engine lines travel from the agent as binary frames (`session.output`), never as JSON text.
 */
export const PROTOCOL_VERSION = '2.0';

/** Throws FAILED_PRECONDITION naming both versions when the majors differ. */
export function assertCompatible(peerVersion: string, ours: string = PROTOCOL_VERSION): void {
  const major = (v: string) => v.split('.')[0];
  if (major(peerVersion) !== major(ours)) {
    throw new TetherError(
      'FAILED_PRECONDITION',
      `incompatible protocol version: peer speaks ${peerVersion}, this side speaks ${ours} (major versions must match)`,
      { peer_version: peerVersion, our_version: ours },
    );
  }
}

/**
 * Optional behaviours a peer offers in its `hello` (`capabilities`); one is used only when
 * both sides list it (docs/protocol.md, "Capabilities").
 */
export const CAPABILITIES = {
  /** Client and gateway: prompts as the `session.post` notification, answered by their echo. */
  sessionPost: 'session.post.v1',
  /**
   * Agent and gateway: each folds its cumulative acks into a message it sends anyway: the
   * agent's input acks into its output (`input_ack`), the gateway's output acks into `agent.input` (`ack`).
   */
  foldedAcks: 'acks.folded.v1',
  /**
   * Client and gateway: an attach's replay comes several `session.frame`s to a text message,
   * joined by newlines (a late joiner's 10,000 frames in a few dozen messages, not 10,000).
   */
  joinedReplay: 'replay.joined.v1',
} as const;
