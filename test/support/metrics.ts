/**
 * Reads a gateway's /metrics over HTTP and parses the Prometheus text into
 * `name{labels}` → value (labels as written, in prom-client's order).
 */
export async function scrape(port: number): Promise<Map<string, number>> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  const out = new Map<string, number>();
  for (const line of (await res.text()).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/** Polls `read` until `ok` holds for its result (bounded); returns that result. */
export async function eventually<T>(read: () => Promise<T>, ok: (v: T) => boolean, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(v instanceof Map ? Object.fromEntries(v) : v)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
