import { spawn } from 'node:child_process';
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';

/** An ACP agent running as a child of the engine process, its stdio as an ACP stream. */
export interface AcpChild {
  stream: acp.Stream;
  /** Settles once when the child has exited (its code, or the error that kept it from starting). */
  exited: Promise<string>;
  kill(): void;
}

/**
 * Starts the ACP agent in the session folder with the engine's environment. Its stderr is the
 * engine's (the agent keeps its tail); it shares the engine's process group, so the agent's
 * staged stop reaches it.
 */
export function startAcpChild(command: readonly string[], cwd: string, env: NodeJS.ProcessEnv): AcpChild {
  const child = spawn(command[0]!, command.slice(1), { cwd, env, stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<string>((resolve) => {
    child.on('error', (err) => resolve(`could not start ${command[0]}: ${err.message}`));
    child.on('exit', (code, signal) =>
      resolve(signal ? `${command[0]} was killed by ${signal}` : `${command[0]} exited with code ${code}`),
    );
  });
  child.stdin!.on('error', () => {}); // a child that died: its exit says so
  const stream = acp.ndJsonStream(
    Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>,
    Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>,
  );
  return { stream, exited, kill: () => child.kill('SIGKILL') };
}
