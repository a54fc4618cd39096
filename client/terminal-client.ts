import { randomUUID } from 'node:crypto';
import { createInterface, type Interface } from 'node:readline';
import { Writable, type Readable } from 'node:stream';
import { asTetherError } from '../core/errors.js';
import { INPUT_REFUSED, type QueuedPrompt } from '../core/protocol/events.js';
import { presenceChanges } from '../core/protocol/presence.js';
import {
  answerQuestions,
  asPermissionRequest,
  askQuestions,
  grantedRules,
  proposedSessionRule,
  ruleLabel,
  type PermissionRequest,
} from './permission-policy.js';
import { engineNoticeText, grantedForText } from './turn-view.js';
import type { RemoteSession, SessionItem } from './remote-session.js';
import { describeEvent, diffLines, oneLine, sanitize, styles, toolLine } from './terminal-render.js';
import { queuedText } from './queue-view.js';

export interface TerminalOptions {
  input: Readable;
  output: Writable;
  /** Whether output is a terminal: escape codes and the "> " prompt only then. */
  tty: boolean;
  /** Principal of this client, to tell own prompts from others'. */
  self?: string;
}

/** How long after a Ctrl-C a second one leaves instead of interrupting again. */
const DOUBLE_CTRL_C_MS = 2_000;

/**
 * What readline draws on (its prompt and the echo of what is typed), passed through to the
 * terminal while `open`, swallowed while not: while output streams mid-line, typing must not
 * land inside it. Readline keeps what was typed; the client redraws it below the output.
 */
class GatedOutput extends Writable {
  open = true;
  readonly isTTY = true;
  constructor(private readonly terminal: Writable) {
    super();
  }
  get columns(): number {
    return (this.terminal as { columns?: number }).columns ?? 80;
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    if (this.open) this.terminal.write(chunk, done);
    else done();
  }
}

/**
 * The interactive terminal client for `tether chat` and `tether attach`: streams assistant
 * text, shows tool calls compactly, asks permission prompts (y / n / a = always allow the rule the engine proposed, for this
 * session) and AskUserQuestion (a number or free text). A prompt typed while a turn runs is
 * queued: the queue is listed above the prompt line (`/queue`), `/withdraw N` takes one back,
 * `/steer TEXT` cuts into the running turn. Ctrl-C interrupts the turn; a second one clears
 * the queue too when prompts wait, else leaves (the session keeps running on the agent).
 * Resolves with the exit code.
 */
export class TerminalClient {
  private readonly rl: Interface;
  private readonly s: ReturnType<typeof styles>;
  private readonly queue: PermissionRequest[] = [];
  /** The session's standing rules, with who granted each (`/rules`, `/unallow N`). */
  private readonly rules: { rule: string; by: string; for: string }[] = [];
  private answers: Record<string, string> = {};
  /** The cursor is mid-line after streamed text. */
  private midLine = false;
  /** Text of the current assistant message already arrived as stream deltas. */
  private streamedText = false;
  private lastCtrlC = 0;
  /** tty only: readline's view of the terminal, and whether its prompt line is on screen now. */
  private readonly gate: GatedOutput | undefined;
  private promptShown = false;
  /** The uuids of prompts this client sent whose turn has not ended yet (nor were they withdrawn). */
  private readonly inFlight = new Set<string>();
  /** The session's queued prompts, in the order they will run (the last `queued` event). */
  private queued: QueuedPrompt[] = [];
  /** Members' display names by principal, learned from the attach answer and presence events. */
  private readonly names = new Map<string, string>();
  private inputClosed = false;
  private leaving = false;
  private leave: ((code: number) => void) | undefined;

  constructor(
    private readonly session: RemoteSession,
    private readonly opts: TerminalOptions,
  ) {
    this.s = styles(opts.tty);
    this.gate = opts.tty ? new GatedOutput(opts.output) : undefined;
    this.rl = createInterface({ input: opts.input, output: this.gate, terminal: opts.tty });
  }

  /**
   * Writes output. On a terminal the prompt line (with whatever is being typed) is erased
   * first and drawn again below once the output ends a line, so output that arrives while
   * someone types never mixes with their input.
   */
  private print(text: string): void {
    const out = this.opts.output;
    if (!this.gate) {
      out.write(text);
      return;
    }
    if (this.promptShown) out.write('\r\x1b[2K');
    this.promptShown = false;
    this.gate.open = false;
    out.write(text);
    if (text.endsWith('\n') && !this.leaving) this.drawPrompt();
  }

  private drawPrompt(): void {
    if (!this.gate) return;
    this.gate.open = true;
    this.rl.prompt(true);
    this.promptShown = true;
  }

  private line(text: string): void {
    if (this.midLine) this.print('\n');
    this.midLine = false;
    this.print(text + '\n');
  }

  /** How the transcript names a principal: its display name where one is known. */
  private person(principal: string): string {
    return this.names.get(principal) ?? principal;
  }

  private learnNames(members: readonly { principal: string; name?: string }[]): void {
    for (const m of members) if (m.name !== undefined) this.names.set(m.principal, m.name);
  }

  async run(): Promise<number> {
    const role = this.session.role === 'viewer' ? 'a viewer (read-only)' : `the ${this.session.role}`;
    this.line(
      this.s.dim(`* attached to session ${this.session.id} on ${this.session.info.agent} as ${role}; Ctrl-C interrupts, twice leaves`),
    );
    const done = new Promise<number>((resolve) => {
      this.leave = (code) => {
        this.leaving = true;
        resolve(code);
      };
    });
    this.rl.on('line', (text) => void this.onInput(text));
    this.rl.on('SIGINT', () => this.ctrlC());
    this.rl.on('close', () => {
      // Piped input ended: let the turns it started finish first.
      this.inputClosed = true;
      if (this.inFlight.size === 0) this.leave?.(0);
    });
    this.prompt();
    // Members' names before the first line that shows one: everyone's, asked for when the attach answer listed only some.
    const reading = this.session
      .members()
      .catch(() => this.session.info.clients)
      .then((members) => this.learnNames(members))
      .then(() => this.readStream())
      .then((code) => this.leave?.(code));
    const code = await done;
    this.rl.close();
    void reading;
    return code;
  }

  private prompt(): void {
    if (this.opts.tty && !this.midLine) this.drawPrompt();
  }

  private async readStream(): Promise<number> {
    try {
      for await (const item of this.session) this.render(item);
    } catch (err) {
      if (!this.leaving) this.line(this.s.red(`* stream ended: ${asTetherError(err).message}`));
      return 1;
    }
    return 0;
  }

  private render(item: SessionItem): void {
    if (item.kind === 'event') {
      if (item.event.subtype === 'presence') this.learnNames(presenceChanges(item.event));
      const text = describeEvent(item.event);
      if (text) this.line(this.s.dim(sanitize(text)));
      this.followRules(item.event);
      if (item.event.subtype === 'engine_error' && item.event.code === INPUT_REFUSED) this.turnOver([item.event.input_uuid]); // the agent refused a prompt: no turn comes
      if (item.event.subtype === 'queued') this.followQueue(item.event.prompts, item.event.change);
      if (item.event.subtype === 'engine_resumed' && item.event.interrupted_turn)
        this.turnOver([...this.inFlight].filter((u) => !this.queued.some((q) => q.uuid === u))); // the cut turn's result never comes; queued prompts still run
      // A queued prompt shows in the transcript when it starts (followQueue), not now.
      if (item.event.subtype === 'prompt' && item.event.principal !== this.opts.self && !item.event.queued) {
        const content = (item.event.message as { content?: unknown } | undefined)?.content;
        this.line(this.s.cyan(`${sanitize(this.person(item.event.principal))}> `) + oneLine(content, 400));
      }
      return;
    }
    if (item.kind === 'reply') return;
    const m = item.message;
    if (m.type === 'control_cancel_request') return this.withdraw(String(m.request_id));
    const ask = asPermissionRequest(m);
    if (ask) return this.enqueue(ask);
    const notice = engineNoticeText(m);
    if (notice) return this.line(this.s.red(`* ${sanitize(notice)}`));
    if (m.type === 'stream_event') {
      const e = m.event as { type?: string; delta?: { type?: string; text?: string } };
      if (e.type === 'content_block_delta' && e.delta?.type === 'text_delta' && e.delta.text) {
        this.print(sanitize(e.delta.text));
        this.streamedText = true;
        this.midLine = true;
      }
      return;
    }
    if (m.type === 'assistant') {
      for (const block of (m.message as { content?: Record<string, unknown>[] })?.content ?? []) {
        if (block.type === 'text' && !this.streamedText) this.line(sanitize(String(block.text)));
        else if (block.type === 'text' && this.midLine) this.line('');
        if (block.type === 'tool_use') this.toolCall(String(block.name), block.input as Record<string, unknown>);
      }
      this.streamedText = false;
      return;
    }
    if (m.type === 'user') {
      const content = (m.message as { content?: unknown })?.content;
      for (const block of Array.isArray(content) ? (content as Record<string, unknown>[]) : []) {
        if (block.type === 'tool_result') this.line(this.s.dim(`  ${block.is_error ? 'error' : 'result'}: ${oneLine(block.content)}`));
      }
      return;
    }
    if (m.type === 'result') {
      if (m.is_error === true) this.line(this.s.red(`* turn failed: ${oneLine(m.result ?? m.subtype)}`));
      const uuids = Array.isArray(m.user_message_uuids) ? (m.user_message_uuids as unknown[]) : [];
      // An engine that names no prompt on its result: the oldest of ours was answered.
      this.turnOver(uuids.length ? uuids : [...this.inFlight].slice(0, 1));
    }
  }

  /** A turn ended (its result), or prompts were refused or withdrawn before they started one. */
  private turnOver(uuids: unknown[]): void {
    for (const u of uuids) if (typeof u === 'string') this.inFlight.delete(u);
    if (this.inputClosed && this.inFlight.size === 0) this.leave?.(0);
    this.prompt();
  }

  /** The queue changed: a prompt that started is shown in the transcript; the queue is listed above the prompt line. */
  private followQueue(prompts: QueuedPrompt[], change: { action: string; uuids: string[] }): void {
    const before = this.queued;
    this.queued = prompts;
    if (change.action === 'started') {
      for (const p of before.filter((q) => change.uuids.includes(q.uuid)))
        this.line(this.s.cyan(`${sanitize(this.person(p.principal))}> `) + oneLine(queuedText(p), 400));
    }
    if (change.action === 'withdrawn' || change.action === 'cleared') this.turnOver(change.uuids.filter((u) => this.inFlight.has(u)));
    if (change.action !== 'started') this.listQueue(false);
  }

  /** The queued prompts, numbered for `/withdraw N`; `always`: say so when none wait. */
  private listQueue(always: boolean): void {
    if (!this.queued.length && always) this.line(this.s.dim('* no prompts are queued'));
    this.queued.forEach((p, i) => {
      const note = p.withdrawing ? ' (withdrawing)' : p.priority !== 'later' ? ` (${p.priority})` : '';
      this.line(this.s.dim(`  queued ${i + 1}. ${sanitize(this.person(p.principal))}: `) + oneLine(queuedText(p), 120) + this.s.dim(note));
    });
    this.prompt();
  }

  /** A tool call as people read it (client/tool-view.ts): `Bash: ls -la`, an edit's diff below. */
  private toolCall(name: string, input: Record<string, unknown> | undefined): void {
    this.line(toolLine(name, input, this.s));
    for (const l of diffLines(name, input, this.s)) this.line(l);
  }

  private enqueue(ask: PermissionRequest): void {
    if (this.session.role === 'viewer') {
      this.line(this.s.dim(`* waiting for a controller to answer: ${toolLine(ask.toolName, ask.input, styles(false))}`));
      return;
    }
    this.queue.push(ask);
    if (this.queue.length === 1) this.showHead();
  }

  private showHead(): void {
    const ask = this.queue[0];
    if (!ask) return this.prompt();
    this.answers = {};
    if (ask.toolName === 'AskUserQuestion') return this.showQuestion();
    const rule = proposedSessionRule(ask.raw);
    const always = rule ? ` / [a]lways allow ${rule.rules.map(ruleLabel).join(', ')} for this session` : '';
    this.line(this.s.bold(`Allow ${toolLine(ask.toolName, ask.input, styles(false))}? [y]es / [n]o${sanitize(always)}`));
    this.prompt();
  }

  private showQuestion(): void {
    const ask = this.queue[0];
    const q = askQuestions(ask.input)[Object.keys(this.answers).length];
    if (!q) return;
    this.line(this.s.bold(`? ${sanitize(q.question)}`));
    q.options.forEach((o, i) =>
      this.line(`  ${i + 1}. ${sanitize(o.label)}${o.description ? this.s.dim(` - ${sanitize(o.description)}`) : ''}`),
    );
    this.line(this.s.dim('  (a number, or type your own answer)'));
    this.prompt();
  }

  private withdraw(requestId: string): void {
    const i = this.queue.findIndex((q) => q.requestId === requestId);
    if (i < 0) return;
    this.queue.splice(i, 1);
    this.line(this.s.dim('* that prompt was answered elsewhere or withdrawn'));
    if (i === 0) this.showHead();
  }

  private async onInput(raw: string): Promise<void> {
    const text = raw.trim();
    const head = this.queue[0];
    try {
      if (head && head.toolName === 'AskUserQuestion') return await this.onAnswer(head, text);
      if (head) return await this.onPermission(head, text.toLowerCase());
      if (!text) return this.prompt();
      if (text === '/quit' || text === '/exit') return this.leave?.(0);
      if (this.session.role === 'viewer') return this.line(this.s.dim('* read-only: viewers cannot send prompts'));
      if (text === '/rules') return this.listRules();
      if (text === '/queue') return this.listQueue(true);
      if (text.startsWith('/model ')) await this.session.setModel(text.slice(7).trim());
      else if (text.startsWith('/unallow ')) await this.unallow(text.slice(9).trim());
      else if (text.startsWith('/owner ')) await this.handOver(text.slice(7).trim());
      else if (text.startsWith('/mode ')) await this.session.setPermissionMode(text.slice(6).trim());
      else if (text.startsWith('/withdraw ')) await this.withdrawQueued(text.slice(10).trim());
      else if (text.startsWith('/steer ')) await this.sendPrompt(text.slice(7).trim(), 'now');
      else await this.sendPrompt(text);
    } catch (err) {
      this.line(this.s.red(`* ${asTetherError(err).message}`));
      this.prompt();
    }
  }

  /** Sends a prompt (`now`: a steer); its turn, or its withdrawal, ends it. */
  private async sendPrompt(text: string, priority?: 'now'): Promise<void> {
    const uuid = randomUUID();
    this.inFlight.add(uuid);
    await this.session.send(text, { uuid, priority }).catch((err) => {
      this.inFlight.delete(uuid);
      throw err;
    });
  }

  /** `/withdraw N`: withdraws queued prompt N (the gateway lets only its author, or the owner). */
  private async withdrawQueued(arg: string): Promise<void> {
    const p = this.queued[Number(arg) - 1];
    if (!/^\d+$/.test(arg) || !p) {
      this.line(this.s.red(`* no queued prompt ${sanitize(arg)}: /queue lists them (1 to ${this.queued.length})`));
      return this.prompt();
    }
    await this.session.withdraw(p.uuid);
    this.prompt();
  }

  /** Keeps the standing rules list: granted by answers, withdrawn by `rule_withdrawn`. */
  private followRules(e: { subtype: string; [k: string]: unknown }): void {
    if (e.subtype === 'prompt_decided') {
      const by = String(e.decided_by);
      for (const r of grantedRules(e.updated_permissions).map(ruleLabel))
        if (!this.rules.some((s) => s.rule === r)) this.rules.push({ rule: r, by, for: grantedForText(e.granted_for, by) });
    } else if (e.subtype === 'rule_withdrawn') {
      const at = this.rules.findIndex((s) => s.rule === e.rule);
      if (at >= 0) this.rules.splice(at, 1);
    }
  }

  /** `/rules`: the standing rules, numbered for `/unallow N`. */
  private listRules(): void {
    if (!this.rules.length) this.line(this.s.dim('* no rules stand for this session'));
    this.rules.forEach((r, i) =>
      this.line(`  ${i + 1}. ${sanitize(r.rule)} ${this.s.dim(`(by ${sanitize(r.by)}, for ${sanitize(r.for)})`)}`),
    );
    this.prompt();
  }

  /** `/owner NAME`: hands the session to NAME (owner only; the gateway checks and audits it). */
  private async handOver(principal: string): Promise<void> {
    await this.session.setOwner(principal);
    this.line(this.s.dim(`* ${sanitize(principal)} owns this session now; you stay on as a controller`));
    this.prompt();
  }

  /** `/unallow N`: withdraws rule N (the gateway lets only the owner, or who granted it). */
  private async unallow(arg: string): Promise<void> {
    const r = this.rules[Number(arg) - 1];
    if (!/^\d+$/.test(arg) || !r) {
      this.line(this.s.red(`* no rule ${sanitize(arg)}: /rules lists them (1 to ${this.rules.length})`));
      return this.prompt();
    }
    await this.session.withdrawRule(r.rule);
    this.prompt();
  }

  private async onPermission(ask: PermissionRequest, reply: string): Promise<void> {
    if (reply === 'y' || reply === 'yes') return this.answer(ask, { behavior: 'allow', updatedInput: ask.input });
    // "always" grants only the rule the engine proposed for this call, for this session (none proposed: not offered).
    const rule = proposedSessionRule(ask.raw);
    if (rule && (reply === 'a' || reply === 'always'))
      return this.answer(ask, { behavior: 'allow', updatedInput: ask.input, updatedPermissions: [rule] });
    if (reply === 'n' || reply === 'no') return this.answer(ask, { behavior: 'deny', message: 'The user denied this tool call.' });
    this.line(rule ? 'please answer y, n or a' : 'please answer y or n');
  }

  private async onAnswer(ask: PermissionRequest, text: string): Promise<void> {
    const questions = askQuestions(ask.input);
    const q = questions[Object.keys(this.answers).length];
    const n = Number(text);
    this.answers[q.question] = Number.isInteger(n) && n >= 1 && n <= q.options.length ? q.options[n - 1].label : text;
    if (Object.keys(this.answers).length < questions.length) return this.showQuestion();
    await this.answer(ask, answerQuestions(ask.input, this.answers) as { behavior: 'allow'; updatedInput: Record<string, unknown> });
  }

  private async answer(ask: PermissionRequest, response: Parameters<RemoteSession['answer']>[1]): Promise<void> {
    if (this.queue[0] === ask) this.queue.shift();
    try {
      await this.session.answer(ask.requestId, response);
    } catch (err) {
      this.line(this.s.red(`* ${asTetherError(err).message}`));
    }
    this.showHead();
  }

  /**
   * Ctrl-C: interrupt the running turn. A second one soon after stops and clears the queue
   * when prompts wait (the stop says how many it cleared); otherwise (or while idle) it leaves.
   */
  ctrlC(): void {
    const now = Date.now();
    const again = now - this.lastCtrlC < DOUBLE_CTRL_C_MS;
    const busy = this.session.info.state === 'running' || this.session.info.state === 'requires_action';
    const waiting = this.queued.length;
    if (this.session.role === 'viewer' || (again && waiting === 0) || (!again && !busy)) {
      this.line(this.s.dim('* leaving; the session keeps running on the agent'));
      this.leave?.(130);
      return;
    }
    this.lastCtrlC = now;
    if (again) this.line(this.s.dim(`* stopping and clearing the queue (${waiting} waiting)`));
    else
      this.line(
        this.s.dim(
          waiting
            ? `* interrupting; the queued prompts (${waiting}) run next: Ctrl-C again to stop them too and clear the queue`
            : '* interrupting (Ctrl-C again to leave)',
        ),
      );
    this.session.interrupt({ clearQueue: again }).catch((err) => this.line(this.s.red(`* ${asTetherError(err).message}`)));
  }
}
