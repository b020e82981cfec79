# Production image: the service on node:24-slim, dev dependencies left out.
FROM node:24-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# The image already has Node 24; the `node` package's install script need not fetch another.
RUN npm ci --omit=dev --ignore-scripts && npm cache clean --force

# The web console (console/): built here with its dev dependencies; only its static files go on.
FROM node:24-slim AS console
WORKDIR /app
COPY package.json package-lock.json ./
COPY console ./console
COPY scripts/console-build.ts ./scripts/
COPY src/console/console-files.ts ./src/console/
RUN npm ci --ignore-scripts --no-audit --no-fund && node scripts/console-build.ts

FROM node:24-slim
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080 KMS_DATA_DIR=/var/lib/kms
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
# src holds everything the service reads at run time: the code, the crypto pool's worker
# (src/crypto-pool/worker.ts) and the migrations (src/data/migrations); package.json gives the version.
# test/server/dockerfile.test.ts checks that every source exists and that these files are copied.
COPY package.json ./
COPY src ./src
# The console's built files, served at /console/ (src/console/console-files.ts reads them at start).
COPY --from=console /app/console/dist ./console/dist
RUN mkdir -p /var/lib/kms && chown node:node /var/lib/kms
# The data directory (the bootstrap key file; the embedded database when DATABASE_URL is unset) outlives
# the container. Declared after the chown: a build step's change to a declared volume is discarded.
VOLUME ["/var/lib/kms"]
USER node
EXPOSE 8080
# NODE_ENV=production: the service refuses to start without KMS_MASTER_KEY or KMS_MASTER_KEY_FILE,
# and DATABASE_URL should point at PostgreSQL. No tenant is created unless KMS_BOOTSTRAP=true; its
# key is then written to /var/lib/kms/bootstrap-api-key (mode 0600), never to the log.
HEALTHCHECK --interval=10s --timeout=3s CMD node -e "fetch('http://127.0.0.1:'+process.env.PORT+'/api/v1/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["node", "src/main.ts"]
