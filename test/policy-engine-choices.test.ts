import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { engineChoices } from '../core/engine-choices.js';
import { MODE_ORDER, Policy } from '../core/policy/policy.js';
import { checkControlRequest, checkSessionOptions } from '../gateway/policy/policy-gate.js';
import { thrownBy } from './support/thrown.js';

/**
 * The gateway judges the mode and model an engine will really run with: every use of
 * --permission-mode / --model / --fallback-model in the argv the agent builds, read as the
 * CLI reads it (issue 27, item 3).
 */

const policy = Policy.compile({ maxPermissionMode: { '*': 'default' }, models: ['claude-ok'] });
const asker = { canCreate: true, canControl: true, canAdmin: false };
const refusal = (extra_args: string[], more = {}) => thrownBy(() => checkSessionOptions(policy, 'a', { extra_args, ...more }, asker));

describe('session options are judged as the CLI reads the argv', () => {
  it('a second --permission-mode (the CLI keeps the last) above the ceiling is refused, in either spelling', () => {
    expect(refusal(['--permission-mode', 'default', '--permission-mode', 'bypassPermissions'])?.code).toBe('PERMISSION_DENIED');
    expect(refusal(['--permission-mode=default', '--permission-mode=acceptEdits'])?.message).toContain('maxPermissionMode.* = default');
    expect(refusal(['--permission-mode', 'acceptEdits'], { permission_mode: 'default' })?.code).toBe('PERMISSION_DENIED'); // extra_args come after the option
    expect(refusal(['--permission-mode', 'default'], { permission_mode: 'plan' })).toBeUndefined();
  });

  it("a --permission-mode that is another flag's value is that value; the real use after it is judged", () => {
    // --system-prompt takes "--permission-mode" as its value; the CLI then reads the second as the mode.
    const args = ['--system-prompt', '--permission-mode', '--permission-mode', 'bypassPermissions'];
    expect(engineChoices({ extra_args: args }).modes).toEqual(['bypassPermissions']);
    expect(refusal(args)?.code).toBe('PERMISSION_DENIED');
    // The other way round: a mode named only inside another flag's value is no mode at all.
    expect(engineChoices({ extra_args: ['--append-system-prompt', '--permission-mode=bypassPermissions'] }).modes).toEqual([]);
    expect(refusal(['--append-system-prompt', '--dangerously-skip-permissions'])).toBeUndefined();
  });

  it('an unknown mode name is INVALID_ARGUMENT wherever a mode is judged, with or without a ceiling', () => {
    for (const p of [policy, Policy.EMPTY]) {
      expect(thrownBy(() => checkSessionOptions(p, 'a', { extra_args: ['--permission-mode', 'yolo'] }, asker))?.code).toBe(
        'INVALID_ARGUMENT',
      );
      expect(thrownBy(() => checkControlRequest(p, { subtype: 'set_permission_mode', mode: 'yolo' }, asker))?.message).toContain(
        '"yolo" is not a permission mode',
      );
      expect(thrownBy(() => checkControlRequest(p, { subtype: 'set_permission_mode', mode: 7 }, asker))?.code).toBe('INVALID_ARGUMENT');
      expect(
        thrownBy(() => checkControlRequest(p, { subtype: 'update_settings', settings: { permissions: { defaultMode: 'BYPASS' } } }, asker))
          ?.code,
      ).toBe('INVALID_ARGUMENT');
    }
  });

  it('a second --model or --fallback-model off the list is refused; a model named anywhere keeps the policy default out', () => {
    expect(refusal(['--model', 'claude-ok', '--model', 'claude-other'])?.message).toContain('"claude-other"');
    expect(refusal(['--model=claude-other'], { model: 'claude-ok' })?.code).toBe('PERMISSION_DENIED');
    expect(refusal(['--fallback-model', 'claude-ok', '--fallback-model=claude-other'])?.code).toBe('PERMISSION_DENIED');
    expect(refusal(['--model', 'claude-ok', '--model', 'claude-ok'])).toBeUndefined();
    expect(checkSessionOptions(policy, 'a', { extra_args: ['--model=claude-ok'] }, asker).model).toBeUndefined();
  });

  it('a session that names no mode under a ceiling below default starts at the ceiling, not in default', () => {
    const low = Policy.compile({ maxPermissionMode: { '*': 'plan', admin: 'acceptEdits' } });
    expect(checkSessionOptions(low, 'a', {}, asker).permission_mode).toBe('plan');
    expect(checkSessionOptions(low, 'a', { extra_args: ['--permission-mode=plan'] }, asker).permission_mode).toBeUndefined();
    expect(checkSessionOptions(low, 'a', {}, { ...asker, canAdmin: true }).permission_mode).toBeUndefined(); // default is within acceptEdits
    expect(checkSessionOptions(Policy.EMPTY, 'a', {}, asker).permission_mode).toBeUndefined();
  });

  it('inline --settings JSON that sets the mode or the model is judged like update_settings', () => {
    expect(refusal(['--settings', JSON.stringify({ permissions: { defaultMode: 'bypassPermissions' } })])?.code).toBe('PERMISSION_DENIED');
    expect(refusal(['--settings', JSON.stringify({ model: 'claude-other' })])?.code).toBe('PERMISSION_DENIED');
    expect(refusal(['--settings', JSON.stringify({ model: 'claude-ok' })])).toBeUndefined();
  });

  it('property: any argv of mode uses is refused exactly when some use is above the ceiling or not a mode', () => {
    const mode = fc.oneof(fc.constantFrom(...MODE_ORDER), fc.constantFrom('yolo', '', '--model'));
    const use = fc.record({
      mode,
      glued: fc.boolean(),
      noise: fc.constantFrom([], ['--verbose'], ['--model', 'claude-ok'], ['--system-prompt', '--permission-mode']),
    });
    fc.assert(
      fc.property(fc.array(use, { maxLength: 6 }), (uses) => {
        const args = uses.flatMap((u) => [...u.noise, ...(u.glued ? [`--permission-mode=${u.mode}`] : ['--permission-mode', u.mode])]);
        const modes = engineChoices({ extra_args: args }).modes;
        expect(modes).toEqual(uses.map((u) => u.mode));
        const err = refusal(args);
        // The first use that is not a mode or is above the ceiling decides the code.
        const first = modes.map((m) => MODE_ORDER.indexOf(m as never)).find((i) => i < 0 || i > MODE_ORDER.indexOf('default'));
        expect(err?.code).toBe(first === undefined ? undefined : first < 0 ? 'INVALID_ARGUMENT' : 'PERMISSION_DENIED');
      }),
      { numRuns: 300 },
    );
  });
});
