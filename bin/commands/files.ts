import { TetherError } from '../../core/errors.js';
import { FILE_MAX_BYTES } from '../../core/protocol/folder-view.js';
import { readFolder } from '../../client/folder-view.js';
import type { Command } from '../args.js';
import { connectFrom, connectionHelp, CONNECTION_OPTIONS, TLS_CLIENT_HELP } from '../connection-flags.js';

export const filesCommand: Command = {
  name: 'files',
  summary: "list a folder of a session's working folder, or print one of its files",
  usage: `Usage: tether files SESSION [PATH]

Lists PATH (default: the session's folder itself) when it is a folder, one entry a line
(folders end in /, symlinks in @), or prints the file's text. PATH is relative to the session
folder; a path leading out of it (through .. or a symlink) is refused. Binary files are named,
not printed; a file over the cap is cut, and stderr says so. Viewers may read too.

Options:
${connectionHelp(18)}
  --max-bytes N   the most of a file to print (default 256 KiB, at most ${FILE_MAX_BYTES / 1024 / 1024} MiB)
${TLS_CLIENT_HELP}
  -h, --help      show this help`,
  options: { ...CONNECTION_OPTIONS, 'max-bytes': { type: 'string' } },
  allowPositionals: true,
  async run(v, positionals) {
    const [id, path = '.', ...extra] = positionals;
    if (!id || extra.length > 0)
      throw new TetherError('INVALID_ARGUMENT', 'give one SESSION id and at most one PATH\nRun "tether files --help" for usage.');
    const maxBytes = typeof v['max-bytes'] === 'string' ? byteCount(v['max-bytes'], 'file') : undefined;
    const client = await connectFrom(v, 'tether-files');
    try {
      const r = await readFolder(await client.peer(), id, {
        view: 'file',
        path,
        ...(maxBytes === undefined ? {} : { max_bytes: maxBytes }),
      });
      if (r.kind === 'dir') {
        const mark = { dir: '/', link: '@', file: '', other: '' } as const;
        process.stdout.write((r.entries ?? []).map((e) => `${e.name}${mark[e.type]}\n`).join(''));
      } else if (r.binary) {
        process.stderr.write(`tether files: ${path} is a binary file of ${r.size} bytes: not printed\n`);
        return 1;
      } else process.stdout.write(r.content ?? '');
      if (r.cut) process.stderr.write(`tether files: ${r.cut}\n`);
      return 0;
    } finally {
      await client.close();
    }
  },
};

/** `--max-bytes N` as a positive whole number of bytes; INVALID_ARGUMENT otherwise (the gateway checks the range). */
export function byteCount(text: string, what: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < 1)
    throw new TetherError('INVALID_ARGUMENT', `--max-bytes: "${text}" is not a number of bytes for the ${what}`);
  return n;
}
