import { TetherError } from '../core/errors.js';
import { TurnApproval } from '../core/protocol/turn-approval.js';

/** `--turn-approval` of `tether chat` and `tether run`: the session option `turn_approval`. */
export const TURN_APPROVAL_OPTION = { 'turn-approval': { type: 'string' as const } };

/** Its line in a command's help (the flag column 27 wide, as connectionHelp's). */
export const TURN_APPROVAL_HELP = `  --turn-approval WHO      who approves tool calls in a turn another member's prompt started:
                           owner, approvers:NAME,group:NAME,... or anyController (default:
                           the policy's; a session may only ask for a stricter one)`;

/** The flag's value as a session option; throws INVALID_ARGUMENT naming the forms. */
export function turnApprovalOf(value: unknown): TurnApproval | undefined {
  if (value === undefined) return undefined;
  const text = String(value);
  const parsed = TurnApproval.safeParse(
    text.startsWith('approvers:') ? { approvers: text.slice('approvers:'.length).split(',').filter(Boolean) } : text,
  );
  if (!parsed.success)
    throw new TetherError(
      'INVALID_ARGUMENT',
      `--turn-approval must be owner, anyController or approvers:NAME[,NAME...] (not ${JSON.stringify(text.slice(0, 100))})`,
    );
  return parsed.data;
}
