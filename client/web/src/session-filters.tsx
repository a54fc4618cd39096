/** Search (title, agent, owner) and filters (agent, owner, state) over the dashboard's lists. */
import type { SessionInfo } from './session';
import { stateLabel } from './wording';

export interface Filter {
  /** Words to find in the title, agent or owner (any case). */
  text: string;
  agent: string;
  owner: string;
  state: string;
}

/** What a filter reads of a session or a "needs you" item. */
interface Listed {
  agent: string;
  owner: string;
  owner_name?: string;
  title?: string;
  state?: string;
}

/** Whether `x` passes `f`: every word of the search in its title, agent or owner, and each filter set matching. */
export function matches(f: Filter, x: Listed): boolean {
  if (f.agent && x.agent !== f.agent) return false;
  if (f.owner && x.owner !== f.owner) return false;
  if (f.state && x.state !== undefined && x.state !== f.state) return false;
  const hay = [x.title ?? '', x.agent, x.owner, x.owner_name ?? ''].join('\n').toLowerCase();
  return f.text
    .toLowerCase()
    .split(/\s+/)
    .every((w) => hay.includes(w));
}

/** One filter: a label and a select of `values` (each shown as `label(v)`), "any" first. */
function Choice(props: {
  name: keyof Filter;
  label: string;
  values: string[];
  show: (v: string) => string;
  filter: Filter;
  set: (e: Event) => void;
}) {
  return (
    <label>
      {props.label}
      <select name={`filter-${props.name}`} value={props.filter[props.name]} onChange={props.set}>
        <option value="">any</option>
        {[...new Set(props.values)].sort().map((v) => (
          <option key={v} value={v}>
            {props.show(v)}
          </option>
        ))}
      </select>
    </label>
  );
}

export function SessionFilters(props: { sessions: SessionInfo[]; filter: Filter; onChange: (f: Filter) => void }) {
  const f = props.filter;
  const set = (k: keyof Filter) => (e: Event) => props.onChange({ ...f, [k]: (e.target as HTMLInputElement | HTMLSelectElement).value });
  const names = new Map(props.sessions.map((s) => [s.owner, s.owner_name ?? s.owner]));
  return (
    <search>
      <form class="filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          Search
          <input type="search" name="search" value={f.text} placeholder="title, agent or owner" onInput={set('text')} />
        </label>
        <Choice name="agent" label="Agent" values={props.sessions.map((s) => s.agent)} show={(a) => a} filter={f} set={set('agent')} />
        <Choice name="owner" label="Owner" values={[...names.keys()]} show={(o) => names.get(o) ?? o} filter={f} set={set('owner')} />
        <Choice name="state" label="State" values={props.sessions.map((s) => s.state)} show={stateLabel} filter={f} set={set('state')} />
      </form>
    </search>
  );
}
