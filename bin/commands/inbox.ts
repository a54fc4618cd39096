import type { InboxItem } from '../../core/protocol/inbox.js';
import type { Command } from '../args.js';
import { connectFrom } from '../connection-flags.js';
import { LIST_OPTIONS, listUsage, writeList } from './list.js';

const HEAD = ['SINCE', 'WHAT', 'SESSION', 'TITLE', 'AGENT', 'OWNER', 'TOOL'];
const WHAT: Record<InboxItem['kind'], string> = {
  permission: 'permission',
  question: 'question',
  ended: 'ended',
  agent_lost: 'agent lost',
};

function row(i: InboxItem): string[] {
  return [i.at, WHAT[i.kind], i.session_id, i.title ?? '-', i.agent, i.owner_name ?? i.owner, i.tool ?? '-'];
}

export const inboxCommand: Command = {
  name: 'inbox',
  summary: 'what waits for you across the fleet: prompts you may answer, your sessions that ended or lost their agent',
  usage: listUsage('inbox', 'print a JSON array (kind, session_id, agent, owner, title, at, request_id, tool, gateway)', {
    usage: ' [--watch]',
    lines: '  --watch         print the list again whenever it changes (pushed by the gateway; no polling) until Ctrl-C\n',
  }),
  options: { ...LIST_OPTIONS, watch: { type: 'boolean' } },
  async run(v) {
    const client = await connectFrom(v, 'tether-inbox');
    const print = async () => writeList(v, await client.inbox(), 'nothing waits for you', HEAD, row);
    try {
      if (!v.watch) {
        await print();
        return 0;
      }
      // One listing at a time; a change during one is listed once more after it.
      let running: Promise<void> | undefined;
      let again = false;
      const relist = (): void => {
        if (running) {
          again = true;
          return;
        }
        running = print()
          .catch((err: unknown) => void process.stderr.write(`tether inbox: ${(err as Error).message}\n`))
          .finally(() => {
            running = undefined;
            if (again) {
              again = false;
              relist();
            }
          });
      };
      const stopped = new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
      await client.watchFleet(relist);
      relist();
      await stopped;
      await running;
      return 0;
    } finally {
      await client.close();
    }
  },
};
