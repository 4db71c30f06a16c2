import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/**
 * The console's build (docs/console.md): Preact components in TypeScript, bundled into hashed
 * files under `static/`, which the api role serves as immutable. No inline script or style, so
 * the pages run under a strict Content-Security-Policy.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/',
  logLevel: 'warn',
  // Always the production build, whatever NODE_ENV says (the test runner sets `test`): no
  // development JSX, which would carry this checkout's file names into the bundle.
  mode: 'production',
  define: { 'process.env.NODE_ENV': JSON.stringify('production') },
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact', development: false } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsDir: 'static',
    // No data: URLs in the CSS or script: every asset is a file of its own.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    target: 'es2022',
    reportCompressedSize: false,
  },
});
