/**
 * gRPC frame batches: several frames of one turn of the event loop in one gRPC message (a
 * Frame whose `batch` holds them, proto/tether/v1/gateway.proto). Each gRPC message costs
 * grpc-js and HTTP/2 the same work however small it is (the 200-byte frames of a stream spent
 * most of the gateway's time there), so a burst read in one turn leaves in one message, as a
 * WebSocket channel writes one turn's frames with one syscall.
 *
 * Negotiated per call with metadata, below the protocol: the dialer offers in its request
 * headers, the listener in its response headers. Each side batches only towards a peer that
 * offered (an older peer offers nothing and gets one frame per message, as before), and takes
 * batches whether or not it offered.
 */

/** The metadata key of the offer, on the call's request headers (dialer) and response headers (listener). */
export const BATCH_METADATA_KEY = 'tether-frame-batch';

/** The largest batch we send, and offer to take: big enough for a burst of small frames. */
export const BATCH_MAX_BYTES = 64 * 1024;

/**
 * Frames above this go in a message of their own: their bytes, not the message, are what they
 * cost, and a batch would copy them once more.
 */
export const BATCH_FRAME_MAX_BYTES = 8 * 1024;

/** The offer of a side whose frame limit is `maxFrameBytes`: `v1;max=<bytes of the largest batch it takes>`. */
export function batchOffer(maxFrameBytes: number): string {
  return `v1;max=${Math.min(BATCH_MAX_BYTES, maxFrameBytes)}`;
}

/**
 * How large the batches we send the peer may be, from its offer (the metadata value, maybe
 * several comma-separated offers), or undefined when it offered none we know: then it gets one
 * frame per message. Never above our own {@link BATCH_MAX_BYTES}.
 */
export function batchBytesFromOffer(value: string | undefined): number | undefined {
  for (const offer of value?.split(',') ?? []) {
    const m = /^\s*v1;max=(\d{1,10})\s*$/.exec(offer);
    if (!m) continue;
    // A frame that does not fit a batch goes alone, so any size works; none is none.
    const max = Math.min(Number(m[1]), BATCH_MAX_BYTES);
    return max > 0 ? max : undefined;
  }
  return undefined;
}
