# clapper's image: the compiled CLI run by the non-root user `node` (uid 1000) under tini, with a writable
# workspace at /work that holds a copy of the examples. Build: `docker build -t clapper .` (no `# syntax=`
# line, which would make BuildKit fetch a frontend image, and nothing that needs BuildKit).
#
# Base: Node 24 (LTS) on Debian 12 slim, the suite named so that a change of the tag's default suite never
# changes the image unnoticed. The CLI itself supports Node >= 20.19 (package.json `engines`).

# 1. Production dependencies. Only package.json and the lockfile enter this stage, so it (and the
#    node_modules layer of the final image) is rebuilt when they change, never for a source change.
#    --ignore-scripts: no production dependency has an install script, and `prepare` (the build) must not run.
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

# 2. The build: every dependency (TypeScript and esbuild are dev dependencies) installed before the sources
#    are copied, so a source change re-runs the build only. `npm run build` compiles, bundles the compiled CLI
#    into dist/cli/clapper.cjs and writes V8's code cache for it (clapper.cjs.cache) from a warm-up run of
#    bin/clapper.js: built here, by this image's Node, so that the runtime's Node (the same) accepts it; a
#    cache built by another Node would be rejected (the CLI still runs, compiling from source). The source
#    maps point into src/, which the image does not carry, so they are dropped.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY bin ./bin
COPY src ./src
RUN npm run build && find dist -name '*.map' -delete && test -s dist/cli/clapper.cjs.cache

# 3. The runtime.
FROM node:24-bookworm-slim
# tini as PID 1: a SIGTERM (docker stop) reaches node even in the first moments, before node has installed
# its handlers (node as PID 1 would ignore it, and docker stop would wait 10 s and kill); it also reaps
# zombies. -s keeps tini quiet when `docker run --init` puts another init in front of it.
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini ffmpeg \
  && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY bin ./bin
COPY jobs ./jobs
COPY templates ./templates
# /work, the working directory: a copy of jobs/ and templates/ and an empty output/, owned by `node`, so the
# README's relative commands (`plan jobs/demo.yaml`, `run jobs/demo.yaml --sandbox`) work as written and keep
# their state (jobs/.clapper/) and results (output/) there. A named volume mounted at /work starts as a copy
# of it; a bind mount of a checkout replaces it (run with --user "$(id -u):$(id -g)").
COPY --chown=node:node jobs /work/jobs
COPY --chown=node:node templates /work/templates
RUN mkdir -p /work/output \
  && chown node:node /work /work/output \
  && ln -s /app/bin/clapper.js /usr/local/bin/clapper
# Last, as the layer a source change replaces: the compiled CLI, its bundle and the bundle's code cache
# (root's, so never rewritten: a `node` with other V8 flags compiles the bundle from source instead).
COPY --from=build /app/dist ./dist
USER node
WORKDIR /work
EXPOSE 8787
# Healthy when no `clapper sandbox` runs in the container (a one-shot `run`, `plan`, ...: nothing to check,
# and a failing check would only mislabel it); when one does, healthy once GET /_sandbox/health answers 200
# on the sandbox's own --host/--port (0.0.0.0 and :: are asked on 127.0.0.1; --port 0 is not checked).
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 CMD ["node", "-e", "\
  const fs = require('fs'); \
  let a; \
  for (const p of fs.readdirSync('/proc')) { \
    if (!/^[0-9]+$/.test(p) || Number(p) === process.pid) continue; \
    let c; \
    try { c = fs.readFileSync('/proc/' + p + '/cmdline', 'utf8').split(String.fromCharCode(0)); } catch { continue; } \
    const i = c.findIndex((s) => ['clapper', 'clapper.js'].includes(s.split('/').pop())); \
    const j = i < 0 ? -1 : c.indexOf('sandbox', i + 1); \
    if (j > 0) { a = c.slice(j + 1); break; } \
  } \
  if (!a) process.exit(0); \
  const opt = (n, d) => { \
    for (let k = 0; k < a.length; k++) { \
      if (a[k] === '--' + n) return a[k + 1]; \
      if (a[k].startsWith('--' + n + '=')) return a[k].slice(n.length + 3); \
    } \
    return d; \
  }; \
  let host = opt('host', '127.0.0.1'); \
  const port = Number(opt('port', '8787')); \
  if (!port) process.exit(0); \
  if (['0.0.0.0', '::', ''].includes(host)) host = '127.0.0.1'; \
  require('http').get({ host, port, path: '/_sandbox/health', timeout: 4000 }, (r) => process.exit(r.statusCode === 200 ? 0 : 1)) \
    .on('timeout', () => process.exit(1)).on('error', () => process.exit(1)); \
"]
ENTRYPOINT ["/usr/bin/tini", "-s", "--", "node", "/app/bin/clapper.js"]
CMD ["--help"]

# What the image is, for registries and scanners (OCI annotations). Last in the stage, so that a new VERSION
# rebuilds no layer: `docker build --build-arg VERSION=0.1.0 -t clapper:0.1.0 .` (the version of package.json).
ARG VERSION=0.1.0
ARG SOURCE=https://github.com/clapperhq/clapper
LABEL org.opencontainers.image.title="clapper" \
  org.opencontainers.image.description="Batch pipeline for bulk AI media production: storyboard manifests to video and speech, budgeted, resumable, reported." \
  org.opencontainers.image.source="${SOURCE}" \
  org.opencontainers.image.licenses="MIT" \
  org.opencontainers.image.version="${VERSION}"
