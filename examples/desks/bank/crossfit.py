#!/usr/bin/env python3
"""Cross-fitting a cascade's threshold on a set's dev rows, by hand (docs/taxonomy.md, step 5).

    python3 crossfit.py folds SET K DIR    # DIR/train-k.jsonl and DIR/sweep-k.jsonl, k < K
    python3 crossfit.py sum SWEEP.json...  # the folds' `triage eval --thresholds --json` added up

A classifier answers the rows it learnt from memory, so a sweep of it on its own training rows
would choose threshold 0. Here each fold's rows are swept by a classifier trained on the other
folds, and the points are added up. Identical texts (case and spacing apart) share a fold.
"""

import hashlib
import json
import sys
from pathlib import Path


def fold_of(row, k):
    text = " ".join(row["message"].lower().split())
    return hashlib.sha256(text.encode("utf-8")).digest()[0] % k


def folds(set_path, k, out):
    out.mkdir(parents=True, exist_ok=True)
    lines = Path(set_path).read_text(encoding="utf-8").splitlines()
    dev = [json.loads(line) for line in lines if line.strip()]
    dev = [r for r in dev if r["split"] == "dev"]
    for i in range(k):
        for name, keep in (("train", lambda r: fold_of(r, k) != i),
                           ("sweep", lambda r: fold_of(r, k) == i)):
            rows = [r for r in dev if keep(r)]
            text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
            (out / f"{name}-{i}.jsonl").write_text(text, encoding="utf-8")
            print(f"{out / f'{name}-{i}.jsonl'}: {len(rows)} rows")


def total(paths):
    points, large, rows = {}, 0.0, 0
    for path in paths:
        sweep = json.loads(Path(path).read_text(encoding="utf-8"))
        n = sweep["set"]["rows"]
        rows += n
        large += sweep["large"]["department_accuracy"] * n
        for p in sweep["points"]:
            t = points.setdefault(p["threshold"], [0, 0.0, 0.0])
            t[0] += p["n"]
            t[1] += p["local_share"] * p["n"]
            t[2] += p["department_accuracy"] * p["n"]
    large /= rows
    print(f"{rows} rows; the large model alone: accuracy {large:.3f}")
    for threshold, (n, local, right) in sorted(points.items()):
        print(f"threshold {threshold:.2f}: answered locally {local / n:6.1%}, "
              f"accuracy {right / n:.3f}")
    # docs/quality.md's rule: the lowest threshold within 1 point of the large model.
    chosen = min(t for t, (n, _, right) in points.items() if right / n >= large - 0.01)
    print(f"the lowest threshold within 1 point of the large model: {chosen:.2f}")


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "folds":
        folds(sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]))
    elif len(sys.argv) > 2 and sys.argv[1] == "sum":
        total(sys.argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
