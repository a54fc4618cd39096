/**
 * The parts of the cluster's door that need no server: how the cluster keys become a NATS
 * dial (and which combinations are refused, saying why), and the fabric's seal on calls
 * (wrong key, stale, replayed). The same code runs against a real nats-server in
 * test/cluster-trust.test.ts and test/cluster-start.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { generateTokenKey } from '../core/auth/keygen.js';
import { asTetherError } from '../core/errors.js';
import { CALL_WINDOW_MS, FabricMac } from '../gateway/cluster/fabric-mac.js';
import { natsDialOf, type ClusterAuthConfig } from '../gateway/cluster/nats-auth.js';

const refusal = (c: Partial<ClusterAuthConfig>) => {
  try {
    natsDialOf({ cluster: 'nats://127.0.0.1:4222', clusterInsecureNoAuth: false, ...c });
    return undefined;
  } catch (err) {
    return asTetherError(err);
  }
};

describe('the cluster keys as a NATS dial', () => {
  it('refuses combinations that do not go together, naming them', () => {
    expect(refusal({ clusterCreds: '/c', clusterTokenFile: '/t' })).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('--cluster-creds and a token'),
    });
    expect(refusal({ cluster: 'nats://u:p@127.0.0.1:4222', clusterNkey: '/n' })).toMatchObject({
      message: expect.stringContaining('--cluster-nkey and credentials in the URL'),
    });
    expect(refusal({ clusterPassword: 'x' })?.message).toContain('a password needs --cluster-user');
    expect(refusal({ clusterUser: 'gw' })?.message).toContain('--cluster-user needs --cluster-password-file');
    expect(refusal({ clusterTokenFile: '/t', clusterToken: 'x' })?.message).toContain('not both');
    expect(refusal({ clusterTlsCert: '/c' })?.message).toContain('both --cluster-tls-cert and --cluster-tls-key');
    expect(refusal({})).toMatchObject({ code: 'FAILED_PRECONDITION', message: expect.stringContaining('must authenticate the gateways') });
  });

  it('takes one way to authenticate, never shows credentials, and turns TLS on for tls:// or TLS files', () => {
    const url = natsDialOf({ cluster: 'nats://gw:s3cret@nats.example:4222', clusterInsecureNoAuth: false });
    expect(url).toMatchObject({ method: 'user', server: 'nats.example:4222', shown: 'nats://nats.example:4222', tls: undefined });
    expect(natsDialOf({ cluster: 'nats://tok3n@nats.example:4222', clusterInsecureNoAuth: false }).method).toBe('token');
    expect(natsDialOf({ cluster: 'tls://h:4222', clusterUser: 'gw', clusterPassword: 'pw', clusterInsecureNoAuth: false })).toMatchObject({
      method: 'user',
      tls: {},
    });
    expect(
      natsDialOf({
        cluster: 'nats://h:4222',
        clusterTlsCert: '/c',
        clusterTlsKey: '/k',
        clusterTlsCa: '/ca',
        clusterInsecureNoAuth: false,
      }),
    ).toMatchObject({
      method: 'tls-client-cert',
      tls: { certFile: '/c', keyFile: '/k', caFile: '/ca' },
    });
    expect(natsDialOf({ cluster: 'nats://h:4222', clusterInsecureNoAuth: true }).method).toBe('none');
  });
});

describe("the fabric's seal on calls", () => {
  const key = generateTokenKey('HS256').key;
  const body = Buffer.from('{"method":"session.create"}');

  it('opens a call sealed by a gateway with the same key, once; refuses another key, another subject, a stale call and a replay', () => {
    const mac = FabricMac.fromTokenKey(key);
    const peer = FabricMac.fromTokenKey(key); // another gateway, same token key
    const headers = peer.sealMessage('tether.gw.a.call', body);
    expect(Buffer.from(mac.openMessage({ subject: 'tether.gw.a.call', data: body, headers })).toString()).toBe(body.toString());
    expect(() => mac.openMessage({ subject: 'tether.gw.a.call', data: body, headers })).toThrow(/replayed/);
    const other = FabricMac.fromTokenKey(generateTokenKey('HS256').key);
    expect(() =>
      mac.openMessage({ subject: 'tether.gw.a.call', data: body, headers: other.sealMessage('tether.gw.a.call', body) }),
    ).toThrow(/wrongly signed/);
    expect(() => mac.openMessage({ subject: 'tether.gw.b.call', data: body, headers: peer.sealMessage('tether.gw.a.call', body) })).toThrow(
      /wrongly signed/,
    );
    expect(() => mac.openMessage({ subject: 'tether.gw.a.call', data: body })).toThrow(/unsigned/);
    const late = peer.sealMessage('tether.gw.a.call', body);
    expect(() => mac.openMessage({ subject: 'tether.gw.a.call', data: body, headers: late }, Date.now() + CALL_WINDOW_MS + 1_000)).toThrow(
      /stale/,
    );
  });

  it('derives the same key from the same private key (EdDSA) and none from a key that only verifies', () => {
    const ed = generateTokenKey('EdDSA').key;
    const a = FabricMac.fromTokenKey(ed);
    const b = FabricMac.fromTokenKey(ed);
    expect(b.openValue('tether-sessions/s1', Buffer.from(a.sealValue('tether-sessions/s1', '{"x":1}')))).toBe('{"x":1}');
    expect(() => b.openValue('tether-sessions/s2', Buffer.from(a.sealValue('tether-sessions/s1', '{"x":1}')))).toThrow(/wrongly signed/);
    expect(() => FabricMac.fromTokenKey({ ...ed, signKey: undefined })).toThrow(/only verifies/);
  });
});
