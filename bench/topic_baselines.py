#!/usr/bin/python3
"""The baselines of a text-classification task in GLUE's layout (`mptrain prepare --task topics`):
the majority class, and TF-IDF + logistic regression (scikit-learn, Debian's python3-sklearn),
each fitted on train.tsv (and, for the regression's C, chosen on validation.tsv), scored on
validation and test by accuracy and macro-F1 (every label weighs the same).

    bench/topic_baselines.py data/fortune-topics            # a table
    bench/topic_baselines.py data/fortune-topics --json     # one JSON object per baseline

What the fine-tuned BERT is compared against (docs/BERT.md): the majority class says what
guessing gets, TF-IDF + logistic regression what word counts alone get.
"""

import argparse
import csv
import json
import os
import sys

from sklearn.dummy import DummyClassifier
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score
from sklearn.pipeline import make_pipeline


def read_split(folder, name):
    """(sentences, labels) of <folder>/<name>.tsv: a header row, then sentence<TAB>label."""
    path = os.path.join(folder, name + ".tsv")
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    except OSError as e:
        sys.exit(f"topic_baselines: cannot read {path}: {e.strerror}")
    if not rows or rows[0] != ["sentence", "label"]:
        sys.exit(f"topic_baselines: {path} does not start with the header sentence<TAB>label")
    texts, labels = [], []
    for n, row in enumerate(rows[1:], start=2):
        if len(row) != 2 or not row[1].lstrip("-").isdigit():
            sys.exit(f"topic_baselines: {path}, line {n}: expected sentence<TAB>label")
        texts.append(row[0])
        labels.append(int(row[1]))
    if not texts:
        sys.exit(f"topic_baselines: {path} holds no examples")
    return texts, labels


def scores(model, texts, labels):
    predicted = model.predict(texts)
    return {"accuracy": accuracy_score(labels, predicted),
            "macro_f1": f1_score(labels, predicted, average="macro", zero_division=0)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("task", help="folder with train.tsv, validation.tsv and test.tsv")
    ap.add_argument("--json", action="store_true", help="one JSON object per baseline instead of a table")
    args = ap.parse_args()
    train, val, test = (read_split(args.task, s) for s in ("train", "validation", "test"))

    results = []
    majority = DummyClassifier(strategy="most_frequent").fit(train[0], train[1])
    results.append({"baseline": "majority class", "validation": scores(majority, *val),
                    "test": scores(majority, *test)})
    # Word and bigram TF-IDF (terms seen at least twice), sublinear term frequencies; one-vs-rest
    # logistic regression (liblinear: seconds, where the multinomial lbfgs fit takes minutes on
    # 24 labels for the same accuracy); C chosen on validation from a short grid.
    best = None
    for c in (1.0, 4.0, 16.0):
        model = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2),
                              LogisticRegression(C=c, solver="liblinear", max_iter=1000))
        model.fit(train[0], train[1])
        v = scores(model, *val)
        if best is None or v["accuracy"] > best[1]["accuracy"]:
            best = (c, v, model)
    c, v, model = best
    results.append({"baseline": f"TF-IDF + logistic regression (C={c:g})", "validation": v,
                    "test": scores(model, *test)})

    if args.json:
        for r in results:
            print(json.dumps(r))
        return
    print(f"{len(train[0])} train, {len(val[0])} validation, {len(test[0])} test examples, "
          f"{len(set(train[1]))} labels")
    print("| baseline | validation accuracy | validation macro-F1 | test accuracy | test macro-F1 |")
    print("|---|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['baseline']} | {r['validation']['accuracy']:.4f} | {r['validation']['macro_f1']:.4f} "
              f"| {r['test']['accuracy']:.4f} | {r['test']['macro_f1']:.4f} |")


if __name__ == "__main__":
    main()
