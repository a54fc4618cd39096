import { readFileSync } from 'node:fs';
import { z } from 'zod';

/** A PEM file that must be readable when the configuration is loaded. */
export function pemFile(help: string, flag: string) {
  return z
    .string()
    .min(1)
    .superRefine((path, ctx) => {
      try {
        if (!readFileSync(path, 'utf8').includes('-----BEGIN')) ctx.addIssue({ code: 'custom', message: `${path} is not a PEM file` });
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` });
      }
    })
    .optional()
    .meta({ help, flag });
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
