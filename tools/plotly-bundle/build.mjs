// Bundles index.js into a minified partial plotly.js, the way plotly.js 4.x builds its own dist
// bundles (esbuild-config.js + tasks/partial_bundle.mjs + tasks/util/bundle_wrapper.mjs):
// an IIFE with global `Plotly`, target es2016, GLSL shaders inlined and minified, `regl` aliased
// to `@plotly/regl`, attribute meta (descriptions) stripped, the same UMD wrapper and licence header.
// Usage: node build.mjs <outfile>   (run from a directory where `npm ci` has been run)
import { readFile, writeFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { build } from 'esbuild';
import { glsl } from 'esbuild-plugin-glsl';

const require = createRequire(import.meta.url);
const here = path.dirname(new URL(import.meta.url).pathname);
const outfile = path.resolve(process.argv[2] || 'plotly-partial.min.js');
const version = require('plotly.js/package.json').version;
const TRACES = ['scatter', 'bar', 'heatmap'];

// plotly.js strips attribute meta (human-readable docs used only by Plotly.PlotSchema) from its
// dist bundles; same fields here, matched as whole string literals rather than to the end of line.
const STR = String.raw`(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")`;
const META = [
    String.raw`description: ${STR}`,
    String.raw`description: \[[\s\S]*?\]\.join\([^)]*\)`,
    String.raw`(?:requiredOpts|otherOpts): \[[^\]]*\]`,
    String.raw`(?:role|hrName): ${STR}`,
].map((re) => new RegExp(String.raw`\s*` + re + ',?', 'g'));

const stripMeta = {
    name: 'plotly-strip-meta',
    setup(b) {
        b.onLoad({ filter: /[\\/]plotly\.js[\\/]src[\\/].*\.js$/ }, async (args) => {
            let code = await readFile(args.path, 'utf8');
            for (const re of META) code = code.replace(re, '');
            return { contents: code, loader: 'js' };
        });
    },
};

// src/registry.js requires maplibre-gl's stylesheet when a `map` subplot registers; none does
// here, so resolve it to an empty module instead of inlining ~70 kB of dead CSS.
const noMaplibreCss = {
    name: 'no-maplibre-css',
    setup(b) {
        b.onResolve({ filter: /^maplibre-gl\/dist\/maplibre-gl\.css$/ }, () => ({ path: 'maplibre-css', namespace: 'empty' }));
        b.onLoad({ filter: /.*/, namespace: 'empty' }, () => ({ contents: '', loader: 'js' }));
    },
};

const tmp = outfile + '.tmp';
const result = await build({
    entryPoints: [path.join(here, 'index.js')],
    outfile: tmp,
    format: 'iife',
    globalName: 'Plotly',
    bundle: true,
    minify: true,
    sourcemap: false,
    target: 'es2016',
    plugins: [glsl({ minify: true }), stripMeta, noMaplibreCss],
    alias: { regl: '@plotly/regl' },
    define: { global: 'window', 'define.amd': 'false', 'process.env.NODE_DEBUG': 'false' },
    logLevel: 'warning',
    metafile: true,
});

const inputs = Object.keys(result.metafile.inputs);
const traceDirs = new Set(inputs.map((p) => (p.match(/plotly\.js\/src\/traces\/([^/]+)\//) || [])[1]).filter(Boolean));
const extra = [...traceDirs].filter((t) => !TRACES.includes(t));
if (!TRACES.every((t) => traceDirs.has(t))) throw new Error('missing trace modules: ' + TRACES.filter((t) => !traceDirs.has(t)));

const header = [
    '/**',
    `* plotly.js (orchestrace partial: ${TRACES.join(', ')} - minified) v${version}`,
    '* Copyright 2012-2026, Plotly, Inc.',
    '* All rights reserved.',
    '* Licensed under the MIT license',
    '*/',
    '',
].join('\n');
// Same wrapper as plotly.js's dist bundles (so the file is a drop-in for plotly.min.js).
const open = [
    '(',
    ' function(root, factory) {',
    '  if (typeof module === "object" && module.exports) {',
    '   module.exports = factory();',
    '  } else {',
    '   root.moduleName = factory();',
    '  }',
    '} (typeof self !== "undefined" ? self : this, () => {',
    '',
].join('\n');
const close = ['', 'window.Plotly = Plotly;', 'return Plotly;', '}));', ''].join('\n');

const body = await readFile(tmp, 'utf8');
const text = header + open + body + close;
await writeFile(outfile, text);
await rm(tmp, { force: true });
console.log(`wrote ${outfile} (${Buffer.byteLength(text)} bytes; plotly.js v${version};`
    + ` trace modules: ${[...traceDirs].sort().join(', ')}${extra.length ? ' (pulled in by those: ' + extra.join(', ') + ')' : ''})`);
