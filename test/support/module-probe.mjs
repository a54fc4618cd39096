// Preloaded into a program under test (NODE_OPTIONS=--import): appends to the file
// TETHER_MODULE_PROBE_FILE the URL of every module the program loads whose URL contains one
// of the comma-separated words of TETHER_MODULE_PROBE_MATCH, as it loads it (a loader hook, so ES modules are seen too).
import { register } from 'node:module';

if (process.env.TETHER_MODULE_PROBE_FILE) register('./module-probe-hooks.mjs', import.meta.url);
