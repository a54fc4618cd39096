import { readFileSync } from 'node:fs';
import { loadableFile } from './common.js';

/** A PEM file that must be readable when the configuration is loaded. */
export function pemFile(help: string, flag: string) {
  return loadableFile(readPem).optional().meta({ help, flag });
}

/** Reads a PEM file; throws saying why it cannot be used. */
function readPem(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (!text.includes('-----BEGIN')) throw new Error(`${path} is not a PEM file`);
  return text;
}

/** TLS for a program that dials the gateway (agent): a private CA, and a client certificate for mutual TLS. */
export const DIAL_TLS_KEYS = {
  ca: pemFile('trust this CA (PEM) for wss:// and grpcs:// gateways with a private CA', 'ca'),
  tlsCert: pemFile('client certificate (PEM), for gateways that require mutual TLS', 'tls-cert'),
  tlsKey: pemFile('private key (PEM) of --tls-cert', 'tls-key'),
};

/** Reads the PEM files named by the dial TLS keys. */
export function dialTlsOf(c: { ca?: string; tlsCert?: string; tlsKey?: string }): { ca?: Buffer; tlsCert?: Buffer; tlsKey?: Buffer } {
  const read = (p?: string) => (p ? readFileSync(p) : undefined);
  return { ca: read(c.ca), tlsCert: read(c.tlsCert), tlsKey: read(c.tlsKey) };
}
