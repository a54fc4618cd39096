import type { ErrorCode } from '../core/errors.js';

/**
 * The HTTP status an HTTP answer of the gateway (a refused WebSocket upgrade, the ticket
 * endpoint) uses for a canonical code. The dialer maps 401/403/429 back (core/link/dial-ws.ts).
 */
export function httpStatusOf(code: ErrorCode): number {
  switch (code) {
    case 'UNAUTHENTICATED':
      return 401;
    case 'PERMISSION_DENIED':
      return 403;
    case 'NOT_FOUND':
      return 404;
    case 'RESOURCE_EXHAUSTED':
      return 429;
    case 'INVALID_ARGUMENT':
    case 'FAILED_PRECONDITION':
      return 400;
    case 'UNAVAILABLE':
      return 503;
    default:
      return 500;
  }
}
