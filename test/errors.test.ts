import { describe, expect, it } from 'vitest';
import { ERROR_CODES, ERROR_TABLE, TetherError, codeFromGrpc, codeFromHttpRefusal, codeFromWsClose, httpStatusOf } from '../core/errors.js';

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

  it('keeps every wire number: gRPC status, WebSocket close, JSON-RPC code, HTTP status, retryable', () => {
    const row = (c: (typeof ERROR_CODES)[number]) =>
      [c, ERROR_TABLE[c].grpc, ERROR_TABLE[c].wsClose, ERROR_TABLE[c].jsonRpc, ERROR_TABLE[c].http, ERROR_TABLE[c].retryable].join(' ');
    expect(ERROR_CODES.map(row).join(', ')).toBe(
      'CANCELLED 1 4001 -32001 500 true, INVALID_ARGUMENT 3 4003 -32602 400 false, DEADLINE_EXCEEDED 4 4004 -32004 500 true, NOT_FOUND 5 4005 -32005 404 false, ALREADY_EXISTS 6 4006 -32006 500 false, PERMISSION_DENIED 7 4403 -32007 403 false, RESOURCE_EXHAUSTED 8 4008 -32008 429 true, FAILED_PRECONDITION 9 4009 -32009 400 false, ABORTED 10 4010 -32010 500 true, UNIMPLEMENTED 12 4012 -32601 500 false, INTERNAL 13 4013 -32603 500 false, UNAVAILABLE 14 4014 -32014 503 true, UNAUTHENTICATED 16 4401 -32016 401 false',
    );
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

  it("holds the HTTP status of every code, and a dialer reads back exactly the door's refusals from it", () => {
    for (const c of ERROR_CODES) expect(httpStatusOf(c)).toBe(ERROR_TABLE[c].http);
    // What the gateway answers a refused upgrade, the ticket and the login endpoint with.
    expect(
      [
        'UNAUTHENTICATED',
        'PERMISSION_DENIED',
        'NOT_FOUND',
        'RESOURCE_EXHAUSTED',
        'INVALID_ARGUMENT',
        'FAILED_PRECONDITION',
        'UNAVAILABLE',
        'INTERNAL',
      ].map((c) => httpStatusOf(c as never)),
    ).toEqual([401, 403, 404, 429, 400, 400, 503, 500]);
    for (const c of ['UNAUTHENTICATED', 'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'INVALID_ARGUMENT'] as const)
      expect(codeFromHttpRefusal(httpStatusOf(c))).toBe(c);
    expect(codeFromHttpRefusal(431)).toBe('INVALID_ARGUMENT'); // Node's own answer to oversized headers
    // A proxy's 404 or 5xx, or a gateway still starting: retryable, never a permanent refusal.
    for (const status of [404, 500, 502, 503, 504]) {
      expect(codeFromHttpRefusal(status)).toBe('UNAVAILABLE');
      expect(new TetherError(codeFromHttpRefusal(status), 'x').retryable).toBe(true);
    }
  });

  it('never puts a stack on the wire', () => {
    const wire = JSON.stringify(new TetherError('INTERNAL', 'boom').toJsonRpc());
    expect(wire).not.toContain('at ');
    expect(wire).not.toContain('.ts:');
  });
});
