# canary-audit controller image: Node 20 + the built CLI (submit, status, cancel, report, and
# `worker --runner docker` when the host's Docker socket is mounted).
#   docker build -f docker/controller.Dockerfile -t canary-audit-controller:latest .
# The build context is the repository root.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
RUN npm ci --no-audit --no-fund
COPY src/ src/
COPY schemas/ schemas/
RUN npx tsc -p tsconfig.json && npm prune --omit=dev

FROM node:20-bookworm-slim
# git: provenance stamps name the commit when the source tree is a checkout (null otherwise).
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/*
# Docker client for `worker --runner docker` through a mounted /var/run/docker.sock: the static CLI
# of Docker 29, not Debian's docker.io 20.10 (API 1.41), which Docker Engine 29 refuses (minimum
# API 1.44). A current client negotiates down to older engines.
COPY --from=docker:29-cli /usr/local/bin/docker /usr/local/bin/docker
WORKDIR /app
COPY --from=build /app/node_modules node_modules/
COPY --from=build /app/dist dist/
COPY package.json ./
COPY schemas/ schemas/
# src/ is what provenance hashes (the code a reader can check out); configs/ holds example grids.
COPY src/ src/
COPY configs/ configs/
ENV NODE_ENV=production \
    CANARY_AUDIT_HOME=/artifacts \
    CANARY_AUDIT_LOG_FORMAT=json
VOLUME ["/artifacts"]
# Not root: compose runs it as CANARY_UID:CANARY_GID (plus the docker socket's group for workers);
# alone it runs as the image's node user.
USER node
ENTRYPOINT ["node", "/app/dist/cli/main.js"]
CMD ["--help"]
