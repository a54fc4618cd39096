import { z } from 'zod';
import { ERROR_CODES, TetherError, asTetherError } from '../../core/errors.js';

/**
 * What gateways of one cluster say to each other over NATS (request-reply on
 * `tether.gw.<gateway id>.<verb>`). The principal travels as the door of the calling gateway
 * admitted it: gateways trust each other, so every message is sealed (fabric-mac.ts) and one
 * no gateway sealed is dropped before it is decoded.
 */
export const PrincipalWire = z.object({
  sub: z.string().max(256),
  kind: z.enum(['agent', 'client', 'any']),
  agentName: z.string().max(128).optional(),
  canCreate: z.boolean(),
  canControl: z.boolean(),
  canAdmin: z.boolean(),
  agents: z.array(z.string().max(128)).max(1000).optional(),
});

/** A client of the calling gateway: who, which connection, through which gateway. */
export const CallerWire = z.object({
  principal: PrincipalWire,
  client_id: z.string().min(1).max(64),
  transport: z.string().max(32),
  gateway: z.string().min(1).max(64),
});
export type CallerWire = z.infer<typeof CallerWire>;

export const CALL_METHODS = [
  'session.create',
  'session.attach',
  'session.detach',
  'session.send',
  'session.set_role',
  'session.set_owner',
  'session.move',
  'session.withdraw_rule',
  'session.withdraw_prompt',
  'session.rename',
  'session.follow',
  'session.stop',
  'session.audit',
  'session.folder',
  'session.info',
] as const;

/** `call`: one client request about a session (or a create), applied at the gateway that holds it. */
export const CallRequest = z.object({
  method: z.enum(CALL_METHODS),
  params: z.record(z.string(), z.unknown()),
  caller: CallerWire,
});
export type CallRequest = z.infer<typeof CallRequest>;

/** `reply`: the engine's answer to a client's own control request, to the gateway the client is on. */
export const ReplyNotice = z.object({ session_id: z.string(), client_id: z.string(), line: z.string() });

/** `release`: let go of a session whose agent moved to the asking gateway. */
export const ReleaseRequest = z.object({ session_id: z.string().min(1).max(128), to: z.string().max(64) });

/** `list`: this gateway's sessions and agents the principal may see. */
export const ListRequest = z.object({ principal: PrincipalWire });

/** Every answer: the result, or a typed error (code and message only, as on the client wire). */
export const Answer = z.union([
  z.object({ ok: z.unknown() }),
  z.object({ error: z.object({ code: z.enum(ERROR_CODES), message: z.string() }) }),
]);

export function encode(v: unknown): Uint8Array {
  return Buffer.from(JSON.stringify(v));
}

/** Parses a message body with `schema`; INVALID_ARGUMENT when it does not fit. */
export function decode<T>(schema: z.ZodType<T>, data: Uint8Array): T {
  try {
    return schema.parse(JSON.parse(Buffer.from(data).toString('utf8')));
  } catch (err) {
    throw new TetherError('INVALID_ARGUMENT', `bad message from another gateway: ${(err as Error).message.slice(0, 200)}`);
  }
}

/** Runs `work` and turns its outcome into an Answer body. */
export async function answer(work: () => unknown): Promise<Uint8Array> {
  try {
    return encode({ ok: (await work()) ?? {} });
  } catch (err) {
    const e = asTetherError(err);
    return encode({ error: { code: e.code, message: e.message } });
  }
}

/** The result of an Answer body, or its error thrown as a TetherError. */
export function unwrap<T>(data: Uint8Array): T {
  const a = decode(Answer, data);
  if ('error' in a) throw new TetherError(a.error.code, a.error.message);
  return a.ok as T;
}
