/** The team's usage for admins: the gateway's usage ledger summed over a window, by person, agent or model. */
import { useEffect, useState } from 'preact/hooks';
import type { UsageGroupBy, UsageResult } from '../../../core/protocol/usage';
import type { Connection } from './connection';
import { costLabel } from './session-meter';

const WINDOW_DAYS = 30;
const GROUPS: UsageGroupBy[] = ['principal', 'agent', 'model', 'session'];

/**
 * Shown only to a token that sees every turn (`scope: all`, the admin scope): anyone else's
 * own usage is in each session's header. Read again when the gateway says the fleet changed
 * (a turn ending changes its session; the dashboard watches the fleet), never on a timer.
 */
export function TeamUsage(props: { conn: Connection }) {
  const [by, setBy] = useState<UsageGroupBy>('principal');
  const [found, setFound] = useState<UsageResult | undefined>();
  useEffect(() => {
    let stop = false;
    const load = () =>
      props.conn.request<UsageResult>('usage.read', { by, since_ms: Date.now() - WINDOW_DAYS * 86_400_000 }).then(
        (r) => !stop && setFound(r),
        () => {}, // the banner says when the link is down; the next change reads again
      );
    void load();
    const off = props.conn.onNotification((method) => method === 'fleet.changed' && void load());
    return () => {
      stop = true;
      off();
    };
  }, [by]);
  if (found?.scope !== 'all') return null;
  const tokens = (r: UsageResult['total']) => r.input_tokens + r.output_tokens + r.cache_read_input_tokens + r.cache_creation_input_tokens;
  return (
    <section aria-labelledby="team-usage-h" data-testid="team-usage">
      <h2 id="team-usage-h">Team usage, last {WINDOW_DAYS} days</h2>
      <label>
        By{' '}
        <select value={by} onChange={(e) => setBy((e.target as HTMLSelectElement).value as UsageGroupBy)} name="usage-by">
          {GROUPS.map((g) => (
            <option key={g} value={g}>
              {g}
            </option>
          ))}
        </select>
      </label>
      <table class="usage">
        <thead>
          <tr>
            <th>{by}</th>
            <th>turns</th>
            <th>tokens</th>
            <th>cost</th>
          </tr>
        </thead>
        <tbody>
          {[...found.rows, { key: 'total', ...found.total }].map((r) => (
            <tr key={r.key}>
              <td>{r.key}</td>
              <td>{r.turns}</td>
              <td>{tokens(r)}</td>
              <td>{costLabel(r.cost_usd)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
