/**
 * A scripted fake of the Anthropic Messages API for driving the real Claude Code CLI in tests.
 *
 * Each streaming `POST /v1/messages` consumes the next scripted response (then `fallback`);
 * everything else the CLI asks for (non-streaming model checks, `count_tokens`, HEAD/GET probes)
 * gets a small valid answer without touching the script. Listens on 127.0.0.1, port 0.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One scripted model turn. Blocks are emitted in the order thinking, text, tool_use. */
export interface FakeResponse {
  text?: string;
  thinking?: string;
  tool_use?: { id?: string; name: string; input: Record<string, unknown> };
  /** Wait before the response starts (before headers). */
  delay_ms?: number;
  /** Wait between text deltas; text is then streamed word by word (for interrupt tests). */
  chunk_delay_ms?: number;
  /** Answer with this HTTP error status instead of a stream. */
  error_status?: number;
  /** The error body's message (default "scripted error"). */
  error_message?: string;
  /** Token counts to report: input and cache in message_start, output in message_delta (default 12 in, 7 out, no cache). */
  usage?: FakeUsage;
}

/** What one scripted response reports the model used. */
export interface FakeUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
}

export interface FakeScenario {
  responses: FakeResponse[];
  /** Used once `responses` run out; without it the fake answers a plain "OK." text turn. */
  fallback?: FakeResponse;
}

/** What a request carried and how the fake answered it. */
export interface RecordedRequest {
  method: string;
  /** Path including the query string, e.g. `/v1/messages?beta=true`. */
  path: string;
  model?: string;
  stream: boolean;
  maxTokens?: number;
  messageCount: number;
  toolNames: string[];
  /** The system prompt's text blocks, joined with a blank line. */
  system: string;
  /** Each tool's description (the Agent tool's lists the subagents). */
  toolDescriptions: Record<string, string>;
  lastMessage?: { role: string; content: unknown };
  /** `script[i]`, `fallback`, `aux` (small non-script answer) or `probe` (HEAD/GET/other). */
  answeredWith: string;
  /** The request body as received: to show a text never reached "the model" in any message. */
  raw: string;
}

/** A tool_result block the CLI sent to the model; `content` is flattened to text. */
export interface RecordedToolResult {
  tool_use_id: string;
  content: string;
  is_error?: boolean;
}

export interface FakeAnthropic {
  /** Base URL for `ANTHROPIC_BASE_URL`, e.g. `http://127.0.0.1:41234`. */
  url: string;
  /** Every request received, in arrival order (live array). */
  requests: RecordedRequest[];
  /** Replace the script; the next streaming call gets `responses[0]` of the new one. */
  setScenario(s: FakeScenario): void;
  /** Streaming Messages calls only: the ones that consume the script. */
  modelRequests(): RecordedRequest[];
  /** Every tool_result the CLI has sent in a last message, oldest first, one per tool_use_id. */
  lastToolResults(): RecordedToolResult[];
  /** Text deltas written to the CLI so far, over every call (to act once an answer is under way). */
  textDeltasSent(): number;
  /** Stops listening and destroys open sockets, so it resolves even mid-stream. Idempotent. */
  close(): Promise<void>;
}

interface MessagesBody {
  model?: string;
  stream?: boolean;
  max_tokens?: number;
  messages?: Array<{ role: string; content: unknown }>;
  tools?: Array<{ name?: string; description?: string }>;
  system?: string | Array<{ type?: string; text?: string }>;
}

const DEFAULT_REPLY: FakeResponse = { text: 'OK.' };

const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  529: 'overloaded_error',
};

/** Starts the fake; resolves once it is listening. */
export async function startFakeAnthropic(scenario: FakeScenario): Promise<FakeAnthropic> {
  let script = scenario;
  let cursor = 0;
  let idCounter = 0;
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  const stopping = new AbortController();
  let textDeltas = 0;

  const nextId = (prefix: string): string => `${prefix}_fake_${++idCounter}`;

  const takeScripted = (): { reply: FakeResponse; label: string } => {
    if (cursor < script.responses.length) {
      const index = cursor++;
      return { reply: script.responses[index]!, label: `script[${index}]` };
    }
    return { reply: script.fallback ?? DEFAULT_REPLY, label: 'fallback' };
  };

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const path = req.url ?? '/';
    const method = req.method ?? 'GET';
    const raw = await readBody(req);
    const pathname = path.split('?')[0];

    if (method !== 'POST') {
      requests.push(probeRecord(method, path, raw));
      return sendJson(res, 200, {});
    }
    if (pathname === '/v1/messages/count_tokens') {
      requests.push(probeRecord(method, path, raw, 'aux'));
      return sendJson(res, 200, { input_tokens: Math.max(1, Math.ceil(raw.length / 4)) });
    }
    if (pathname !== '/v1/messages') {
      requests.push(probeRecord(method, path, raw));
      return sendError(res, 404, `no fake for ${pathname}`);
    }

    const body = parseBody(raw);
    const model = body.model ?? 'claude-fake';
    if (body.stream !== true) {
      requests.push(messagesRecord(method, path, body, raw, 'aux'));
      return sendJson(res, 200, plainMessage(nextId('msg'), model));
    }
    const { reply, label } = takeScripted();
    requests.push(messagesRecord(method, path, body, raw, label));
    await sleep(reply.delay_ms ?? 0, stopping.signal);
    if (reply.error_status !== undefined) return sendError(res, reply.error_status, reply.error_message ?? 'scripted error');
    await streamReply(res, reply, {
      model,
      messageId: nextId('msg'),
      requestId: nextId('req'),
      toolUseId: reply.tool_use?.id ?? nextId('toolu'),
      signal: stopping.signal,
      onTextDelta: () => void textDeltas++,
    });
  };

  const server = http.createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= new Promise<void>((resolve) => {
      stopping.abort();
      server.close(() => resolve());
      for (const socket of sockets) socket.destroy();
    });
    return closing;
  };

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    setScenario(s) {
      script = s;
      cursor = 0;
    },
    modelRequests: () => requests.filter((r) => r.stream && r.answeredWith !== 'aux'),
    lastToolResults: () => collectToolResults(requests),
    textDeltasSent: () => textDeltas,
    close,
  };
}

interface StreamContext {
  model: string;
  messageId: string;
  requestId: string;
  toolUseId: string;
  signal: AbortSignal;
  /** Called after each text delta is written. */
  onTextDelta?: () => void;
}

/** Writes one Messages API SSE stream; stops quietly if the client goes away (an interrupt). */
async function streamReply(res: http.ServerResponse, reply: FakeResponse, ctx: StreamContext): Promise<void> {
  if (res.destroyed || ctx.signal.aborted) return;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    'request-id': ctx.requestId,
  });
  const alive = (): boolean => !res.destroyed && !ctx.signal.aborted;
  const send = (event: string, data: object): void => {
    if (alive()) res.write(`event: ${event}\ndata: ${JSON.stringify({ type: event, ...data })}\n\n`);
  };

  send('message_start', {
    message: {
      id: ctx.messageId,
      type: 'message',
      role: 'assistant',
      model: ctx.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: reply.usage?.input_tokens ?? 12,
        output_tokens: 1,
        cache_creation_input_tokens: reply.usage?.cache_creation_input_tokens ?? 0,
        cache_read_input_tokens: reply.usage?.cache_read_input_tokens ?? 0,
      },
    },
  });
  send('ping', {});

  let index = 0;
  if (reply.thinking !== undefined) {
    send('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } });
    send('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: reply.thinking } });
    send('content_block_delta', { index, delta: { type: 'signature_delta', signature: 'fake-signature' } });
    send('content_block_stop', { index });
    index++;
  }
  if (reply.text !== undefined) {
    send('content_block_start', { index, content_block: { type: 'text', text: '' } });
    const delay = reply.chunk_delay_ms ?? 0;
    for (const piece of delay > 0 ? splitWords(reply.text) : splitEven(reply.text, 3)) {
      send('content_block_delta', { index, delta: { type: 'text_delta', text: piece } });
      ctx.onTextDelta?.();
      await sleep(delay, ctx.signal);
      if (!alive()) return;
    }
    send('content_block_stop', { index });
    index++;
  }
  if (reply.tool_use !== undefined) {
    const { name, input } = reply.tool_use;
    send('content_block_start', { index, content_block: { type: 'tool_use', id: ctx.toolUseId, name, input: {} } });
    for (const piece of splitEven(JSON.stringify(input), 3)) {
      send('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } });
    }
    send('content_block_stop', { index });
  }

  const stopReason = reply.tool_use !== undefined ? 'tool_use' : 'end_turn';
  send('message_delta', {
    delta: { stop_reason: stopReason, stop_sequence: null },
    usage: { output_tokens: reply.usage?.output_tokens ?? 7 },
  });
  send('message_stop', {});
  if (alive()) res.end();
}

/** A complete non-streaming message, for model checks and other side calls. */
function plainMessage(id: string, model: string): object {
  return {
    id,
    type: 'message',
    role: 'assistant',
    model,
    content: [{ type: 'text', text: 'OK' }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 1, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
  };
}

function probeRecord(method: string, path: string, raw: string, answeredWith = 'probe'): RecordedRequest {
  return { method, path, stream: false, messageCount: 0, toolNames: [], system: '', toolDescriptions: {}, answeredWith, raw };
}

function messagesRecord(method: string, path: string, body: MessagesBody, raw: string, answeredWith: string): RecordedRequest {
  const messages = body.messages ?? [];
  // Some CLI releases append a system message after the tool results: look past it.
  const last = [...messages].reverse().find((m) => m.role !== 'system') ?? messages.at(-1);
  return {
    method,
    path,
    answeredWith,
    raw,
    model: body.model,
    stream: body.stream === true,
    maxTokens: body.max_tokens,
    messageCount: messages.length,
    toolNames: (body.tools ?? []).map((t) => t.name ?? '?'),
    system: typeof body.system === 'string' ? body.system : (body.system ?? []).map((b) => b.text ?? '').join('\n\n'),
    toolDescriptions: Object.fromEntries((body.tools ?? []).map((t) => [t.name ?? '?', t.description ?? ''])),
    lastMessage: last && { role: last.role, content: last.content },
  };
}

/** Later requests win, so a tool_use_id maps to the most recent text the model saw. */
function collectToolResults(requests: RecordedRequest[]): RecordedToolResult[] {
  const byId = new Map<string, RecordedToolResult>();
  for (const r of requests) {
    const content = r.lastMessage?.content;
    if (!Array.isArray(content)) continue;
    for (const block of content as Array<Record<string, unknown>>) {
      if (block?.type !== 'tool_result' || typeof block.tool_use_id !== 'string') continue;
      byId.delete(block.tool_use_id);
      byId.set(block.tool_use_id, {
        tool_use_id: block.tool_use_id,
        content: flattenContent(block.content),
        ...(typeof block.is_error === 'boolean' ? { is_error: block.is_error } : {}),
      });
    }
  }
  return [...byId.values()];
}

/** tool_result content is a string or a list of blocks; tests only care about the text. */
function flattenContent(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((b: { type?: string; text?: unknown }) => (b?.type === 'text' && typeof b.text === 'string' ? b.text : '')).join('\n');
}

function parseBody(raw: string): MessagesBody {
  try {
    const parsed: unknown = JSON.parse(raw);
    return parsed !== null && typeof parsed === 'object' ? (parsed as MessagesBody) : {};
  } catch {
    return {};
  }
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function sendJson(res: http.ServerResponse, status: number, body: object): void {
  if (res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: http.ServerResponse, status: number, message: string): void {
  const type = ERROR_TYPES[status] ?? 'api_error';
  sendJson(res, status, { type: 'error', error: { type, message } });
}

/** Resolves after `ms`, or at once when the fake is closing, so close() never waits on a script. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });
}

function splitEven(text: string, parts: number): string[] {
  const size = Math.max(1, Math.ceil(text.length / parts));
  const pieces: string[] = [];
  for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size));
  return pieces.length > 0 ? pieces : [''];
}

/** Words keep their trailing whitespace so the pieces join back to the original text. */
function splitWords(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [''];
}
