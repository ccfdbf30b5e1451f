#!/usr/bin/env python3
"""The public baseline of `scripts/bench cascade-bank`: TF-IDF + logistic regression
(scikit-learn, installed by the bench into target/bench-tools; never part of triage).

    tfidf_baseline.py SET.jsonl     # trains on the set's dev rows, scores its test rows

The set is examples/desks/bank/banking77.jsonl: Banking77's official train split as `dev`
(10,003 rows), its official test split as `test` (3,080). The configuration is the common one
for the baseline, fixed here and not tuned on test: word 1- and 2-grams, lowercased,
sublinear TF, IDF smoothed, logistic regression (lbfgs, multinomial, C = 10, up to 2,000
iterations). The text is the row's subject and message, as triage's classifier gets them.
Prints one JSON line: accuracy on test with a 95% bootstrap interval over rows (1,000
resamples), rows, training seconds (vectorizer and fit) and the configuration.
"""

import json
import random
import sys
import time

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
    text = lambda r: f"{r['subject']}\n{r['message']}"
    train = [r for r in rows if r["split"] == "dev"]
    test = [r for r in rows if r["split"] == "test"]
    config = {"ngram_range": [1, 2], "sublinear_tf": True, "lowercase": True, "C": 10.0, "max_iter": 2000}
    started = time.perf_counter()
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, lowercase=True)
    x_train = vectorizer.fit_transform([text(r) for r in train])
    model = LogisticRegression(C=10.0, max_iter=2000)
    model.fit(x_train, [r["department"] for r in train])
    seconds = time.perf_counter() - started
    predicted = model.predict(vectorizer.transform([text(r) for r in test]))
    right = [int(p == r["department"]) for p, r in zip(predicted, test)]
    rng = random.Random(39)
    n = len(right)
    draws = sorted(sum(right[rng.randrange(n)] for _ in range(n)) / n for _ in range(1000))
    print(json.dumps({
        "accuracy": sum(right) / n, "accuracy_ci": [draws[25], draws[974]],
        "train_rows": len(train), "test_rows": n, "seconds": seconds, "config": config,
    }))


if __name__ == "__main__":
    main()
