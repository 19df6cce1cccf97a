// The npm gpt-3-encoder@1.1.4 JavaScript encoder on the documents that
// `mptrain tokenize --bench` hands over, timed the same way: bytes in, ids out.
//
//   node bench/npm_encode.js <gpt-3-encoder folder> <documents file>
//
// The documents file is a sequence of (uint32 little-endian byte length, bytes).
// Each document is decoded as UTF-8 (WHATWG TextDecoder: invalid bytes -> U+FFFD,
// a leading BOM kept) and encoded with the package's encode(). Documents over 64 KB
// are encoded in parts cut at a lone "\n" between printable ASCII characters, where
// GPT-2's pattern always cuts (mptrain does the same for parallelism): the package
// appends each piece's ids with Array.concat, which is quadratic in the document length.
// Prints one JSON line: documents, bytes, tokens, seconds, node version.
'use strict';
const fs = require('fs');
const path = require('path');

const [pkgDir, docsFile] = process.argv.slice(2);
if (!pkgDir || !docsFile) {
  console.error('usage: node npm_encode.js <gpt-3-encoder folder> <documents file>');
  process.exit(2);
}
const { encode } = require(path.resolve(pkgDir));

const buf = fs.readFileSync(docsFile);
const docs = [];
for (let off = 0; off < buf.length;) {
  const len = buf.readUInt32LE(off);
  docs.push(buf.subarray(off + 4, off + 4 + len));
  off += 4 + len;
}

const kPart = 64 * 1024;
const printable = (c) => c > 0x20 && c < 0x7f;
function parts(bytes) {
  const out = [];
  let start = 0;
  while (bytes.length - start > kPart) {
    let cut = -1;
    for (let nl = bytes.indexOf(0x0a, start + kPart); nl !== -1 && nl + 1 < bytes.length;
      nl = bytes.indexOf(0x0a, nl + 1)) {
      if (printable(bytes[nl - 1]) && printable(bytes[nl + 1])) { cut = nl + 1; break; }
    }
    if (cut === -1) break;
    out.push(bytes.subarray(start, cut));
    start = cut;
  }
  out.push(bytes.subarray(start));
  return out;
}

const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
let tokens = 0, bytes = 0;
const t0 = process.hrtime.bigint();
for (const doc of docs) {
  bytes += doc.length;
  for (const part of parts(doc)) tokens += encode(decoder.decode(part)).length;
}
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(JSON.stringify({ documents: docs.length, bytes, tokens, seconds, node: process.version }));
