#!/usr/bin/env node
// Measures the model without HTTP: load time, milliseconds per text at batch
// sizes 1, 32 and 200, and whether a text's vector depends on the batch it
// was embedded in. Texts come from the man-page corpus in
// testdata/eval/corpus (NAME lines and paragraphs).
//
//   node embed/localmodel/bench.mjs [--rounds 3] [--texts 200]

import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { loadEncoder } from './model.mjs';

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '3' }, texts: { type: 'string', default: '200' } },
  strict: true,
});
const rounds = Number(values.rounds);
const want = Number(values.texts);
if (!Number.isInteger(rounds) || rounds < 1 || !Number.isInteger(want) || want < 1) {
  console.error('bench.mjs: --rounds and --texts must be whole numbers of at least 1');
  process.exit(2);
}

const here = path.dirname(fileURLToPath(import.meta.url));
const corpus = path.join(here, '..', '..', 'testdata', 'eval', 'corpus', 'man');

async function corpusTexts() {
  const files = [];
  for (const section of (await readdir(corpus)).sort()) {
    for (const f of (await readdir(path.join(corpus, section))).sort()) {
      if (f.endsWith('.md')) files.push(path.join(corpus, section, f));
    }
  }
  const names = [];
  const paragraphs = [];
  for (const f of files) {
    const text = await readFile(f, 'utf8');
    const m = text.match(/^# NAME\n\s*(.+)$/m);
    if (m) names.push(m[1].trim());
    for (const p of text.split(/\n\s*\n/)) {
      const flat = p.replace(/\s+/g, ' ').trim();
      if (!flat.startsWith('#') && flat.split(' ').length >= 20) paragraphs.push(flat);
    }
  }
  return { names, paragraphs };
}

// Repeats the list until it has n texts (each repeat made distinct by a suffix).
function take(list, n) {
  const out = [];
  for (let i = 0; out.length < n; i++) {
    const base = list[i % list.length];
    out.push(i < list.length ? base : `${base} (${Math.floor(i / list.length)})`);
  }
  return out;
}

const t0 = performance.now();
const encoder = await loadEncoder();
await encoder.embedTokens([encoder.tokenize('ready')]);
const readyMs = performance.now();
const { names, paragraphs } = await corpusTexts();
const sets = {
  'NAME lines': take(names, want),
  paragraphs: take(paragraphs, want),
};

console.log(`backend ${encoder.info.backend}, simd ${encoder.info.simd}, threads ${encoder.info.threads}`);
console.log(`model load ${encoder.info.loadMs.toFixed(0)} ms; process start to first vector ${readyMs.toFixed(0)} ms (module import and load ${(readyMs - t0).toFixed(0)} ms)`);

const bits = (row) => Buffer.from(row.buffer, row.byteOffset, row.byteLength).toString('hex');

for (const [label, texts] of Object.entries(sets)) {
  const ids = texts.map((t) => encoder.tokenize(t));
  const lens = ids.map((x) => x.length).sort((a, b) => a - b);
  console.log(`\n${label}: ${texts.length} texts, tokens min ${lens[0]} median ${lens[lens.length >> 1]} max ${lens[lens.length - 1]}`);
  for (const grouped of [true, false]) {
    for (const bs of [1, 32, 200]) {
      let wall = Infinity;
      let cpu = Infinity;
      for (let r = 0; r < rounds; r++) {
        const start = performance.now();
        const used = process.cpuUsage();
        for (let i = 0; i < ids.length; i += bs) await encoder.embedTokens(ids.slice(i, i + bs), { grouped });
        const u = process.cpuUsage(used);
        wall = Math.min(wall, (performance.now() - start) / ids.length);
        cpu = Math.min(cpu, (u.user + u.system) / 1000 / ids.length);
      }
      console.log(`  ${grouped ? 'grouped by length' : 'mixed padding    '}  batch ${String(bs).padStart(3)}: ${wall.toFixed(2)} ms/text wall, ${cpu.toFixed(2)} ms/text CPU (best of ${rounds})`);
    }
  }
  // Determinism: every text alone, then inside batches of other texts.
  const alone = [];
  for (const x of ids) alone.push(bits((await encoder.embedTokens([x]))[0]));
  const again = [];
  for (const x of ids) again.push(bits((await encoder.embedTokens([x]))[0]));
  const reversed = ids.map((_, i) => ids.length - 1 - i);
  for (const grouped of [true, false]) {
    for (const bs of [2, 7, 32, 200]) {
      let differ = 0;
      for (let i = 0; i < reversed.length; i += bs) {
        const part = reversed.slice(i, i + bs);
        const rows = await encoder.embedTokens(part.map((j) => ids[j]), { grouped });
        part.forEach((j, k) => { if (bits(rows[k]) !== alone[j]) differ++; });
      }
      console.log(`  ${grouped ? 'grouped by length' : 'mixed padding    '}  batch ${String(bs).padStart(3)}: ${differ} of ${ids.length} vectors differ from the text embedded alone`);
    }
  }
  console.log(`  alone, twice: ${again.filter((b, i) => b !== alone[i]).length} of ${ids.length} vectors differ`);
}
