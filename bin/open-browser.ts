import { spawn } from 'node:child_process';

/**
 * Opens a URL in the desktop's browser (xdg-open, open, or start), detached; false when there
 * is no way to (the caller has printed the URL anyway). Never waits for the browser.
 */
export function openBrowser(url: string): boolean {
  const [cmd, args] =
    process.platform === 'darwin'
      ? ['open', [url]]
      : process.platform === 'win32'
        ? ['cmd', ['/c', 'start', '', url]]
        : ['xdg-open', [url]];
  try {
    const child = spawn(cmd as string, args as string[], { detached: true, stdio: 'ignore' });
    child.on('error', () => undefined); // no opener installed: the printed URL is the way
    child.unref();
    return true;
  } catch {
    return false;
  }
}
