/** The transcript as a file: Markdown for people, JSON (every stream item) for programs. */
import { toolResultText, viewTool } from '../../tool-view.js';
import type { OpenSession } from './session';

export function transcriptMarkdown(s: OpenSession): string {
  const out: string[] = [`# Session ${s.id} on ${s.info.agent}`, ''];
  for (const e of s.transcript.entries) {
    if (e.kind === 'prompt')
      out.push(`**${e.principal}:** ${e.text}${e.images ? ` _(${e.images} image${e.images > 1 ? 's' : ''})_` : ''}`, '');
    else if (e.kind === 'text') out.push(e.text, '');
    else if (e.kind === 'thinking') out.push(`> _thinking:_ ${e.text.replace(/\n/g, ' ')}`, '');
    else if (e.kind === 'tool') {
      const v = viewTool(e.name, e.input);
      out.push(`- **${v.name}:** \`${v.summary.replace(/`/g, "'")}\``);
      if (e.result) out.push('', '```', toolResultText(e.result.content).slice(0, 4000), '```');
      out.push('');
    } else if (e.kind === 'permission') {
      const p = e.prompt;
      out.push(`- _permission for ${p.toolName}: ${p.status === 'decided' ? `${p.behavior} by ${p.decidedBy}` : p.status}_`, '');
    } else out.push(`_${e.text}_`, '');
  }
  return out.join('\n');
}

export function transcriptJson(s: OpenSession): string {
  return JSON.stringify({ session: s.info, items: s.items }, null, 2);
}

/** Offers a text as a download. */
export function download(name: string, text: string, type: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
