"""Writes the scipy sparse fixtures of tests/fixtures/scipy (run from the repository root):
a 60 x 500 CSR matrix with integer values saved by scipy.sparse.save_npz (compressed, int32
indices, float64 data), the same matrix as CSC (uncompressed, float32 data, int64 indices),
its labels as a .npy, and the same rows as a dense CSV. tests/it/npy.rs checks that the three
load as the same rows."""
import numpy as np
import scipy.sparse as sp

rng = np.random.default_rng(14)
m = sp.random(60, 500, density=0.02, format="csr", random_state=14, dtype=np.float64)
m.data = np.round(m.data * 10.0) - 5.0
m.eliminate_zeros()
y = np.where(rng.random(60) < 0.5, -1, 1).astype(np.int64)
out = "tests/fixtures/scipy/"
sp.save_npz(out + "rows_csr.npz", m)
c = m.tocsc().astype(np.float32)
c.indices = c.indices.astype(np.int64)
c.indptr = c.indptr.astype(np.int64)
sp.save_npz(out + "rows_csc.npz", c, compressed=False)
np.save(out + "labels.npy", y)
np.savetxt(out + "rows.csv", np.hstack([m.toarray(), y[:, None]]), delimiter=",", fmt="%g")
print(m.shape, m.nnz)
