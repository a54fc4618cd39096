// Preloaded into a program under test (NODE_OPTIONS=--require): as it exits, appends how many
// modules of the OpenTelemetry SDK (any @opentelemetry package but the API, which prom-client
// loads on its own for exemplars) it loaded to the file TETHER_OTEL_PROBE_FILE names. Engines
// the agent starts carry no TETHER_* variable, so only Tether's own programs report.
const { appendFileSync } = require('node:fs');

const file = process.env.TETHER_OTEL_PROBE_FILE;
if (file)
  process.on('exit', () => {
    const sdk = Object.keys(require.cache).filter((path) => path.includes('/@opentelemetry/') && !path.includes('/@opentelemetry/api/'));
    appendFileSync(file, `${process.argv[2] ?? ''} ${sdk.length}\n`);
  });
