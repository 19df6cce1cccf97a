// Oracle for prepare's JSON lines: what a JavaScript user of the npm gpt-3-encoder@1.1.4 package
// makes of a JSON lines file, independently of mptrain's decompression, JSON parser and shards.
//
//   node tests/data/encode_jsonl_npm.js <gpt-3-encoder folder> <file.jsonl or file.jsonl.gz> <field>
//
// The file is gunzipped by node's own zlib when its name ends in .gz; every non-blank line is
// JSON.parse'd and its text taken at <field> (a dotted path); the token stream llm.c's fineweb.py
// writes follows on stdout as one JSON array: for every record 50256 (<|endoftext|>), then
// encode(text).
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

const [pkgDir, file, field] = process.argv.slice(2);
if (!pkgDir || !file || !field) {
  console.error('usage: node encode_jsonl_npm.js <gpt-3-encoder folder> <file.jsonl[.gz]> <field>');
  process.exit(2);
}
const { encode } = require(path.resolve(pkgDir));
let bytes = fs.readFileSync(file);
if (file.endsWith('.gz')) bytes = zlib.gunzipSync(bytes);
const ids = [];
bytes.toString('utf8').split('\n').forEach((line, i) => {
  if (line.trim() === '') return;
  let at = JSON.parse(line);
  for (const name of field.split('.')) at = at[name];
  if (typeof at !== 'string') {
    console.error(`line ${i + 1}: no string at ${field}`);
    process.exit(1);
  }
  ids.push(50256);
  for (const id of encode(at)) ids.push(id);
});
process.stdout.write(JSON.stringify(ids) + '\n');
