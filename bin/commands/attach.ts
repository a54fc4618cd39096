import { TetherError } from '../../core/errors.js';
import type { Command } from '../args.js';
import { connectFrom, connectionHelp, TLS_CLIENT_HELP, TOKEN_FILE_HELP } from '../connection-flags.js';
import { drive, linkReporter, SESSION_DRIVE_OPTIONS } from '../session-drive.js';

export const attachCommand: Command = {
  name: 'attach',
  summary: 'join a running session (history first, then live)',
  usage: `Usage: tether attach SESSION [--read-only] [--json] [--from-seq N]

Attaches to a running session: its history from the beginning (or from --from-seq), then the
live stream. Without --read-only you are a controller when your token allows control.
--json is pipe mode (see tether chat --help); stdin EOF does not end watching: the stream
runs until the session ends or you press Ctrl-C.

Options:
${connectionHelp(18)}
${TOKEN_FILE_HELP}
  --read-only     attach as a viewer
  --from-seq N    start the history at sequence number N
  --json          pipe mode
${TLS_CLIENT_HELP}
  -h, --help      show this help`,
  options: { ...SESSION_DRIVE_OPTIONS, 'read-only': { type: 'boolean' }, 'from-seq': { type: 'string' } },
  allowPositionals: true,
  async run(v, positionals) {
    const id = positionals[0];
    if (!id || positionals.length > 1)
      throw new TetherError('INVALID_ARGUMENT', 'give exactly one SESSION id\nRun "tether attach --help" for usage.');
    const fromSeq = v['from-seq'] === undefined ? undefined : Number(v['from-seq']);
    if (fromSeq !== undefined && (!Number.isInteger(fromSeq) || fromSeq < 1))
      throw new TetherError('INVALID_ARGUMENT', '--from-seq must be a whole number >= 1');
    const json = v.json === true;
    const client = await connectFrom(v, 'tether-attach', linkReporter(json));
    try {
      const session = await client.attach(id, { fromSeq, readOnly: v['read-only'] === true });
      return await drive(client, session, json, false);
    } finally {
      await client.close();
    }
  },
};
