/**
 * A stand-in editor for ACP tests: the official SDK's client side (a real ACP peer, not our
 * code), connected to `tether acp` as a child process over stdio, or to any ACP stream. It
 * records every session/update in arrival order and answers permission prompts through a
 * callback the test sets per prompt.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';
import { TETHER_BIN } from './cli.js';

export type PermissionHandler = (req: acp.RequestPermissionRequest, signal: AbortSignal) => Promise<acp.RequestPermissionResponse>;

export interface Editor {
  /** The agent-side calls (initialize, session/new, prompt, …). */
  agent: acp.ClientContext;
  /** Every session/update received, in order. */
  updates: acp.SessionNotification[];
  /** Every permission request received, in order. */
  permissionRequests: acp.RequestPermissionRequest[];
  /** Requests withdrawn by the agent (their signal aborted), by toolCallId. */
  withdrawn: string[];
  onPermission: PermissionHandler;
  /** Answers elicitation/create (only reached when the editor declared elicitation). */
  onElicit: (req: acp.CreateElicitationRequest) => Promise<acp.CreateElicitationResponse>;
  elicitations: acp.CreateElicitationRequest[];
  /** Resolves once `pred` holds for the updates (bounded). */
  waitFor(pred: (updates: acp.SessionNotification[]) => boolean, what: string, timeoutMs?: number): Promise<void>;
  stderr(): string;
  /** Ends the connection (stdin EOF for a child) and waits for the carrier to go. */
  close(): Promise<void>;
  /** For `tether acp` children: the exit code once closed (null if it had to be killed). */
  exitCode?: () => number | null;
}

export const select = (optionId: string): acp.RequestPermissionResponse => ({ outcome: { outcome: 'selected', optionId } });

/** Connects the SDK's client to a stream; `dispose` ends whatever carries it. */
export function connectEditor(stream: acp.Stream, dispose: () => Promise<void>, stderr: () => string = () => ''): Editor {
  const waiters = new Set<() => void>();
  const editor: Editor = {
    agent: undefined as unknown as acp.ClientContext,
    updates: [],
    permissionRequests: [],
    withdrawn: [],
    onPermission: async () => select('reject'),
    onElicit: async () => ({ action: 'decline' }),
    elicitations: [],
    async waitFor(pred, what, timeoutMs = 30_000) {
      if (pred(editor.updates)) return;
      await new Promise<void>((resolve, reject) => {
        const check = () => {
          if (!pred(editor.updates)) return;
          clearTimeout(t);
          waiters.delete(check);
          resolve();
        };
        const t = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(
              `timed out waiting for ${what}; updates: ${JSON.stringify(editor.updates.map((u) => u.update.sessionUpdate))}\nstderr: ${stderr()}`,
            ),
          );
        }, timeoutMs);
        waiters.add(check);
      });
    },
    stderr,
    async close() {
      conn.close();
      await dispose();
    },
  };
  const app = acp
    .client({ name: 'test-editor' })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      editor.updates.push(params);
      for (const w of [...waiters]) w();
    })
    .onRequest(acp.methods.client.session.requestPermission, ({ params, signal }) => {
      editor.permissionRequests.push(params);
      const withdrawn = () => editor.withdrawn.push(params.toolCall.toolCallId);
      if (signal.aborted) withdrawn();
      else signal.addEventListener('abort', withdrawn);
      return editor.onPermission(params, signal);
    })
    .onRequest(acp.methods.client.elicitation.create, ({ params }) => {
      editor.elicitations.push(params);
      return editor.onElicit(params);
    });
  const conn = app.connect(stream);
  editor.agent = conn.agent;
  return editor;
}

/** Spawns `tether acp ARGS` and connects the SDK's client to its stdio. */
export function spawnAcp(args: string[], env: NodeJS.ProcessEnv): Editor {
  const child: ChildProcess = spawn(process.execPath, [TETHER_BIN, 'acp', ...args], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin!), Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>);
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const editor = connectEditor(
    stream,
    async () => {
      child.stdin!.end();
      const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
      if (child.exitCode === null && child.signalCode === null) await exited;
      clearTimeout(t);
    },
    () => err,
  );
  editor.exitCode = () => child.exitCode;
  return editor;
}

/** The text of the agent_message_chunk updates, concatenated. */
export function agentText(updates: acp.SessionNotification[]): string {
  return updates
    .map((n) => (n.update.sessionUpdate === 'agent_message_chunk' && n.update.content.type === 'text' ? n.update.content.text : ''))
    .join('');
}
