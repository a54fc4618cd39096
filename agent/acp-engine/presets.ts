import { TetherError } from '../../core/errors.js';

/**
 * The agents Tether runs over the Agent Client Protocol (docs/compatibility.md), each with the
 * command line that makes it speak ACP on stdio. `acp` takes its command from
 * `--engine-command`; a preset's first word is looked up on PATH like the Claude CLI.
 */
export const ACP_PRESETS = {
  opencode: ['opencode', 'acp'],
  gemini: ['gemini', '--experimental-acp'],
  codex: ['codex-acp'],
  'claude-acp': ['claude-code-acp'],
} as const satisfies Record<string, readonly string[]>;

export type AcpPreset = keyof typeof ACP_PRESETS;

/** Whether an engine kind is spoken to over ACP (the kind `acp` or a preset). */
export function isAcpKind(kind: string): boolean {
  return kind === 'acp' || Object.hasOwn(ACP_PRESETS, kind);
}

/**
 * Splits a command line into words: whitespace separates, single or double quotes group
 * (no escapes beyond that; a command needing more is a wrapper script's job). Throws
 * INVALID_ARGUMENT for an empty line or an unclosed quote.
 */
export function splitCommandLine(line: string): string[] {
  const words: string[] = [];
  let cur: string | undefined;
  let quote: string | undefined;
  for (const ch of line) {
    if (quote) {
      if (ch === quote) quote = undefined;
      else cur += ch;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      cur ??= '';
    } else if (/\s/.test(ch)) {
      if (cur !== undefined) words.push(cur);
      cur = undefined;
    } else cur = (cur ?? '') + ch;
  }
  if (quote) throw new TetherError('INVALID_ARGUMENT', `engine command ${JSON.stringify(line)} has an unclosed ${quote}`);
  if (cur !== undefined) words.push(cur);
  if (words.length === 0) throw new TetherError('INVALID_ARGUMENT', 'engine command is empty');
  return words;
}
