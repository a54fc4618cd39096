#!/usr/bin/env node
// A stand-in engine whose lines are not in JSON.stringify's form (see odd-json-lines.mjs):
// for each user message it writes one odd turn; a prompt containing "big" adds a ~16 MiB line.
import { oddTurn } from './odd-json-lines.mjs';
import { serveEngine } from './stand-in-engine.mjs';

serveEngine((prompt, write) => {
  for (const l of oddTurn(prompt, prompt.includes('big'))) write(l);
});
