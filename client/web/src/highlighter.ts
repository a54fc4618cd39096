/**
 * The code highlighter: highlight.js core with the languages people paste most. Its own chunk,
 * loaded by code-highlight.ts only when a code block is on screen (the page's budget, issue 28).
 */
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import css from 'highlight.js/lib/languages/css';
import diff from 'highlight.js/lib/languages/diff';
import go from 'highlight.js/lib/languages/go';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';

for (const [name, lang] of Object.entries({ bash, css, diff, go, javascript, json, python, rust, typescript, xml, yaml }))
  hljs.registerLanguage(name, lang);
hljs.registerAliases(['sh', 'shell', 'zsh', 'console'], { languageName: 'bash' });
hljs.registerAliases(['html', 'svg'], { languageName: 'xml' });
hljs.configure({ ignoreUnescapedHTML: true });

/**
 * Highlights one `<code>` in place: highlight.js reads its text and writes escaped spans. A
 * language it does not know is left plain (auto-detection over every language would be slow).
 */
export function highlightCode(code: HTMLElement): void {
  const lang = /\blanguage-(\S+)/.exec(code.className)?.[1];
  if (!lang || !hljs.getLanguage(lang)) return;
  hljs.highlightElement(code);
}
