# syntax=docker/dockerfile:1
# One image for the gateway and the agent: `tether` is the entry point, the command picks the
# program (gateway, agent, token, ...). docs/deploy.md explains the compose file built on it.

# The image runs the current Node LTS (24); the code and the test suite are run on Node 20 too
# (package.json engines: >=20.20.0), see the README's Tests section.
ARG NODE_VERSION=24

# --- build: dev dependencies and the TypeScript compiler --------------------------------
FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` would build before the sources are here; we build below.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY bin ./bin
COPY core ./core
COPY gateway ./gateway
COPY agent ./agent
COPY client ./client
COPY proto ./proto
# The web page (client/web) is bundled by this script into dist/web.
COPY scripts/build-web.mjs ./scripts/build-web.mjs
RUN npm run build

# --- runtime: production dependencies, compiled output, a user without privileges --------
FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /opt/tether
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /src/dist ./dist
COPY proto ./proto
# The folders named volumes mount over are created here, owned by the tether user, so a new
# volume starts with that owner (the gateway's state; the agent's token; the agent's work).
RUN groupadd --system --gid 10001 tether \
 && useradd --system --uid 10001 --gid tether --home-dir /home/tether --create-home --shell /usr/sbin/nologin tether \
 && mkdir -p /var/lib/tether /var/lib/tether-agent /var/lib/tether-agent-key /workspace \
 && chown tether:tether /var/lib/tether /var/lib/tether-agent /var/lib/tether-agent-key /workspace \
 && chmod 0700 /var/lib/tether /var/lib/tether-agent /var/lib/tether-agent-key \
 && chmod 0755 dist/bin/tether.js \
 && ln -s /opt/tether/dist/bin/tether.js /usr/local/bin/tether
USER tether
ENV TETHER_STATE_DIR=/var/lib/tether
WORKDIR /workspace
# WebSocket + HTTP (/healthz, /readyz, /metrics), and gRPC.
EXPOSE 7800 7801
ENTRYPOINT ["tether"]
CMD ["--help"]
