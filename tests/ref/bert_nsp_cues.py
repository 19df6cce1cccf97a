#!/usr/bin/python3
"""How much of next-sentence prediction an instance file gives away without reading for meaning:
a logistic regression on surface features of (A, B), fit on the training instances and scored on
the held-out ones. A BERT that stalls near this accuracy has learnt the surface cues and nothing
more (docs/BERT.md, "NSP on fortunes").

    /usr/bin/python3 tests/ref/bert_nsp_cues.py TRAIN.bert VAL.bert

Features: B starts with "--" (a fortune's attribution line), content words (4+ characters, whole
words) shared by A and B, the lengths of A, B and the pair, whether A or B starts mid-word (cut by
truncation), and the 50 most frequent first tokens of B and last tokens of A. Also prints the
share of each label that the cues separate most (attribution B, shared words).
"""

import os
import sys
from collections import Counter

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from bert_nsp_train import read_instances  # noqa: E402


def vocab_of(path):
    import struct
    b = open(path, "rb").read()
    vocab_bytes = struct.unpack_from("<Q", b, 40)[0]
    return b[256:256 + vocab_bytes].decode().split("\n")


def pairs(d):
    for t in d["inst"]:
        s = int(np.nonzero(t == d["sep"])[0][0])
        yield list(t[1:s]), list(t[s + 1:-1]), len(t)


def features(d, vocab, first_tokens, last_tokens):
    dash = vocab.index("-")
    content = lambda seg: {w for w in seg if len(vocab[w]) > 3 and not vocab[w].startswith("##")}  # noqa: E731
    X = []
    for a, b, n in pairs(d):
        f = [1.0, float(len(b) >= 2 and b[0] == dash and b[1] == dash), len(content(a) & content(b)), len(a) / n,
             len(b) / n, n / d["T"], float(vocab[b[0]].startswith("##")), float(vocab[a[0]].startswith("##"))]
        f += [float(b[0] == w) for w in first_tokens] + [float(a[-1] == w) for w in last_tokens]
        X.append(f)
    return np.array(X, np.float64)


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    tr, va = read_instances(argv[0]), read_instances(argv[1])
    vocab = vocab_of(argv[0])
    first, last = Counter(), Counter()
    for a, b, _ in pairs(tr):
        first[b[0]] += 1
        last[a[-1]] += 1
    ft = [w for w, _ in first.most_common(50)]
    lt = [w for w, _ in last.most_common(50)]
    X, y = features(tr, vocab, ft, lt), tr["nsp"].astype(np.float64)
    Xv, yv = features(va, vocab, ft, lt), va["nsp"].astype(np.float64)
    for name, Z, lab in (("train", X, y), ("val", Xv, yv)):
        attr = Z[:, 1] > 0
        shared = Z[:, 2] > 0
        print("%-5s %6d pairs: B is an attribution: IsNext %.3f / NotNext %.3f; A and B share a content word: "
              "IsNext %.3f / NotNext %.3f" % (name, len(lab), attr[lab == 0].mean(), attr[lab == 1].mean(),
                                             shared[lab == 0].mean(), shared[lab == 1].mean()))
    mu, sd = X[:, 1:].mean(0), X[:, 1:].std(0) + 1e-6
    X[:, 1:] = (X[:, 1:] - mu) / sd
    Xv[:, 1:] = (Xv[:, 1:] - mu) / sd
    w = np.zeros(X.shape[1])
    for _ in range(500):  # full-batch gradient descent on the mean log loss, tiny L2
        p = 1 / (1 + np.exp(-X @ w))
        w -= 0.5 * (X.T @ (p - y) / len(y) + 1e-4 * w)
    acc = lambda Z, lab: float(((1 / (1 + np.exp(-Z @ w)) > 0.5) == lab).mean())  # noqa: E731
    print("surface-cue logistic regression: train accuracy %.3f, held-out accuracy %.3f (held-out NotNext share %.3f)"
          % (acc(X, y), acc(Xv, yv), yv.mean()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
