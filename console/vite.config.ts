import react from '@vitejs/plugin-react'
import { defineConfig } from 'vite'

// The service serves the build at /console/ (src/console/): hashed files under assets/ are
// cached for good, index.html is revalidated. No inline script or style is emitted, so the
// console runs under `script-src 'self'; style-src 'self'`.
export default defineConfig({
  base: '/console/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    target: 'es2022',
    assetsInlineLimit: 0,
    sourcemap: false,
    // dist/.vite/manifest.json: which chunks load first (test/console/console-build.test.ts
    // measures them against the budget). Never served: the service serves no dot-folder.
    manifest: true,
    // Reported by test/console/console-build.test.ts against the 250 KB budget.
    chunkSizeWarningLimit: 600,
  },
})
