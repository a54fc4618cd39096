/**
 * The raw relay's and agent's --duties check of an engine input line's nesting, walked as
 * core/protocol/engine-input.ts walks it (an explicit stack, no recursion).
 */
export function nestedOver(value, max) {
  const stack = [[value, 1]];
  while (stack.length) {
    const [v, depth] = stack.pop();
    if (depth > max) return true;
    for (const c of Array.isArray(v) ? v : Object.values(v)) if (typeof c === 'object' && c !== null) stack.push([c, depth + 1]);
  }
  return false;
}
