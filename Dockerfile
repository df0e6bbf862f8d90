# One image for every service: SERVICES chooses what a container runs (README "Operations").
#   docker build -t ci-platform:0.1.0 .
#   docker run -e SERVICES=api-gateway -e TRANSPORTER=nats://nats:4222 ... ci-platform:0.1.0
ARG NODE_IMAGE=node:20-bookworm-slim

# Compiles TypeScript to dist/ with the dev dependencies (typescript), which stay in this stage.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json index.ts moleculer.config.ts ./
COPY lib ./lib
COPY middlewares ./middlewares
COPY mixins ./mixins
COPY services ./services
COPY types ./types
# The web console's static files: npm run build copies them to dist/console.
COPY console ./console
RUN npm run build

# Production dependencies only.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM ${NODE_IMAGE} AS runtime
# dbaas's snapshots run pg_dump / pg_restore of the tenant server's major version (compose runs
# postgres:16): PostgreSQL's own apt repository has every major, Debian's only 15.
# An empty PG_CLIENT_MAJOR builds without them (a build with no network: dbaas then answers
# snapshots and branches 503 and says why at start).
ARG PG_CLIENT_MAJOR=16
RUN if [ -n "$PG_CLIENT_MAJOR" ]; then \
    apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends postgresql-common ca-certificates \
    && /usr/share/postgresql-common/pgdg/apt.postgresql.org.sh -y >/dev/null \
    && apt-get install -y -qq --no-install-recommends postgresql-client-${PG_CLIENT_MAJOR} \
    && rm -rf /var/lib/apt/lists/*; \
  fi
ENV NODE_ENV=production \
    LOG_FORMAT=json \
    PORT=3000 \
    HEALTH_PORT=3001 \
    METRICS_PORT=3030
WORKDIR /app
# Owned by root and read-only to the process: it runs as `node` (uid 1000) and writes only to /tmp.
COPY package.json ./
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# gpu-node keeps job output here (a volume in compose, a hostPath on Kubernetes); dbaas its
# snapshots (a volume in compose, a PersistentVolumeClaim on Kubernetes).
RUN mkdir -p /var/lib/ci-platform/jobs /var/lib/ci-platform/snapshots \
 && chown node:node /var/lib/ci-platform/jobs /var/lib/ci-platform/snapshots
USER node
EXPOSE 3000 3001 3030
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.HEALTH_PORT||3001)+'/ready').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# node is PID 1 and handles SIGTERM itself (lib/shutdown.ts): drain, then exit 0.
CMD ["node", "dist/index.js"]
