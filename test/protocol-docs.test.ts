import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { TetherEvent } from '../core/protocol/events.js';
import { BinaryNotifications, Methods, Notifications } from '../core/protocol/methods.js';

const doc = readFileSync(new URL('../docs/protocol.md', import.meta.url), 'utf8');

describe('docs/protocol.md', () => {
  it('documents every method, notification and event subtype defined in core/protocol', () => {
    const names = [...Object.keys(Methods), ...Object.keys(Notifications), ...Object.keys(BinaryNotifications)];
    expect(names.filter((n) => !doc.includes(`\`${n}\``))).toEqual([]);
    const subtypes = TetherEvent.options.map((o) => o.shape.subtype.value);
    expect(subtypes.filter((s) => !doc.includes(`\`${s}\``))).toEqual([]);
  });
});
