import { readFileSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * `--help` (or `-h`) for a bench script: prints the script's opening block comment, its usage,
 * and exits before it starts anything. Acts only when `scriptUrl` (the caller's
 * `import.meta.url`) is the script node was started with, so a script imported by another
 * (web.mjs and lifecycle.mjs by run.mjs) leaves the help to the one that was run.
 */
export function helpAndExit(scriptUrl) {
  const args = process.argv.slice(2);
  if (!args.includes('--help') && !args.includes('-h')) return;
  const file = fileURLToPath(scriptUrl);
  if (!process.argv[1] || realpathSync(process.argv[1]) !== realpathSync(file)) return;
  const comment = /\/\*\*([\s\S]*?)\*\//.exec(readFileSync(file, 'utf8'))?.[1] ?? '';
  process.stdout.write(`${comment.replace(/^[ \t]*\* ?/gm, '').trim()}\n`);
  process.exit(0);
}
