// Oracle for the equivalence test: the npm gpt-3-encoder@1.1.4 JavaScript encoder on
// documents handed over by the C++ test.
//
//   node tests/data/encode_npm.js <gpt-3-encoder folder> <documents file>
//
// The documents file is a sequence of (uint32 little-endian byte length, bytes). Each
// document is decoded as UTF-8 the WHATWG way (TextDecoder: each maximal invalid
// subsequence -> U+FFFD, a leading BOM kept), which is what any JS caller of the
// package gets from bytes. For every document one JSON line is printed:
//   {"lens": [UTF-8 byte length of each piece], "ids": [[ids of each piece], ...]}
// The pieces come from the package's own pattern (copied verbatim from Encoder.js);
// each piece's ids from the package's encode(piece). So that per-piece encoding is
// not taken on trust, documents up to 64 KB are also encoded whole with encode(doc)
// and must give the concatenation (exit 1 otherwise). Longer documents are only
// encoded per piece: the package appends ids with Array.concat, quadratic in length.
'use strict';
const fs = require('fs');
const path = require('path');

const [pkgDir, docsFile] = process.argv.slice(2);
if (!pkgDir || !docsFile) {
  console.error('usage: node encode_npm.js <gpt-3-encoder folder> <documents file>');
  process.exit(2);
}
const { encode } = require(path.resolve(pkgDir));
const pat = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

const buf = fs.readFileSync(docsFile);
const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
const lines = [];
for (let off = 0, doc = 0; off < buf.length; ++doc) {
  const len = buf.readUInt32LE(off);
  const text = decoder.decode(buf.subarray(off + 4, off + 4 + len));
  off += 4 + len;
  const pieces = Array.from(text.matchAll(pat), (m) => m[0]);
  if (pieces.join('') !== text) {
    console.error(`document ${doc}: the pattern's matches do not cover the text`);
    process.exit(1);
  }
  const ids = pieces.map((p) => encode(p));
  if (len <= 64 * 1024) {
    const whole = encode(text);
    const flat = ids.flat();
    if (whole.length !== flat.length || whole.some((v, i) => v !== flat[i])) {
      console.error(`document ${doc}: encode(document) differs from encoding its pieces one by one`);
      process.exit(1);
    }
  }
  lines.push(JSON.stringify({ lens: pieces.map((p) => Buffer.byteLength(p, 'utf8')), ids }));
}
process.stdout.write(lines.join('\n') + (lines.length ? '\n' : ''));
