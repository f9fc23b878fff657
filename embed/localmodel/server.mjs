#!/usr/bin/env node
// A local embedding server for Cordon's tests and evaluations: Universal
// Sentence Encoder lite (512 dimensions) behind the request and response
// shapes of OpenAI, Ollama, text-embeddings-inference and Cohere-style
// rerank APIs. It listens on 127.0.0.1 only and never opens an outbound
// connection. See README.md.
//
//   node server.mjs --port 0        # prints "listening on http://127.0.0.1:PORT" when ready

import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';

import { DIMS, loadEncoder } from './model.mjs';

// Anything a dependency logs goes to stderr: stdout carries only the
// "listening on" line that callers wait for.
console.log = console.error;
console.info = console.error;
console.warn = console.error;

const USAGE = `usage: node server.mjs [flags]

  --port N             port on 127.0.0.1 (0: any free port; default 0)
  --model-name NAME    the model name requests must give (default use-lite)
  --max-batch N        most texts (or rerank documents) in one request (default 256)
  --max-tokens N       most tokens per text (default 512)
  --max-body-bytes N   largest request body (default 8388608)
  --delay-ms N         sleep N ms after reading each POST body, before answering (fault injection; default 0)
  --exit-with-stdin    exit when standard input closes (so a parent that dies takes the server with it)
`;

function fail(message) {
  process.stderr.write(`server.mjs: ${message}\n\n${USAGE}`);
  process.exit(2);
}

function intFlag(values, name, def, min, max) {
  const raw = values[name];
  if (raw === undefined) return def;
  if (!/^[0-9]+$/.test(raw)) fail(`--${name} must be a whole number, got ${JSON.stringify(raw)}`);
  const n = Number(raw);
  if (n < min || n > max) fail(`--${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

let parsed;
try {
  parsed = parseArgs({
    options: {
      port: { type: 'string' },
      'model-name': { type: 'string' },
      'max-batch': { type: 'string' },
      'max-tokens': { type: 'string' },
      'max-body-bytes': { type: 'string' },
      'delay-ms': { type: 'string' },
      'exit-with-stdin': { type: 'boolean' },
      help: { type: 'boolean' },
    },
    strict: true,
    allowPositionals: false,
  });
} catch (err) {
  fail(err.message);
}
if (parsed.values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const config = {
  port: intFlag(parsed.values, 'port', 0, 0, 65535),
  modelName: parsed.values['model-name'] ?? 'use-lite',
  maxBatch: intFlag(parsed.values, 'max-batch', 256, 1, 100000),
  maxTokens: intFlag(parsed.values, 'max-tokens', 512, 1, 100000),
  maxBodyBytes: intFlag(parsed.values, 'max-body-bytes', 8 << 20, 1024, 1 << 30),
  delayMs: intFlag(parsed.values, 'delay-ms', 0, 0, 3600000),
};
if (config.modelName === '' || /\s/.test(config.modelName)) {
  fail(`--model-name must be a non-empty name without spaces, got ${JSON.stringify(config.modelName)}`);
}

// ---- errors, in the shape each API family uses ----

class HTTPError extends Error {
  constructor(status, message, code = null) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const bad = (message) => new HTTPError(400, message);
const tooLarge = (message) => new HTTPError(413, message);

const errorBody = {
  openai: (e) => ({
    error: {
      message: e.message,
      type: 'invalid_request_error',
      param: null,
      code: e.code,
    },
  }),
  ollama: (e) => ({ error: e.message }),
  tei: (e) => ({ error: e.message, error_type: e.status >= 500 ? 'Backend' : 'Validation' }),
  cohere: (e) => ({ message: e.message }),
  plain: (e) => ({ error: e.message }),
};

// ---- request validation ----

function checkObject(body, allowed) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw bad('the request body must be a JSON object');
  }
  for (const key of Object.keys(body)) {
    if (!allowed.includes(key)) {
      throw bad(`unknown field ${JSON.stringify(key)}; accepted fields: ${allowed.join(', ')}`);
    }
  }
}

function requireString(body, field) {
  const v = body[field];
  if (v === undefined) throw bad(`missing field "${field}" (a string)`);
  if (typeof v !== 'string') throw bad(`"${field}" must be a string, got ${typeName(v)}`);
  return v;
}

function optionalBool(body, field, def) {
  const v = body[field];
  if (v === undefined) return def;
  if (typeof v !== 'boolean') throw bad(`"${field}" must be true or false, got ${typeName(v)}`);
  return v;
}

function typeName(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v === 'object' ? 'an object' : `a ${typeof v}`;
}

// Texts from a field that holds a string or an array of strings.
function textList(body, field, { allowSingle = true } = {}) {
  const v = body[field];
  const want = allowSingle ? 'a string or an array of strings' : 'an array of strings';
  if (v === undefined) throw bad(`missing field "${field}" (${want})`);
  let texts;
  if (typeof v === 'string' && allowSingle) texts = [v];
  else if (Array.isArray(v)) texts = v;
  else throw bad(`"${field}" must be ${want}, got ${typeName(v)}`);
  if (texts.length === 0) throw bad(`"${field}" is empty; give at least one text`);
  if (texts.length > config.maxBatch) {
    throw tooLarge(`"${field}" has ${texts.length} texts; at most ${config.maxBatch} per request (split the batch)`);
  }
  texts.forEach((t, i) => {
    if (typeof t !== 'string') throw bad(`"${field}"[${i}] must be a string, got ${typeName(t)}`);
    if (t.length === 0) throw bad(`"${field}"[${i}] is an empty string; every text needs at least one character`);
  });
  return texts;
}

function checkModel(body, field, notFound) {
  const name = requireString(body, field);
  if (name !== config.modelName) throw new HTTPError(404, notFound(name), 'model_not_found');
  return name;
}

// Tokenizes texts; a text over maxTokens is truncated when the request
// allows it (direction "right" keeps the start), otherwise rejected.
function tokenizeAll(texts, what, { truncate = false, direction = 'right' } = {}) {
  return texts.map((t, i) => {
    const ids = encoder.tokenize(t);
    if (ids.length === 0) throw bad(`${what}[${i}] has no tokens`);
    if (ids.length <= config.maxTokens) return ids;
    if (!truncate) {
      throw bad(`${what}[${i}] has ${ids.length} tokens; the limit is ${config.maxTokens} (shorten it, or ask for truncation)`);
    }
    return direction === 'left' ? ids.slice(ids.length - config.maxTokens) : ids.slice(0, config.maxTokens);
  });
}

const count = (lists) => lists.reduce((n, ids) => n + ids.length, 0);
const vec = (row) => Array.from(row);

function cosine(a, b) {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return dot / (Math.sqrt(na) * Math.sqrt(nb));
}

function normalized(row) {
  let sum = 0;
  for (const v of row) sum += v * v;
  const norm = Math.sqrt(sum);
  return Float32Array.from(row, (v) => v / norm);
}

// Scores every document against the query; sorted by score descending,
// ties by index ascending.
async function rank(queryIds, docIds) {
  const rows = await encoder.embedTokens([queryIds, ...docIds]);
  const q = rows[0];
  return rows
    .slice(1)
    .map((row, index) => ({ index, score: cosine(q, row) }))
    .sort((a, b) => b.score - a.score || a.index - b.index);
}

// ---- endpoints ----

async function openaiEmbeddings(body) {
  checkObject(body, ['model', 'input', 'encoding_format', 'user']);
  const model = checkModel(body, 'model', (m) => `The model \`${m}\` does not exist or you do not have access to it. This server serves "${config.modelName}".`);
  const texts = textList(body, 'input');
  if (body.encoding_format !== undefined && body.encoding_format !== 'float') {
    throw bad(`"encoding_format" must be "float" (the only format this server returns), got ${JSON.stringify(body.encoding_format)}`);
  }
  if (body.user !== undefined && typeof body.user !== 'string') throw bad(`"user" must be a string, got ${typeName(body.user)}`);
  const ids = tokenizeAll(texts, 'input');
  const rows = await encoder.embedTokens(ids);
  const tokens = count(ids);
  return {
    object: 'list',
    data: rows.map((row, index) => ({ object: 'embedding', index, embedding: vec(row) })),
    model,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}

async function ollamaEmbed(body) {
  checkObject(body, ['model', 'input', 'truncate', 'keep_alive']);
  const model = requireString(body, 'model');
  // Ollama names carry a tag; an untagged name means ":latest".
  if (model !== config.modelName && model !== `${config.modelName}:latest`) {
    throw new HTTPError(404, `model "${model}" not found, try pulling it first (this server serves "${config.modelName}")`);
  }
  const texts = textList(body, 'input');
  const truncate = optionalBool(body, 'truncate', true);
  if (body.keep_alive !== undefined && typeof body.keep_alive !== 'string' && typeof body.keep_alive !== 'number') {
    throw bad(`"keep_alive" must be a duration string or a number of seconds, got ${typeName(body.keep_alive)}`);
  }
  const started = process.hrtime.bigint();
  const ids = tokenizeAll(texts, 'input', { truncate });
  const rows = await encoder.embedTokens(ids);
  return {
    model,
    embeddings: rows.map(vec),
    total_duration: Number(process.hrtime.bigint() - started),
    load_duration: 0,
    prompt_eval_count: count(ids),
  };
}

function teiTruncation(body) {
  const truncate = optionalBool(body, 'truncate', false);
  const dir = body.truncation_direction;
  if (dir !== undefined && dir !== 'Right' && dir !== 'Left') {
    throw bad(`"truncation_direction" must be "Right" or "Left", got ${JSON.stringify(dir)}`);
  }
  return { truncate, direction: dir === 'Left' ? 'left' : 'right' };
}

async function teiEmbed(body) {
  checkObject(body, ['inputs', 'normalize', 'truncate', 'truncation_direction']);
  const texts = textList(body, 'inputs');
  const normalize = optionalBool(body, 'normalize', true);
  const ids = tokenizeAll(texts, 'inputs', teiTruncation(body));
  const rows = await encoder.embedTokens(ids);
  return rows.map((row) => vec(normalize ? normalized(row) : row));
}

async function teiRerank(body) {
  checkObject(body, ['query', 'texts', 'raw_scores', 'return_text', 'truncate', 'truncation_direction']);
  const query = requireString(body, 'query');
  if (query.length === 0) throw bad('"query" is an empty string');
  const texts = textList(body, 'texts', { allowSingle: false });
  optionalBool(body, 'raw_scores', false); // the score is a cosine either way
  const returnText = optionalBool(body, 'return_text', false);
  const trunc = teiTruncation(body);
  const [queryIds] = tokenizeAll([query], 'query', trunc);
  const ranked = await rank(queryIds, tokenizeAll(texts, 'texts', trunc));
  return ranked.map(({ index, score }) => (returnText ? { index, text: texts[index], score } : { index, score }));
}

async function cohereRerank(body) {
  checkObject(body, ['model', 'query', 'documents', 'top_n', 'return_documents']);
  const model = checkModel(body, 'model', (m) => `model '${m}' not found; this server serves "${config.modelName}"`);
  const query = requireString(body, 'query');
  if (query.length === 0) throw bad('"query" is an empty string');
  const docs = textList(body, 'documents', { allowSingle: false });
  let topN = docs.length;
  if (body.top_n !== undefined) {
    if (!Number.isInteger(body.top_n) || body.top_n < 1) {
      throw bad(`"top_n" must be a whole number of at least 1, got ${JSON.stringify(body.top_n)}`);
    }
    topN = Math.min(body.top_n, docs.length);
  }
  const returnDocs = optionalBool(body, 'return_documents', false);
  // Cohere truncates long documents rather than rejecting them.
  const docIds = tokenizeAll(docs, 'documents', { truncate: true });
  const [queryIds] = tokenizeAll([query], 'query');
  const ranked = (await rank(queryIds, docIds)).slice(0, topN);
  return {
    id: randomUUID(),
    model,
    results: ranked.map(({ index, score }) =>
      returnDocs ? { index, relevance_score: score, document: { text: docs[index] } } : { index, relevance_score: score }),
    usage: { total_tokens: queryIds.length + count(docIds) },
    meta: { api_version: { version: '2' }, billed_units: { search_units: 1 } },
  };
}

const routes = {
  '/v1/embeddings': { family: 'openai', handler: openaiEmbeddings },
  '/api/embed': { family: 'ollama', handler: ollamaEmbed },
  '/embed': { family: 'tei', handler: teiEmbed },
  '/rerank': { family: 'tei', handler: teiRerank },
  '/v2/rerank': { family: 'cohere', handler: cohereRerank },
};

// ---- HTTP ----

function send(res, status, body, headers = {}) {
  const data = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(data),
    ...headers,
  });
  res.end(data);
}

// Reads the body. Past maxBodyBytes it reads the rest without keeping it,
// then rejects with 413: answering before the client has sent everything
// would break the client's write instead of giving it the 413.
function readBody(req) {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    let over = Number.isFinite(declared) && declared > config.maxBodyBytes;
    const chunks = [];
    let size = 0;
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > config.maxBodyBytes) over = true;
      if (over) chunks.length = 0;
      else chunks.push(chunk);
    });
    req.on('end', () => {
      if (over) {
        reject(tooLarge(`the request body has ${size} bytes; at most ${config.maxBodyBytes} are accepted (send fewer texts per request)`));
      } else {
        resolve(Buffer.concat(chunks));
      }
    });
    req.on('error', reject);
  });
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function handle(req, res) {
  const path = new URL(req.url, 'http://127.0.0.1').pathname;
  if (path === '/health') {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(res, 405, errorBody.plain(new HTTPError(405, `${req.method} ${path} is not supported; use GET`)), { Allow: 'GET, HEAD' });
      return;
    }
    send(res, 200, { status: 'ok', model: config.modelName, dims: DIMS });
    return;
  }
  const route = routes[path];
  if (!route) {
    const known = ['GET /health', ...Object.keys(routes).map((p) => `POST ${p}`)].join(', ');
    send(res, 404, errorBody.plain(new HTTPError(404, `no endpoint ${path}; endpoints: ${known}`)));
    req.resume();
    return;
  }
  const format = errorBody[route.family];
  try {
    if (req.method !== 'POST') {
      req.resume();
      send(res, 405, format(new HTTPError(405, `${req.method} ${path} is not supported; use POST`)), { Allow: 'POST' });
      return;
    }
    const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
    if (type !== 'application/json') {
      req.resume();
      throw new HTTPError(415, `Content-Type must be application/json, got ${JSON.stringify(req.headers['content-type'] ?? '')}`);
    }
    const raw = await readBody(req);
    if (config.delayMs > 0) await sleep(config.delayMs);
    let text;
    try {
      text = utf8.decode(raw);
    } catch {
      throw bad('the request body is not valid UTF-8');
    }
    let body;
    try {
      body = JSON.parse(text);
    } catch (err) {
      throw bad(`the request body is not valid JSON: ${err.message}`);
    }
    send(res, 200, await route.handler(body));
  } catch (err) {
    if (err instanceof HTTPError) {
      send(res, err.status, format(err));
      return;
    }
    process.stderr.write(`server.mjs: ${req.method} ${path}: ${err.stack ?? err}\n`);
    send(res, 500, format(new HTTPError(500, `internal error: ${err.message}`)));
  }
}

if (parsed.values['exit-with-stdin']) {
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('close', () => process.exit(0));
  process.stdin.resume();
}
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));

const encoder = await loadEncoder();
// One inference before reporting ready: it checks the model end to end and
// takes the first-call setup out of the first request.
await encoder.embedTokens([encoder.tokenize('ready')]);
process.stderr.write(
  `server.mjs: ${config.modelName} (Universal Sentence Encoder lite, ${DIMS} dims) loaded in ${encoder.info.loadMs.toFixed(0)} ms; ` +
    `backend ${encoder.info.backend}, simd ${encoder.info.simd}, threads ${encoder.info.threads}\n`,
);

const server = http.createServer((req, res) => {
  handle(req, res).catch((err) => {
    process.stderr.write(`server.mjs: ${err.stack ?? err}\n`);
    if (!res.headersSent) send(res, 500, { error: 'internal error' });
  });
});
server.on('error', (err) => {
  process.stderr.write(`server.mjs: listen on 127.0.0.1:${config.port}: ${err.message}\n`);
  process.exit(1);
});
server.listen(config.port, '127.0.0.1', () => {
  process.stdout.write(`listening on http://127.0.0.1:${server.address().port}\n`);
});
