# syntax=docker/dockerfile:1
# Build stage: install everything, compile TypeScript, then keep production dependencies only.
FROM node:20-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY bin ./bin
RUN npm ci --no-audit --no-fund && npm prune --omit=dev

# Runtime stage: the compiled CLI, a non-root user, clapper as the entrypoint.
FROM node:20-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY bin ./bin
COPY jobs ./jobs
COPY templates ./templates
RUN mkdir -p /work && chown node:node /work
USER node
WORKDIR /work
ENTRYPOINT ["node", "/app/bin/clapper.js"]
CMD ["--help"]
