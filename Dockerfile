# Production image: the service on node:24-slim, dev dependencies left out.
FROM node:24-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# The image already has Node 24; the `node` package's install script need not fetch another.
RUN npm ci --omit=dev --ignore-scripts && npm cache clean --force

FROM node:24-slim
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080 KMS_DATA_DIR=/var/lib/kms
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY src ./src
COPY workers ./workers
RUN mkdir -p /var/lib/kms && chown node:node /var/lib/kms
USER node
EXPOSE 8080
# NODE_ENV=production: the service refuses to start without KMS_MASTER_KEY or KMS_MASTER_KEY_FILE,
# and DATABASE_URL should point at PostgreSQL.
HEALTHCHECK --interval=10s --timeout=3s CMD node -e "fetch('http://127.0.0.1:'+process.env.PORT+'/api/v1/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["node", "src/main.ts"]
