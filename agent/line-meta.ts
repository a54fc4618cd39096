import type { LineMeta } from '../core/protocol/methods.js';

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/**
 * What the gateway needs to know about an engine line, read once here where the line is
 * parsed anyway, so routing never re-parses payloads.
 */
export function lineMeta(value: Record<string, unknown>): LineMeta {
  const meta: LineMeta = {};
  const type = str(value.type);
  if (type) meta.type = type.slice(0, 128);
  const request = value.request as Record<string, unknown> | undefined;
  const response = value.response as Record<string, unknown> | undefined;
  switch (type) {
    case 'control_request':
      meta.subtype = str(request?.subtype)?.slice(0, 128);
      meta.request_id = str(value.request_id)?.slice(0, 256);
      break;
    case 'control_response':
      meta.subtype = str(response?.subtype)?.slice(0, 128);
      meta.request_id = str(response?.request_id)?.slice(0, 256);
      break;
    case 'control_cancel_request':
      meta.request_id = str(value.request_id)?.slice(0, 256);
      break;
    case 'result':
      meta.subtype = str(value.subtype)?.slice(0, 128);
      if (typeof value.is_error === 'boolean') meta.is_error = value.is_error;
      break;
    case 'command_lifecycle':
      meta.command_uuid = str(value.command_uuid)?.slice(0, 256);
      meta.state = str(value.state)?.slice(0, 64);
      break;
    default:
      meta.subtype = str(value.subtype)?.slice(0, 128);
      if (type === 'system' && value.subtype === 'session_state_changed') meta.state = str(value.state)?.slice(0, 64);
      // The id `--resume` takes: the gateway keeps it so an agent restart can continue the transcript.
      if (type === 'system' && value.subtype === 'init') meta.engine_session_id = str(value.session_id)?.slice(0, 256);
  }
  return meta;
}
