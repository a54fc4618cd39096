import { z } from 'zod';
import type { Logger } from '../../core/logging.js';
import type { FleetFeed } from '../directory/fleet-feed.js';
import { decode, encode } from './cluster-wire.js';
import { DropLog, type FabricMac } from './fabric-mac.js';
import type { NatsLink } from './nats-link.js';

/** The subject every gateway of the cluster publishes its changes on and listens to. */
export const FLEET_CHANGED_SUBJECT = 'tether.fleet.changed';

const FleetChanged = z.object({ gateway: z.string().min(1).max(64) });

/**
 * The fleet feed across gateways: a change here (coalesced by the feed) is published, sealed,
 * on FLEET_CHANGED_SUBJECT; one another gateway published is handed to this gateway's feed,
 * so a page watching any gateway hears of a prompt raised on any other within a NATS hop.
 * Unsealed messages are dropped. Carries only the gateway's id: listings are asked again.
 */
export class FleetChanges {
  private readonly sub: ReturnType<NatsLink['nc']['subscribe']>;

  constructor(
    private readonly link: NatsLink,
    private readonly gatewayId: string,
    private readonly mac: FabricMac,
    feed: FleetFeed,
    log: Logger,
  ) {
    const dropped = new DropLog(log, 'dropping a bad or unsealed fleet change');
    const sub = link.nc.subscribe(FLEET_CHANGED_SUBJECT);
    this.sub = sub;
    void (async () => {
      for await (const m of sub) {
        try {
          const c = decode(FleetChanged, this.mac.openMessage(m));
          if (c.gateway !== gatewayId) feed.changedElsewhere();
        } catch (err) {
          dropped.note({ err: String(err) });
        }
      }
    })().catch((err: unknown) =>
      // NATS refused the subscription (its permissions lack the subject: deploy/nats-cluster.conf): pages
      // here still hear of this gateway's changes, not of the others'. Said, never a crash.
      log.error({ err: String(err), subject: FLEET_CHANGED_SUBJECT }, 'cannot hear the other gateways’ fleet changes'),
    );
    feed.announce = () => this.publish();
  }

  /** Tells the other gateways something held here changed (dropped while NATS is away: their next listing catches up). */
  private publish(): void {
    if (!this.link.isUp) return;
    const data = encode({ gateway: this.gatewayId });
    try {
      this.link.nc.publish(FLEET_CHANGED_SUBJECT, data, { headers: this.mac.sealMessage(FLEET_CHANGED_SUBJECT, data) });
    } catch {
      // The connection is closing: nothing to tell.
    }
  }

  close(): void {
    this.sub.unsubscribe();
  }
}
