#!/usr/bin/env python3
"""An independent BERT tokenizer (BasicTokenizer + WordPiece) in plain Python, written
from the description of google-research/bert's tokenization.py with the standard
library's unicodedata, so tests/data/test_wordpiece.cpp can hold mptrain's C++/ICU
tokenizer to it (Hugging Face's transformers is not installed here).

Usage: wordpiece_ref.py VOCAB INPUT OUTPUT [--cased] [--basic]
  INPUT: lines of text (bytes; each line decoded as UTF-8 with invalid bytes dropped);
  OUTPUT: one line of space-separated ids per input line (--basic: the words of the
  basic tokenizer instead, separated by spaces).
"""
import sys
import unicodedata


def is_whitespace(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_control(ch):
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf")


def is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


CJK = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
       (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


def is_cjk(ch):
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in CJK)


def basic_tokenize(text, lower):
    cleaned = []
    for ch in text:
        if ord(ch) == 0 or ord(ch) == 0xFFFD or is_control(ch):
            continue
        cleaned.append(" " if is_whitespace(ch) else ch)
    spaced = []
    for ch in cleaned:
        if is_cjk(ch):
            spaced += [" ", ch, " "]
        else:
            spaced.append(ch)
    words = []
    for token in "".join(spaced).split():
        if lower:
            token = token.lower()
            token = "".join(c for c in unicodedata.normalize("NFD", token) if unicodedata.category(c) != "Mn")
        pieces, current = [], []
        for ch in token:
            if is_punctuation(ch):
                if current:
                    pieces.append("".join(current))
                    current = []
                pieces.append(ch)
            else:
                current.append(ch)
        if current:
            pieces.append("".join(current))
        words += " ".join(pieces).split()
    return words


def wordpiece(word, vocab, unk, max_chars=100):
    if len(word) > max_chars:
        return [unk]
    out, start = [], 0
    while start < len(word):
        end, found = len(word), None
        while start < end:
            piece = ("##" if start > 0 else "") + word[start:end]
            if piece in vocab:
                found = vocab[piece]
                break
            end -= 1
        if found is None:
            return [unk]
        out.append(found)
        start = end
    return out


def main():
    vocab_path, input_path, output_path = sys.argv[1:4]
    lower = "--cased" not in sys.argv[4:]
    words_only = "--basic" in sys.argv[4:]
    with open(vocab_path, encoding="utf-8") as f:
        vocab = {line.rstrip("\n").rstrip("\r"): i for i, line in enumerate(f)}
    unk = vocab["[UNK]"]
    with open(input_path, "rb") as f:
        lines = f.read().split(b"\n")
    with open(output_path, "w", encoding="utf-8") as out:
        for raw in lines:
            text = raw.decode("utf-8", "ignore")
            if words_only:
                out.write(" ".join(basic_tokenize(text, lower)) + "\n")
                continue
            ids = []
            for w in basic_tokenize(text, lower):
                ids += wordpiece(w, vocab, unk)
            out.write(" ".join(map(str, ids)) + "\n")


if __name__ == "__main__":
    main()
