import { asTetherError, type TetherError } from '../../core/errors.js';

/** What a synchronous call threw, as a TetherError; undefined when it returned. */
export function thrownBy(fn: () => unknown): TetherError | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    return asTetherError(err);
  }
}
