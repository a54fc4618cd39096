import qrcode from 'qrcode-terminal';
import { TetherError } from '../core/errors.js';

/**
 * The web page's sign-in URL for a code. The code rides in the fragment (`#login=…`), which
 * browsers never send to a server, so it stays out of access logs, proxies and Referer headers.
 */
export function signInUrl(pageUrl: string, code: string): string {
  let u: URL;
  try {
    u = new URL(pageUrl);
  } catch {
    throw new TetherError('INVALID_ARGUMENT', `--url must be the gateway's web address, like http://gateway-host:7800, got "${pageUrl}"`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new TetherError('INVALID_ARGUMENT', `--url must start with http:// or https://, got "${pageUrl}"`);
  return `${u.origin}/#login=${code}`;
}

/** Whether a URL's host is this machine only (127.0.0.0/8, ::1, localhost). */
export function isLoopbackUrl(url: string): boolean {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * Prints `sign-in: URL (single use, valid N min)` and, when the page is reachable beyond this
 * machine (or `qr` asks for it), the URL as a QR code for a phone's camera.
 */
export function printSignIn(write: (text: string) => void, url: string, ttlSeconds: number, qr = !isLoopbackUrl(url)): void {
  write(`sign-in: ${url} (single use, valid ${Math.round(ttlSeconds / 60)} min)\n`);
  if (qr) qrcode.generate(url, { small: true }, (code) => write(code + '\n'));
}
