// Reference for a tokenizer.json whose pre_tokenizer is Sequence [Split(regex, Isolated),
// ByteLevel(use_regex: false)] (Llama 3's and Qwen2's), over GPT-2's vocabulary: JavaScript's own
// Unicode regex cuts the text (each match, and the text between matches, a piece), and a BPE written
// here from GPT-2's description (the lowest-ranked pair merged everywhere, repeated) merges each
// piece. Optional: a Unicode normal form applied first (String.prototype.normalize; Qwen2's NFC),
// and ignore_merges (a piece that is a token is that token, as tiktoken does; Llama 3's).
//
//   node tests/ref/split_regex_encode.js <folder with encoder.json, vocab.bpe>
//        gpt2|llama3|qwen2 none|NFC|NFD|NFKC|NFKD merges|ignore-merges <texts.json>
//
// texts.json: a JSON array of strings. Prints a JSON array of id arrays, one per text.
// The gpt2 pattern lets the caller check this BPE against the npm package's encode().
'use strict';
const fs = require('fs');
const path = require('path');

const [folder, patternName, form, mergeMode, textsFile] = process.argv.slice(2);
const usage = 'usage: node split_regex_encode.js <vocab folder> gpt2|llama3|qwen2 ' +
    'none|NFC|NFD|NFKC|NFKD merges|ignore-merges <texts.json>';
if (!folder || !textsFile || !['merges', 'ignore-merges'].includes(mergeMode)) {
  console.error(usage);
  process.exit(2);
}

// Unicode's White_Space set, which is what \s means to Oniguruma (Hugging Face) and to Python's
// regex (GPT-2); JavaScript's \s lacks U+0085 and adds U+FEFF, so it is spelt out.
const WS = '\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
// Node 20 has no inline (?i:...), so the case-insensitive contractions are written as classes.
const CONTRACTIONS_ANY_CASE = "'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]";
const patterns = {
  gpt2: `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${WS}\\p{L}\\p{N}]+|[${WS}]+(?![^${WS}])|[${WS}]+`,
  llama3: `${CONTRACTIONS_ANY_CASE}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^${WS}\\p{L}\\p{N}]+[\\r\\n]*|` +
      `[${WS}]*[\\r\\n]+|[${WS}]+(?![^${WS}])|[${WS}]+`,
  qwen2: `${CONTRACTIONS_ANY_CASE}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^${WS}\\p{L}\\p{N}]+[\\r\\n]*|` +
      `[${WS}]*[\\r\\n]+|[${WS}]+(?![^${WS}])|[${WS}]+`,
};
if (!(patternName in patterns) || !['none', 'NFC', 'NFD', 'NFKC', 'NFKD'].includes(form)) {
  console.error(usage);
  process.exit(2);
}
const splitter = new RegExp(patterns[patternName], 'gu');

// GPT-2's byte-to-unicode table: printable Latin-1 bytes stand for themselves, the rest are
// shifted to 256 and up in byte order.
function byteToUnicode() {
  const keep = [];
  for (let b = 33; b <= 126; ++b) keep.push(b);
  for (let b = 161; b <= 172; ++b) keep.push(b);
  for (let b = 174; b <= 255; ++b) keep.push(b);
  const table = new Array(256);
  let extra = 0;
  for (let b = 0; b < 256; ++b)
    table[b] = String.fromCodePoint(keep.includes(b) ? b : 256 + extra++);
  return table;
}

const encoder = JSON.parse(fs.readFileSync(path.join(folder, 'encoder.json'), 'utf8'));
const rank = new Map();
fs.readFileSync(path.join(folder, 'vocab.bpe'), 'utf8').split('\n').forEach((line) => {
  const parts = line.split(' ');
  if (line.startsWith('#version') || parts.length !== 2) return;
  rank.set(parts[0] + ' ' + parts[1], rank.size);
});
const b2u = byteToUnicode();

function bpe(symbols) {
  while (symbols.length > 1) {
    let best = -1, bestRank = Infinity;
    for (let i = 0; i + 1 < symbols.length; ++i) {
      const r = rank.get(symbols[i] + ' ' + symbols[i + 1]);
      if (r !== undefined && r < bestRank) [best, bestRank] = [i, r];
    }
    if (best < 0) break;
    const [a, b] = [symbols[best], symbols[best + 1]];
    const merged = [];
    for (let i = 0; i < symbols.length; ++i) {
      if (i + 1 < symbols.length && symbols[i] === a && symbols[i + 1] === b) {
        merged.push(a + b);
        ++i;
      } else {
        merged.push(symbols[i]);
      }
    }
    symbols = merged;
  }
  return symbols;
}

function encodePiece(piece) {
  const symbols = Array.from(Buffer.from(piece, 'utf8'), (b) => b2u[b]);
  const whole = symbols.join('');
  if (mergeMode === 'ignore-merges' && Object.hasOwn(encoder, whole)) return [encoder[whole]];
  return bpe(symbols).map((s) => encoder[s]);
}

function encode(text) {
  if (form !== 'none') text = text.normalize(form);
  const ids = [];
  let last = 0;
  for (const m of text.matchAll(splitter)) {
    if (m[0].length === 0) continue;
    if (m.index > last) ids.push(...encodePiece(text.slice(last, m.index)));
    ids.push(...encodePiece(m[0]));
    last = m.index + m[0].length;
  }
  if (last < text.length) ids.push(...encodePiece(text.slice(last)));
  return ids;
}

const texts = JSON.parse(fs.readFileSync(textsFile, 'utf8'));
process.stdout.write(JSON.stringify(texts.map(encode)) + '\n');
