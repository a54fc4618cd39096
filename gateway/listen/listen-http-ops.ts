import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GatewayMetrics } from '../metrics.js';
import type { ReadinessReport } from '../readiness.js';

/** Liveness: 200 while the process serves HTTP at all. */
export const HEALTHZ_PATH = '/healthz';
/** Readiness: 200 when every check passes, else 503 naming the failed ones. */
export const READYZ_PATH = '/readyz';
/** Prometheus text exposition of the gateway's metrics. */
export const METRICS_PATH = '/metrics';

/** What the operations endpoints read. */
export interface OpsEndpoints {
  readiness(): ReadinessReport;
  /** Absent: /metrics answers 404 (metrics turned off). */
  metrics?: GatewayMetrics;
}

/**
 * Serves the operator endpoints on the gateway's HTTP port; returns false for any other path.
 * GET or HEAD only (405 otherwise); never cached; no authentication (they expose counts and
 * states, never session content, tokens or names of principals).
 *
 * - `/healthz` → 200 `{"status":"ok"}`.
 * - `/readyz` → 200 `{"status":"ready","checks":{"listening":"ok","store":"ok","policy":"ok"}}`,
 *   or 503 `{"status":"not_ready","failed":["store"],"checks":{…,"store":"session store (file) is not open",…}}`.
 * - `/metrics` → 200 in Prometheus text format (`text/plain; version=0.0.4`).
 */
export function handleOpsRequest(ops: OpsEndpoints, req: IncomingMessage, res: ServerResponse): boolean {
  const path = (req.url ?? '/').split('?')[0];
  if (path !== HEALTHZ_PATH && path !== READYZ_PATH && path !== METRICS_PATH) return false;
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' }).end('use GET');
    return true;
  }
  const json = (code: number, body: unknown) =>
    res.writeHead(code, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));
  if (path === HEALTHZ_PATH) {
    json(200, { status: 'ok' });
  } else if (path === READYZ_PATH) {
    const r = ops.readiness();
    json(
      r.ready ? 200 : 503,
      r.ready ? { status: 'ready', checks: r.checks } : { status: 'not_ready', failed: r.failed, checks: r.checks },
    );
  } else if (!ops.metrics) {
    json(404, { error: 'metrics are turned off on this gateway' });
  } else {
    ops.metrics.render().then(
      ({ contentType, body }) => res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-store' }).end(body),
      (err: Error) => json(500, { error: `metrics failed: ${err.message}` }),
    );
  }
  return true;
}
