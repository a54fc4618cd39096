/**
 * Resolves after SIGINT or SIGTERM has run `stop` (once). A second signal while stopping
 * exits at once. Only CLI entry points use this.
 */
export function onShutdown(stop: () => Promise<void>): Promise<void> {
  return new Promise((resolve) => {
    let stopping = false;
    const handler = () => {
      if (stopping) process.exit(130);
      stopping = true;
      stop().then(resolve, (err) => {
        process.stderr.write(`error while stopping: ${String(err)}\n`);
        resolve();
      });
    };
    process.on('SIGINT', handler);
    process.on('SIGTERM', handler);
  });
}
