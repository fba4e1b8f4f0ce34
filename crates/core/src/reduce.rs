//! Sums across the processes of a data-parallel run ([`Reduce`]), implemented over MPI by
//! `rosenblatt::distributed`: below the data (which agrees its shares through it) and the
//! backends (which sum their epochs through it).

/// Sums across the processes of a data-parallel run, each holding a share of the rows: what
/// makes their batch epochs one epoch over all rows. Implemented over MPI by
/// `rosenblatt::distributed` (feature `mpi`); the backends only call it.
pub trait Reduce: std::fmt::Debug {
    /// This process's index (0-based).
    fn rank(&self) -> usize;
    /// Processes.
    fn size(&self) -> usize;
    /// This process's index among the processes on its machine (which GPU it takes).
    fn local_rank(&self) -> usize {
        self.rank()
    }
    /// Replaces `v` with its sum over the processes, added in process order (so the result
    /// does not depend on how the processes are scheduled).
    fn sum_f32(&self, v: &mut [f32]);
    /// As [`Reduce::sum_f32`], in f64.
    fn sum_f64(&self, v: &mut [f64]);
    /// The largest `v` over the processes.
    fn max_f64(&self, v: f64) -> f64;
    /// Every process's `local`, concatenated in process order.
    fn gather_f32(&self, local: &[f32]) -> Vec<f32>;
    /// As [`Reduce::gather_f32`], for bytes.
    fn gather_u8(&self, local: &[u8]) -> Vec<u8>;
    /// Ends every process with exit code `code` (after an error in one, which the others may
    /// be waiting for); returns only where there is nothing to end.
    fn abort(&self, _code: i32) {}
}

/// Where the processes of a data-parallel run would differ ([`agree`]): the first field, in
/// the order given, whose value is not rank 0's on some process, with rank 0's value and the
/// first such rank and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Disagreement {
    /// The field's name.
    pub field: String,
    /// Rank 0's value.
    pub first: String,
    /// The first rank whose value differs.
    pub rank: usize,
    /// That rank's value.
    pub value: String,
}

/// Gathers every process's `fields` (name, value) and returns the first that is not the same
/// everywhere. Every process calls it at the same point with its own values (the names in
/// the same order) and gets the same answer, so all can stop before anything that would
/// make them wait on one another differently (a process with other epochs or another
/// algorithm ends in a collective the others never enter). A field missing on a process
/// counts as the value "(none)".
pub fn agree(r: &dyn Reduce, fields: &[(String, String)]) -> Option<Disagreement> {
    let all = r.gather_u8(&encode(fields));
    let ranks: Vec<Vec<(String, String)>> = all
        .split(|&b| b == 0)
        .take(r.size())
        .map(|part| {
            part.split(|&b| b == 0x1e)
                .filter(|f| !f.is_empty())
                .map(|f| {
                    let mut kv = f.splitn(2, |&b| b == 0x1f);
                    let k = String::from_utf8_lossy(kv.next().unwrap_or_default());
                    let v = String::from_utf8_lossy(kv.next().unwrap_or_default());
                    (k.into_owned(), v.into_owned())
                })
                .collect()
        })
        .collect();
    let first = ranks.first()?;
    let fields_max = ranks.iter().map(Vec::len).max().unwrap_or(0);
    let none = (String::new(), "(none)".to_string());
    for i in 0..fields_max {
        let (k0, v0) = first.get(i).unwrap_or(&none);
        for (rank, fs) in ranks.iter().enumerate().skip(1) {
            let (k, v) = fs.get(i).unwrap_or(&none);
            if k != k0 || v != v0 {
                let field = if k0.is_empty() { k } else { k0 };
                return Some(Disagreement {
                    field: field.clone(),
                    first: if k == k0 || k0.is_empty() {
                        v0.clone()
                    } else {
                        format!("{k0} = {v0}")
                    },
                    rank,
                    value: if k == k0 || k.is_empty() {
                        v.clone()
                    } else {
                        format!("{k} = {v}")
                    },
                });
            }
        }
    }
    None
}

/// One process's fields as [`agree`] gathers them: name \x1f value \x1e ..., then \0, with
/// the separators taken out of the text.
fn encode(fields: &[(String, String)]) -> Vec<u8> {
    let clean = |t: &str| t.replace(['\x1f', '\x1e', '\0'], " ");
    let mut out = Vec::new();
    for (k, v) in fields {
        out.extend(clean(k).bytes());
        out.push(0x1f);
        out.extend(clean(v).bytes());
        out.push(0x1e);
    }
    out.push(0);
    out
}

/// A shared handle sums as what it points to.
impl<T: Reduce + ?Sized> Reduce for std::rc::Rc<T> {
    fn rank(&self) -> usize {
        (**self).rank()
    }
    fn size(&self) -> usize {
        (**self).size()
    }
    fn local_rank(&self) -> usize {
        (**self).local_rank()
    }
    fn sum_f32(&self, v: &mut [f32]) {
        (**self).sum_f32(v)
    }
    fn sum_f64(&self, v: &mut [f64]) {
        (**self).sum_f64(v)
    }
    fn max_f64(&self, v: f64) -> f64 {
        (**self).max_f64(v)
    }
    fn gather_f32(&self, local: &[f32]) -> Vec<f32> {
        (**self).gather_f32(local)
    }
    fn gather_u8(&self, local: &[u8]) -> Vec<u8> {
        (**self).gather_u8(local)
    }
    fn abort(&self, code: i32) {
        (**self).abort(code)
    }
}

#[cfg(test)]
mod agree_tests {
    use super::*;

    /// Rank 0 of a world whose other processes' fields are given.
    #[derive(Debug)]
    struct World(Vec<Vec<(String, String)>>);

    impl Reduce for World {
        fn rank(&self) -> usize {
            0
        }
        fn size(&self) -> usize {
            self.0.len() + 1
        }
        fn sum_f32(&self, _: &mut [f32]) {}
        fn sum_f64(&self, _: &mut [f64]) {}
        fn max_f64(&self, v: f64) -> f64 {
            v
        }
        fn gather_f32(&self, local: &[f32]) -> Vec<f32> {
            local.to_vec()
        }
        fn gather_u8(&self, local: &[u8]) -> Vec<u8> {
            let mut all = local.to_vec();
            for f in &self.0 {
                all.extend(encode(f));
            }
            all
        }
    }

    fn fields(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_first_differing_field_and_rank_are_named() {
        let me = fields(&[("algo", "batch"), ("epochs", "5"), ("seed", "1")]);
        let same = World(vec![me.clone(), me.clone()]);
        assert_eq!(agree(&same, &me), None);
        let other = fields(&[("algo", "batch"), ("epochs", "50"), ("seed", "2")]);
        let w = World(vec![me.clone(), other]);
        assert_eq!(
            agree(&w, &me),
            Some(Disagreement {
                field: "epochs".into(),
                first: "5".into(),
                rank: 2,
                value: "50".into(),
            })
        );
        // A field one process lacks, and separators inside values, are told apart.
        let short = World(vec![fields(&[("algo", "batch"), ("epochs", "5")])]);
        let d = agree(&short, &me).unwrap();
        assert_eq!((d.field.as_str(), d.value.as_str()), ("seed", "(none)"));
        let odd = fields(&[("algo", "ba\x1etch")]);
        assert_eq!(agree(&World(vec![odd.clone()]), &odd), None);
    }
}
