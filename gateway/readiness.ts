/** One readiness check: undefined while fine, else a short reason an operator can act on. */
export interface ReadinessCheck {
  readonly name: string;
  check(): string | undefined;
}

/** What /readyz answers (and what the gRPC health service turns into SERVING / NOT_SERVING). */
export interface ReadinessReport {
  ready: boolean;
  /** Check name → "ok" or why it failed. */
  checks: Record<string, string>;
  /** Names of the failed checks, in check order. */
  failed: string[];
}

/**
 * Runs every check now (they are cheap and synchronous) and reports them all, not just the
 * first failure. A check that throws counts as failed with its message.
 */
export function evaluateReadiness(checks: readonly ReadinessCheck[]): ReadinessReport {
  const report: ReadinessReport = { ready: true, checks: {}, failed: [] };
  for (const c of checks) {
    let why: string | undefined;
    try {
      why = c.check();
    } catch (err) {
      why = `check failed: ${(err as Error).message}`;
    }
    report.checks[c.name] = why ?? 'ok';
    if (why !== undefined) {
      report.ready = false;
      report.failed.push(c.name);
    }
  }
  return report;
}
