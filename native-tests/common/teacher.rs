//! Teacher-forced comparison with a reference run of llama.cpp: the prompt
//! in one decode, then the reference's generated ids one by one. At every
//! step lamina's top-1 must equal the reference's wherever the reference's
//! top-1/top-2 gap is at least the tolerance's gap, and the reference's
//! top-5 logits must be matched within the tolerance's max abs; the logits
//! at the last prompt position are compared whole (max abs and RMS).

use lamina::context::{Batch, Context};
use lamina::sampling::greedy;

use super::{json_ids, read_file};

/// The golden README's tolerances.
pub struct Tolerance {
    pub max_abs: f64,
    pub rms: f64,
    /// Top-1 must agree where the reference top1-top2 gap is at least this.
    pub gap: f64,
}

/// Quantized weights.
pub const QUANTIZED: Tolerance = Tolerance {
    max_abs: 1.5,
    rms: 0.5,
    gap: 0.5,
};

/// F16, BF16 and F32 weights.
pub const F16: Tolerance = Tolerance {
    max_abs: 0.1,
    rms: 0.05,
    gap: 0.1,
};

/// Raw little-endian f32 values.
pub fn read_f32(path: &str) -> Vec<f32> {
    read_file(path)
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Max abs and RMS of `got - reference`, asserted within `tol`.
pub fn compare_logits(
    name: &str,
    what: &str,
    got: &[f32],
    reference: &[f32],
    tol: &Tolerance,
) -> (f64, f64) {
    assert_eq!(got.len(), reference.len(), "{name} {what}: logit count");
    let diffs: Vec<f64> = got
        .iter()
        .zip(reference)
        .map(|(a, b)| (a - b) as f64)
        .collect();
    let max_abs = diffs.iter().fold(0.0f64, |m, d| m.max(d.abs()));
    let rms = (diffs.iter().map(|d| d * d).sum::<f64>() / diffs.len() as f64).sqrt();
    assert!(
        max_abs <= tol.max_abs && rms <= tol.rms,
        "{name} {what}: logits max abs {max_abs}, rms {rms}"
    );
    (max_abs, rms)
}

/// Runs `golden` (`prompt_ids`, `generated_ids`, `step_top5`) teacher-forced
/// on `ctx` for up to `steps` steps, `reference` being the reference's
/// logits at the last prompt position. Returns their max abs and RMS.
pub fn teacher_forced(
    ctx: &mut Context,
    name: &str,
    golden: &serde_json::Value,
    reference: &[f32],
    steps: usize,
    tol: &Tolerance,
) -> (f64, f64) {
    let prompt = json_ids(&golden["prompt_ids"]);
    let generated = json_ids(&golden["generated_ids"]);
    let top5 = golden["step_top5"].as_array().expect("step_top5");
    ctx.decode(&Batch::for_sequence(&prompt, 0, 0).unwrap())
        .unwrap();
    let mut logits = ctx.logits(-1).unwrap().to_vec();
    let (max_abs, rms) = compare_logits(name, "last prompt position", &logits, reference, tol);
    let steps = steps.min(generated.len());
    for s in 0..steps {
        check_top5(&format!("{name}: step {s}"), &logits, &top5[s], tol);
        if s + 1 < steps {
            let pos = (prompt.len() + s) as i32;
            ctx.decode(&Batch::for_sequence(&[generated[s]], pos, 0).unwrap())
                .unwrap();
            logits = ctx.logits(-1).unwrap().to_vec();
        }
    }
    eprintln!(
        "{name} ({} threads, {}): last-prompt logits max abs {max_abs:.3}, rms {rms:.3}; {steps} steps checked",
        ctx.n_threads(),
        ctx.cpu_variant()
    );
    (max_abs, rms)
}

/// `logits` against the reference's top five `[id, logit]` pairs: each
/// logit within the tolerance's max abs, and the same best token where the
/// reference's best two are at least the tolerance's gap apart.
pub fn check_top5(what: &str, logits: &[f32], want: &serde_json::Value, tol: &Tolerance) {
    let want = want.as_array().expect("top-5 pairs");
    let pair = |i: usize| {
        (
            want[i][0].as_u64().unwrap() as usize,
            want[i][1].as_f64().unwrap(),
        )
    };
    let (top_id, top_logit) = pair(0);
    let gap = top_logit - pair(1).1;
    if gap >= tol.gap {
        assert_eq!(
            greedy(logits),
            Some(top_id as u32),
            "{what}: best token (gap {gap:.2})"
        );
    }
    for i in 0..want.len() {
        let (id, l) = pair(i);
        assert!(
            (logits[id] as f64 - l).abs() <= tol.max_abs,
            "{what}: token {id}: {} vs {l}",
            logits[id]
        );
    }
}

/// Replays the reference's operations on several sequences (`seqs.cpp`:
/// shared-batch decodes and sequence copies) on `ctx`, checking each
/// wanted output against its top five. Returns the outputs checked.
pub fn shared_batches(
    ctx: &mut Context,
    name: &str,
    golden: &serde_json::Value,
    tol: &Tolerance,
) -> usize {
    let mut checked = 0;
    for (o, op) in golden["ops"].as_array().expect("ops").iter().enumerate() {
        if let Some(copy) = op.get("copy") {
            let (src, dst) = (copy[0].as_u64().unwrap(), copy[1].as_u64().unwrap());
            ctx.kv_seq_cp(src as u32, dst as u32, -1, -1).unwrap();
            continue;
        }
        let entries = op["decode"].as_array().expect("a decode");
        let mut batch = Batch::new(entries.len());
        for e in entries {
            batch
                .add(
                    e[0].as_u64().unwrap() as u32,
                    e[1].as_i64().unwrap() as i32,
                    &[e[2].as_u64().unwrap() as u32],
                    e[3].as_bool().unwrap(),
                )
                .unwrap();
        }
        ctx.decode(&batch).unwrap();
        let tops = op["top5"].as_array().unwrap();
        let wanted = entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e[3].as_bool().unwrap());
        for ((i, e), want) in wanted.zip(tops) {
            let logits = ctx.logits(i as i32).unwrap();
            let what = format!("{name}: op {o}, sequence {}", e[2]);
            check_top5(&what, logits, want, tol);
            checked += 1;
        }
    }
    checked
}
