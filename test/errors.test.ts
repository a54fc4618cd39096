import { describe, expect, it } from 'vitest';
import { ERROR_CODES, ERROR_TABLE, TetherError, codeFromGrpc, codeFromWsClose } from '../core/errors.js';

describe('error table', () => {
  it('has one row per canonical code and never reuses a number', () => {
    expect(Object.keys(ERROR_TABLE).sort()).toEqual([...ERROR_CODES].sort());
    for (const field of ['grpc', 'wsClose', 'jsonRpc'] as const) {
      const values = ERROR_CODES.map((c) => ERROR_TABLE[c][field]);
      expect(new Set(values).size).toBe(values.length);
    }
    for (const c of ERROR_CODES) {
      expect(ERROR_TABLE[c].wsClose).toBeGreaterThanOrEqual(4000);
      expect(ERROR_TABLE[c].wsClose).toBeLessThanOrEqual(4999);
    }
  });

  it('round-trips every code through JSON-RPC, WebSocket close codes and gRPC statuses', () => {
    for (const c of ERROR_CODES) {
      const e = new TetherError(c, 'msg', { extra: 1 });
      const back = TetherError.fromJsonRpc(JSON.parse(JSON.stringify(e.toJsonRpc())));
      expect(back.code).toBe(c);
      expect(back.details).toEqual({ extra: 1 });
      expect(codeFromWsClose(ERROR_TABLE[c].wsClose)).toBe(c);
      expect(codeFromGrpc(ERROR_TABLE[c].grpc)).toBe(c);
    }
  });

  it('never puts a stack on the wire', () => {
    const wire = JSON.stringify(new TetherError('INTERNAL', 'boom').toJsonRpc());
    expect(wire).not.toContain('at ');
    expect(wire).not.toContain('.ts:');
  });
});
