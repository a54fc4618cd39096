import { TetherError } from '../errors.js';

/**
 * Largest engine input line, serialized (16 MiB, like the engine's own stdout lines). Larger
 * lines are refused before the gateway keeps anything of them.
 */
export const MAX_INPUT_LINE_BYTES = 16 * 1024 * 1024;

/**
 * Deepest nesting of objects and arrays in an input line (the line itself is depth 1). Real
 * engine lines nest a handful of levels (tool inputs a few more); deep nesting only serves to
 * exhaust a recursive serializer's stack somewhere downstream.
 */
export const MAX_INPUT_DEPTH = 64;

/**
 * Checks one line meant for the engine's stdin, the same way at the gateway (before it is
 * stored, queued or acknowledged) and at the agent (before it is written): a plain JSON
 * object with a string `type`, nested at most {@link MAX_INPUT_DEPTH} deep, serializing to
 * at most `maxBytes` bytes of UTF-8. Returns the serialized line; throws INVALID_ARGUMENT
 * saying which rule failed. Never recurses, so a hostile line cannot exhaust the stack here.
 */
export function checkEngineInput(line: unknown, maxBytes = MAX_INPUT_LINE_BYTES): string {
  if (typeof line !== 'object' || line === null || Array.isArray(line))
    throw new TetherError('INVALID_ARGUMENT', 'an engine input line must be a JSON object');
  if (typeof (line as { type?: unknown }).type !== 'string')
    throw new TetherError('INVALID_ARGUMENT', 'an engine input line needs a string "type"');
  const depth = nestingOver(line, MAX_INPUT_DEPTH);
  if (depth !== undefined)
    throw new TetherError('INVALID_ARGUMENT', `input line nested deeper than ${MAX_INPUT_DEPTH} levels`, { limit: MAX_INPUT_DEPTH });
  let text: string;
  try {
    text = JSON.stringify(line);
  } catch (err) {
    throw new TetherError('INVALID_ARGUMENT', `input line cannot be serialized: ${(err as Error).message}`);
  }
  const size = text.length * 3 <= maxBytes ? text.length : Buffer.byteLength(text);
  if (size > maxBytes)
    throw new TetherError('INVALID_ARGUMENT', `input line of ${size} bytes is over the limit of ${maxBytes} bytes`, {
      size,
      limit: maxBytes,
    });
  return text;
}

/** The first depth past `max` found in `value` (an explicit stack, no recursion), or undefined. */
function nestingOver(value: object, max: number): number | undefined {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (depth > max) return depth;
    const children = Array.isArray(v) ? v : Object.values(v as Record<string, unknown>);
    for (const c of children) if (typeof c === 'object' && c !== null) stack.push([c, depth + 1]);
  }
  return undefined;
}
