#!/usr/bin/env python3
"""`train data.vw` with no flags against Vowpal Wabbit's first commands and scikit-learn's
defaults, on the two kinds of data people write for Vowpal Wabbit (VW): a text set with a
raw count beside tf-idf words, and a large click log with noisy labels. Both are generated
here (seeded), split, and every tool trains on the training rows and is scored on the rest.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install numpy scipy scikit-learn vowpalwabbit
    cargo build --release
    /tmp/venv/bin/python scripts/vw_defaults.py [--set counts|clicks|both] [--seed 3]
        [--docs 1554] [--rows 1000000] [--bits 18] [--json out.json]

The sets:
- **counts** (`write_counts`): `--docs` short documents over a Zipf vocabulary of 5,000
  words, two classes in about 9 : 1, each class with its own 60 topic words drawn more often;
  each document is written `label |w word:tfidf ...` (tf-idf weights of unit norm per row,
  values near 0.05 to 0.3) `|c chars:N`, N the document's length in characters (in the
  hundreds, carrying little about the class). 604 of 1,554 (39%) are held out by default,
  as in issue 61's set.
- **clicks**: `rosenblatt gen --kind clicks --n ROWS --noise 0.05` (13 counts, 26 skewed
  categorical fields, a planted rule, 5% of labels flipped); the last tenth is held out.

The tools: VW (`python -m vowpalwabbit`, the C++ driver reading the file) with
`--loss_function hinge`, one pass, and ten passes (`--passes 10 -c`: its cache and its
defaults for several passes: every tenth row held out, stopping after 3 passes without
improvement); `rosenblatt train TRAIN` with no flags but the hash bits, then `eval`;
scikit-learn's `Perceptron()` with its defaults on the same rows hashed by `FeatureHasher`
(the same bits; the seconds are its `fit` alone, after hashing). Wall seconds and peak RSS
are each process's own (GNU time; without it no peak is given).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def run(cmd, cwd):
    """Runs `cmd`: (seconds, peak RSS in MB, stdout). The seconds and peak are GNU time's
    where present (the child's own), else the wall time here and no peak."""
    cmd = [str(c) for c in cmd]
    gnu = Path("/usr/bin/time")
    stats = Path(cwd) / "time.txt"
    if gnu.exists():
        cmd = [str(gnu), "-o", str(stats), "-f", "%e %M"] + cmd
    t = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate()
    secs = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{err.decode()}")
    rss = None
    if gnu.exists():
        wall, kb = stats.read_text().split()[-2:]
        secs, rss = float(wall), int(kb) / 1024.0
    return secs, rss, out.decode()


def write_counts(path, docs, seed):
    """The text-with-a-count set, as VW lines; returns nothing (the file is the set)."""
    rng = np.random.default_rng(seed)
    vocab = 5000
    zipf = 1.0 / np.arange(1, vocab + 1)
    topic = [rng.choice(vocab, 60, replace=False) for _ in range(2)]
    probs = []
    for c in range(2):
        p = zipf.copy()
        p[topic[c]] *= 12.0
        probs.append(p / p.sum())
    lines, df, bags = [], np.zeros(vocab), []
    labels = np.where(rng.random(docs) < 0.094, 1, -1)
    for y in labels:
        c = 1 if y == 1 else 0
        length = int(rng.integers(12, 60))
        words = rng.choice(vocab, length, p=probs[c])
        ids, tf = np.unique(words, return_counts=True)
        df[ids] += 1
        chars = int(sum(4 + (w % 7) for w in words) + rng.integers(0, 80))
        bags.append((ids, tf, chars))
    idf = np.log((1 + docs) / (1 + df)) + 1.0
    for y, (ids, tf, chars) in zip(labels, bags):
        v = tf * idf[ids]
        v = v / np.linalg.norm(v)
        words = " ".join(f"w{i}:{x:.4f}" for i, x in zip(ids, v))
        lines.append(f"{y} |w {words} |c chars:{chars}\n")
    with open(path, "w") as f:
        f.writelines(lines)


def split(data, work, test_rows):
    """The last `test_rows` lines test, the rest train: (train path, test path, labels)."""
    with open(data) as f:
        rows = [line for line in f if line.strip()]
    train, test = work / "train.vw", work / "test.vw"
    train.write_text("".join(rows[:-test_rows]))
    test.write_text("".join(rows[-test_rows:]))
    return train, test, [r.split(None, 1)[0] for r in rows[-test_rows:]]


def features(path):
    """Each VW line's features as {namespace^name: value} and its label (for FeatureHasher)."""
    xs, ys = [], []
    with open(path) as f:
        for line in f:
            head, _, rest = line.partition("|")
            ys.append(int(float(head.split()[0])))
            row = {}
            for part in ("|" + rest).split("|")[1:]:
                toks = part.split()
                if not toks:
                    continue
                ns = "" if part.startswith(" ") else toks[0]
                for t in toks if ns == "" else toks[1:]:
                    name, _, val = t.partition(":")
                    row[f"{ns}^{name}"] = float(val) if val else 1.0
            xs.append(row)
    return xs, ys


def measure(rb, work, train, test, truth, bits):
    """Yields (tool, seconds, peak MB, test accuracy)."""
    model = work / "vw.model"
    for passes in (1, 10):
        cmd = [sys.executable, "-m", "vowpalwabbit", "-d", str(train), "-b", str(bits),
               "--loss_function", "hinge", "--quiet", "-f", str(model)]
        if passes > 1:
            cmd += ["--passes", str(passes), "-c", "-k"]
        secs, rss, _ = run(cmd, work)
        preds = work / "vw.preds"
        run([sys.executable, "-m", "vowpalwabbit", "-d", str(test), "-t", "-i", str(model),
             "--quiet", "-p", str(preds)], work)
        got = ["1" if float(v.split()[0]) > 0 else "-1"
               for v in preds.read_text().split("\n") if v.strip()]
        acc = sum(g == t for g, t in zip(got, truth)) / len(truth)
        name = "Vowpal Wabbit, one pass" if passes == 1 else "Vowpal Wabbit, --passes 10"
        yield name, secs, rss, acc
    out = work / "rb.json"
    secs, rss, rep = run([rb, "train", str(train), "--hash-bits", str(bits), "-o", str(out),
                          "--json"], work)
    _, _, ev = run([rb, "eval", str(out), str(test), "--backend", "cpu", "--json"], work)
    r = json.loads(rep)
    how = f"{r['algo']}, {r['epochs']} epoch{'s' if r['epochs'] != 1 else ''}"
    if r.get("streamed_bytes"):
        how += ", streamed"
    yield f"rosenblatt `train` ({how})", secs, rss, json.loads(ev)["accuracy"]
    from sklearn.feature_extraction import FeatureHasher
    from sklearn.linear_model import Perceptron

    h = FeatureHasher(n_features=2 ** bits)
    xtr, ytr = features(train)
    xte, yte = features(test)
    a, b = h.transform(xtr), h.transform(xte)
    t = time.perf_counter()
    m = Perceptron().fit(a, ytr)
    yield "scikit-learn `Perceptron()` (fit only)", time.perf_counter() - t, None, m.score(b, yte)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", choices=["counts", "clicks", "both"], default="both")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--docs", type=int, default=1554)
    ap.add_argument("--test-docs", type=int, default=604)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--bits", type=int, default=18)
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    rb = os.environ.get("ROSENBLATT_BIN", str(ROOT / "target/release/rosenblatt"))
    work = Path(tempfile.mkdtemp(prefix="vw_defaults."))
    out = {}
    sets = ["counts", "clicks"] if a.set == "both" else [a.set]
    for s in sets:
        data = work / f"{s}.vw"
        if s == "counts":
            write_counts(data, a.docs, a.seed)
            test_rows = a.test_docs
        else:
            run([rb, "gen", "--kind", "clicks", "--n", str(a.rows), "--noise", "0.05",
                 "--seed", str(a.seed), "-o", str(data)], work)
            test_rows = a.rows // 10
        train, test, truth = split(data, work, test_rows)
        n = sum(1 for _ in open(train))
        print(f"\n{s}: {n} training rows, {len(truth)} test rows, {a.bits} hash bits, seed "
              f"{a.seed}")
        print("| tool | wall s | peak RSS MB | test accuracy |")
        print("|---|---:|---:|---:|")
        for tool, secs, rss, acc in measure(rb, work, train, test, truth, a.bits):
            mb = f"{rss:.0f}" if rss is not None else ""
            print(f"| {tool} | {secs:.2f} | {mb} | {acc:.3f} |", flush=True)
            out.setdefault(s, []).append({"tool": tool, "seconds": secs, "peak_mb": rss,
                                          "accuracy": acc})
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
