//! Evaluation metrics: ROC curve and AUC from decision values (ties handled exactly), and
//! precision, recall and F1 per class with their macro averages, from a confusion matrix.

use serde::Serialize;

/// Area under the ROC curve: the probability that a random positive scores above a random
/// negative, ties counting one half (the Mann-Whitney statistic with averaged ranks).
/// `None` when one of the two classes is absent.
pub fn auc(scores: &[f32], positive: &[bool]) -> Option<f64> {
    let n_pos = positive.iter().filter(|p| **p).count();
    let n_neg = positive.len() - n_pos;
    if n_pos == 0 || n_neg == 0 {
        return None;
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    // Sum of the (1-based, tie-averaged) ranks of the positives.
    let mut rank_sum = 0f64;
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && scores[order[j + 1]] == scores[order[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        rank_sum += avg * order[i..=j].iter().filter(|&&k| positive[k]).count() as f64;
        i = j + 1;
    }
    let (p, n) = (n_pos as f64, n_neg as f64);
    Some((rank_sum - p * (p + 1.0) / 2.0) / (p * n))
}

/// ROC curve points (false positive rate, true positive rate), from (0, 0) to (1, 1), one per
/// distinct threshold (predict positive when score >= threshold, highest threshold first).
pub fn roc_curve(scores: &[f32], positive: &[bool]) -> Vec<(f64, f64)> {
    let n_pos = positive.iter().filter(|p| **p).count().max(1) as f64;
    let n_neg = positive.iter().filter(|p| !**p).count().max(1) as f64;
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let mut pts = vec![(0.0, 0.0)];
    let (mut tp, mut fp) = (0f64, 0f64);
    let mut i = 0;
    while i < order.len() {
        let s = scores[order[i]];
        while i < order.len() && scores[order[i]] == s {
            if positive[order[i]] {
                tp += 1.0;
            } else {
                fp += 1.0;
            }
            i += 1;
        }
        pts.push((fp / n_neg, tp / n_pos));
    }
    pts
}

/// Precision, recall and F1 of one class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassMetrics {
    /// Class name.
    pub class: String,
    /// Of the rows predicted as this class, the fraction that are (0 when none predicted).
    pub precision: f64,
    /// Of the rows of this class, the fraction predicted as it (0 when the class is absent).
    pub recall: f64,
    /// Harmonic mean of precision and recall (0 when both are 0).
    pub f1: f64,
    /// Rows of this class.
    pub support: u64,
}

/// Per-class metrics from `matrix[true][predicted]`, and their macro averages
/// (precision, recall, F1) over the classes.
pub fn per_class(classes: &[String], matrix: &[Vec<u64>]) -> (Vec<ClassMetrics>, [f64; 3]) {
    let k = classes.len();
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let out: Vec<ClassMetrics> = (0..k)
        .map(|c| {
            let tp = matrix[c][c];
            let predicted: u64 = (0..k).map(|t| matrix[t][c]).sum();
            let support: u64 = matrix[c].iter().sum();
            let (p, r) = (ratio(tp, predicted), ratio(tp, support));
            ClassMetrics {
                class: classes[c].clone(),
                precision: p,
                recall: r,
                f1: if p + r == 0.0 {
                    0.0
                } else {
                    2.0 * p * r / (p + r)
                },
                support,
            }
        })
        .collect();
    let mean = |f: fn(&ClassMetrics) -> f64| out.iter().map(f).sum::<f64>() / k.max(1) as f64;
    let macros = [mean(|m| m.precision), mean(|m| m.recall), mean(|m| m.f1)];
    (out, macros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_by_hand_with_ties() {
        // Perfect ranking.
        assert_eq!(
            auc(&[0.1, 0.2, 0.8, 0.9], &[false, false, true, true]),
            Some(1.0)
        );
        // Reversed.
        assert_eq!(
            auc(&[0.9, 0.8, 0.2, 0.1], &[false, false, true, true]),
            Some(0.0)
        );
        // All tied: one half.
        assert_eq!(
            auc(&[1.0, 1.0, 1.0, 1.0], &[false, true, false, true]),
            Some(0.5)
        );
        // Pairs (pos, neg): (0.4 vs 0.1) win, (0.4 vs 0.4) tie, (0.35 vs 0.1) win, (0.35 vs 0.4)
        // loss: (1 + 0.5 + 1 + 0) / 4 = 0.625.
        assert_eq!(
            auc(&[0.1, 0.4, 0.35, 0.4], &[false, false, true, true]),
            Some(0.625)
        );
        assert_eq!(auc(&[0.1, 0.2], &[true, true]), None);
    }

    #[test]
    fn roc_curve_runs_from_origin_to_one() {
        let pts = roc_curve(&[0.1, 0.4, 0.35, 0.8], &[false, false, true, true]);
        assert_eq!(pts.first(), Some(&(0.0, 0.0)));
        assert_eq!(pts.last(), Some(&(1.0, 1.0)));
        assert_eq!(pts[1], (0.0, 0.5));
        // Area by trapezoids equals the rank AUC.
        let area: f64 = pts
            .windows(2)
            .map(|w| (w[1].0 - w[0].0) * (w[1].1 + w[0].1) / 2.0)
            .sum();
        assert!(
            (area - auc(&[0.1, 0.4, 0.35, 0.8], &[false, false, true, true]).unwrap()).abs()
                < 1e-12
        );
    }

    #[test]
    fn per_class_from_a_hand_made_matrix() {
        // true a: 8 -> a, 2 -> b; true b: 1 -> a, 4 -> b, 0 -> c; true c: nothing.
        let classes = vec!["a".to_string(), "b".into(), "c".into()];
        let m = vec![vec![8, 2, 0], vec![1, 4, 0], vec![0, 0, 0]];
        let (pc, macros) = per_class(&classes, &m);
        assert_eq!(pc[0].precision, 8.0 / 9.0);
        assert_eq!(pc[0].recall, 0.8);
        assert!((pc[0].f1 - 2.0 * (8.0 / 9.0) * 0.8 / (8.0 / 9.0 + 0.8)).abs() < 1e-12);
        assert_eq!(pc[1].precision, 4.0 / 6.0);
        assert_eq!(pc[1].recall, 0.8);
        assert_eq!(
            (pc[2].precision, pc[2].recall, pc[2].f1, pc[2].support),
            (0.0, 0.0, 0.0, 0)
        );
        assert!((macros[1] - (0.8 + 0.8 + 0.0) / 3.0).abs() < 1e-12);
    }
}
