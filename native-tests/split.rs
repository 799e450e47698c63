//! Models split across files (llama.cpp's gguf-split layout): the parts
//! lamina writes are the reference's byte for byte, a split model loads as
//! the whole one and computes the same logits, and parts that do not make a
//! model are refused with errors that say why.

mod common;

use std::sync::Arc;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use common::synth::family;
use lamina::backend::cpu::CpuDevice;
use lamina::context::{Batch, Context, ContextParams};
use lamina::gguf::split_write::{plan_split, write_part, SplitLimit, SplitOptions};
use lamina::gguf::{GgufFile, GgufLayout, Value};
use lamina::model::Model;

/// The parts of `file` split with `limit`, each as the bytes of its file.
fn split_in_memory(file: &GgufFile, limit: SplitLimit) -> Vec<Vec<u8>> {
    let options = SplitOptions {
        limit,
        no_tensor_first_split: false,
    };
    let plan = plan_split(file, options).unwrap();
    (0..plan.len())
        .map(|i| write_part(file, &plan, i, Vec::new()).unwrap())
        .collect()
}

fn parse_all(parts: &[Vec<u8>]) -> Vec<GgufFile> {
    parts
        .iter()
        .map(|p| GgufFile::from_bytes(p.clone()).unwrap())
        .collect()
}

/// The logits after a short prompt.
fn logits(file: GgufFile) -> Vec<f32> {
    let device = CpuDevice::new(None).unwrap().shared();
    let model = Arc::new(Model::load(Arc::new(file), device, None).unwrap());
    let prompt = model
        .vocab
        .tokenize("Split files, one model.", true, true)
        .unwrap();
    let mut ctx = Context::new(
        model,
        ContextParams {
            n_ctx: 64,
            n_threads: 1,
            ..ContextParams::default()
        },
    )
    .unwrap();
    ctx.decode(&Batch::for_sequence(&prompt, 0, 0).unwrap())
        .unwrap();
    ctx.logits(-1).unwrap().to_vec()
}

fn error_of(r: lamina::Result<GgufFile>) -> String {
    r.expect_err("an error").to_string()
}

#[test]
fn parts_joined_compute_what_the_whole_model_does() {
    let bytes = family("qwen3").write();
    let whole = GgufFile::from_bytes(bytes.clone()).unwrap();
    let parts = split_in_memory(&whole, SplitLimit::Tensors(5));
    assert!(parts.len() >= 3, "{} parts", parts.len());
    let joined = GgufFile::join(parse_all(&parts)).unwrap();
    assert_eq!(joined.part_count(), parts.len());
    assert_eq!(joined.tensors().len(), whole.tensors().len());
    for (a, b) in joined.tensors().iter().zip(whole.tensors()) {
        assert_eq!(
            (&a.name, a.ggml_type, &a.shape),
            (&b.name, b.ggml_type, &b.shape)
        );
        assert_eq!(
            a.part,
            joined
                .tensors()
                .iter()
                .position(|t| t.name == a.name)
                .unwrap()
                / 5
        );
        assert_eq!(
            joined.tensor_data(a).unwrap(),
            whole.tensor_data(b).unwrap(),
            "{}",
            a.name
        );
    }
    // The first part's metadata is the model's, with the split keys last.
    let keys: Vec<&str> = joined.metadata().iter().map(|(k, _)| k).collect();
    let n = keys.len();
    assert_eq!(
        &keys[n - 3..],
        ["split.no", "split.tensors.count", "split.count"]
    );
    assert_eq!(
        joined.metadata().get_u16("split.count").unwrap() as usize,
        parts.len()
    );
    // Bit for bit the same logits: the same weights, read from other files.
    assert_eq!(logits(joined), logits(whole));
}

#[test]
fn a_part_alone_is_not_a_model() {
    let whole = GgufFile::from_bytes(family("qwen3").write()).unwrap();
    let parts = split_in_memory(&whole, SplitLimit::Tensors(8));
    let count = parts.len();
    let device = CpuDevice::new(None).unwrap().shared();
    let load = |bytes: &Vec<u8>| {
        let file = Arc::new(GgufFile::from_bytes(bytes.clone()).unwrap());
        Model::load(file, device.clone(), None)
            .err()
            .unwrap()
            .to_string()
    };
    let e = load(&parts[0]);
    assert!(
        e.contains(&format!(
            "part 1 of a model in {count} files, and only it was given"
        )),
        "{e}"
    );
    let e = load(&parts[1]);
    assert!(
        e.contains(&format!("this is part 2 of a model in {count} files")),
        "{e}"
    );
    // Any part still describes itself (`lamina info` on one part).
    let second = GgufFile::from_bytes(parts[1].clone()).unwrap();
    assert_eq!(second.metadata().len(), 3);
    assert_eq!(second.tensors().len(), 8);
}

#[test]
fn parts_that_do_not_make_one_model_are_refused() {
    let whole = GgufFile::from_bytes(family("qwen3").write()).unwrap();
    let parts = split_in_memory(&whole, SplitLimit::Tensors(8));
    let count = parts.len();
    assert!(count >= 3);

    // One missing.
    let mut missing = parse_all(&parts);
    missing.remove(1);
    let e = error_of(GgufFile::join(missing));
    assert!(
        e.contains(&format!(
            "{} parts were given, but the model has {count}",
            count - 1
        )),
        "{e}"
    );
    // Out of order.
    let mut swapped = parse_all(&parts);
    swapped.swap(1, 2);
    let e = error_of(GgufFile::join(swapped));
    assert!(e.contains(&format!("part 2 of {count} is part 3")), "{e}");
    // A later part first.
    let mut later_first = parse_all(&parts);
    later_first.swap(0, 1);
    let e = error_of(GgufFile::join(later_first));
    assert!(e.contains("is part 2"), "{e}");
    // More files than an unsplit model has.
    let e = error_of(GgufFile::join(vec![
        GgufFile::from_bytes(family("qwen3").write()).unwrap(),
        GgufFile::from_bytes(parts[1].clone()).unwrap(),
    ]));
    assert!(
        e.contains("2 files were given, but the first is not split"),
        "{e}"
    );
    // A part that claims another count.
    let mut other_count = parse_all(&parts);
    other_count[2] = GgufFile::from_bytes(part_with(&whole, 2, count + 1, &[10], 0)).unwrap();
    let e = error_of(GgufFile::join(other_count));
    assert!(
        e.contains(&format!("part 3 says the model has {} parts", count + 1)),
        "{e}"
    );
    // A tensor in two parts: the last part carries a tensor of the first.
    let mut twice = parse_all(&parts);
    let last = count - 1;
    let mut names: Vec<usize> = plan_indices(&whole, 8, last);
    names.push(0);
    twice[last] = GgufFile::from_bytes(part_with(&whole, last, count, &names, 0)).unwrap();
    let e = error_of(GgufFile::join(twice));
    assert!(
        e.contains(&format!(
            "tensor 'token_embd.weight' is in part 1 and again in part {count}"
        )),
        "{e}"
    );
    // A tensor count the parts do not hold.
    let mut dropped = parse_all(&parts);
    let fewer = plan_indices(&whole, 8, last)[1..].to_vec();
    dropped[last] = GgufFile::from_bytes(part_with(&whole, last, count, &fewer, 0)).unwrap();
    let e = error_of(GgufFile::join(dropped));
    assert!(
        e.contains(&format!(
            "the parts hold {} tensors, the first part declares {}",
            whole.tensors().len() - 1,
            whole.tensors().len()
        )),
        "{e}"
    );
    // A split count of the wrong type.
    let mut bad_type = parse_all(&parts);
    bad_type[0] = GgufFile::from_bytes(part_with(&whole, 0, count, &[0], 1)).unwrap();
    let e = error_of(GgufFile::join(bad_type));
    assert!(
        e.contains("'split.count' has type u32, expected u16"),
        "{e}"
    );
}

/// Tensor indices of part `index` when split every `per_part` tensors.
fn plan_indices(whole: &GgufFile, per_part: usize, index: usize) -> Vec<usize> {
    let n = whole.tensors().len();
    (index * per_part..((index + 1) * per_part).min(n)).collect()
}

/// A hand-made part: `split.no` = `index`, `split.count` = `count` (as a u32
/// when `count_as_u32` is 1), the model's tensor count, and the tensors
/// `tensors` of `whole`.
fn part_with(
    whole: &GgufFile,
    index: usize,
    count: usize,
    tensors: &[usize],
    count_as_u32: u8,
) -> Vec<u8> {
    let mut layout = GgufLayout::new();
    layout
        .add_metadata("split.no", Value::U16(index as u16))
        .unwrap();
    layout
        .add_metadata(
            "split.tensors.count",
            Value::I32(whole.tensors().len() as i32),
        )
        .unwrap();
    let count_value = if count_as_u32 == 1 {
        Value::U32(count as u32)
    } else {
        Value::U16(count as u16)
    };
    layout.add_metadata("split.count", count_value).unwrap();
    for &i in tensors {
        let t = &whole.tensors()[i];
        layout
            .add_tensor(t.name.clone(), t.ggml_type, &t.shape)
            .unwrap();
    }
    let mut stream = layout.stream_to(Vec::new()).unwrap();
    for &i in tensors {
        let t = &whole.tensors()[i];
        stream
            .write_tensor(&t.name, whole.tensor_data(t).unwrap())
            .unwrap();
    }
    stream.finish().unwrap()
}

#[test]
fn split_sizes_follow_the_reference_rules() {
    let whole = GgufFile::from_bytes(family("qwen3").write()).unwrap();
    let n = whole.tensors().len();
    let by_tensors = |k: usize, no_first: bool| {
        plan_split(
            &whole,
            SplitOptions {
                limit: SplitLimit::Tensors(k),
                no_tensor_first_split: no_first,
            },
        )
        .unwrap()
    };
    let plan = by_tensors(8, false);
    assert_eq!(plan.len(), n.div_ceil(8));
    assert!(plan.iter().flatten().copied().eq(0..n));
    // The first part holds only metadata; the tensors follow as before.
    let plan = by_tensors(8, true);
    assert!(plan[0].is_empty());
    assert_eq!(plan.len(), n.div_ceil(8) + 1);
    // By size: each part's data (tensors padded to 32 bytes) within the
    // limit, and the next tensor would not have fitted.
    let padded = |i: usize| whole.tensors()[i].n_bytes.div_ceil(32) * 32;
    let max = (0..n).map(padded).max().unwrap();
    let plan = plan_split(
        &whole,
        SplitOptions {
            limit: SplitLimit::Bytes(max),
            no_tensor_first_split: false,
        },
    )
    .unwrap();
    assert!(plan.len() > 1);
    for w in plan.windows(2) {
        let used: u64 = w[0].iter().map(|&i| padded(i)).sum();
        assert!(used <= max);
        assert!(used + padded(w[1][0]) > max);
    }
    // A limit below the largest tensor leaves a part empty: refused.
    let e = plan_split(
        &whole,
        SplitOptions {
            limit: SplitLimit::Bytes(16),
            no_tensor_first_split: false,
        },
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("alone is over the split size"),
        "{e}"
    );
    assert_eq!(
        SplitLimit::parse_size("40M").unwrap(),
        SplitLimit::Bytes(40_000_000)
    );
    assert_eq!(
        SplitLimit::parse_size("2G").unwrap(),
        SplitLimit::Bytes(2_000_000_000)
    );
    for bad in ["40", "0M", "-1M", "1.5G", "M", "40K"] {
        assert!(SplitLimit::parse_size(bad).is_err(), "{bad}");
    }
}

/// The files themselves: `lamina split` and `merge` against the reference's
/// `llama-gguf-split`, and a model opened by its first part's path.
#[cfg(not(target_arch = "wasm32"))]
mod files {
    use super::*;
    use common::{golden_path, model_path, read_file, sha256_hex, REPO};
    use lamina::gguf::split_write::{write_merged, write_split};
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output};

    fn scratch(name: &str) -> PathBuf {
        let dir = Path::new(REPO).join("target/split-tests").join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn lamina(args: &[&str]) -> Output {
        let exe = env!("CARGO_BIN_EXE_lamina");
        let mut cmd = match std::env::var("LAMINA_EXEC_WRAPPER") {
            Ok(w) if !w.is_empty() => {
                let mut parts = w.split_whitespace();
                let mut c = Command::new(parts.next().unwrap());
                c.args(parts).arg(exe);
                c
            }
            _ => Command::new(exe),
        };
        cmd.args(args).output().unwrap()
    }

    /// The reference's sha256 of each file, from
    /// native-tests/golden/families/split.txt (scripts/reference/make-goldens.sh).
    fn reference(case: &str) -> Vec<String> {
        let text = String::from_utf8(read_file(&golden_path("families/split.txt"))).unwrap();
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split(' ').collect::<Vec<_>>())
            .filter(|f| f[0] == case)
            .map(|f| f[2].to_string())
            .collect()
    }

    fn sha_of(path: &Path) -> String {
        sha256_hex(&std::fs::read(path).unwrap())
    }

    #[test]
    fn split_and_merge_like_llama_gguf_split() {
        let dir = scratch("reference");
        let model = GgufFile::open(model_path("SmolLM2-135M-Instruct.Q4_1.gguf")).unwrap();
        for (case, limit) in [
            ("size-40M", SplitLimit::Bytes(40_000_000)),
            ("tensors-100", SplitLimit::Tensors(100)),
        ] {
            let prefix = dir.join(case);
            let options = SplitOptions {
                limit,
                no_tensor_first_split: false,
            };
            let written = write_split(&model, prefix.to_str().unwrap(), options).unwrap();
            let shas: Vec<String> = written.iter().map(|p| sha_of(&p.path)).collect();
            assert_eq!(shas, reference(case), "{case}");
            let joined = GgufFile::open(&written[0].path).unwrap();
            assert_eq!(joined.part_count(), written.len());
            let merged = dir.join(format!("{case}-merged.gguf"));
            write_merged(&joined, &merged).unwrap();
            assert_eq!(
                vec![sha_of(&merged)],
                reference(&format!("{case}-merged")),
                "{case} merged"
            );
        }
    }

    #[test]
    fn a_split_model_opens_by_its_first_part() {
        let dir = scratch("open");
        let whole = GgufFile::from_bytes(family("qwen3").write()).unwrap();
        let prefix = dir.join("qwen3");
        let options = SplitOptions {
            limit: SplitLimit::Tensors(8),
            no_tensor_first_split: false,
        };
        let written = write_split(&whole, prefix.to_str().unwrap(), options).unwrap();
        let count = written.len();
        let first = GgufFile::open(&written[0].path).unwrap();
        assert_eq!(first.part_count(), count);
        assert_eq!(first.paths().len(), count);
        assert_eq!(
            logits(first),
            logits(GgufFile::from_bytes(family("qwen3").write()).unwrap())
        );
        // A later part opens alone (for `info`), and names the first when
        // loaded as a model.
        let second = GgufFile::open(&written[1].path).unwrap();
        assert_eq!(second.part_count(), 1);
        let device = CpuDevice::new(None).unwrap().shared();
        let e = Model::load(Arc::new(second), device, None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains(&format!(
                "load the model from its first part ({})",
                written[0].path.display()
            )),
            "{e}"
        );
        // A missing part: the error names it.
        std::fs::remove_file(&written[2].path).unwrap();
        let e = GgufFile::open(&written[0].path).unwrap_err().to_string();
        assert!(e.contains(&format!("part 3 of {count}")), "{e}");
        assert!(e.contains(&written[2].path.display().to_string()), "{e}");
        // The first part renamed: the others cannot be found by name.
        let renamed = dir.join("renamed.gguf");
        std::fs::rename(&written[0].path, &renamed).unwrap();
        let e = GgufFile::open(&renamed).unwrap_err().to_string();
        assert!(e.contains("is not named PREFIX-00001-of-"), "{e}");
    }

    #[test]
    fn the_cli_splits_describes_and_merges() {
        let dir = scratch("cli");
        let model = dir.join("qwen3.gguf");
        std::fs::write(&model, family("qwen3").write()).unwrap();
        let (m, prefix) = (model.to_str().unwrap(), dir.join("part"));
        let p = prefix.to_str().unwrap();
        let out = lamina(&["split", "--split-max-tensors", "8", m, p, "--dry-run"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let plan = String::from_utf8(out.stdout).unwrap();
        let n_parts: usize = plan.split(' ').next().unwrap().parse().unwrap();
        assert!(plan.contains("part 00001: 8 tensors"), "{plan}");
        assert!(!dir
            .join(format!("part-00001-of-{n_parts:05}.gguf"))
            .exists());
        let out = lamina(&["split", "--split-max-tensors", "8", m, p]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let first = dir.join(format!("part-00001-of-{n_parts:05}.gguf"));
        let info = lamina(&["info", first.to_str().unwrap()]);
        let text = String::from_utf8(info.stdout).unwrap();
        assert!(text.contains(&format!("parts ({n_parts}):")), "{text}");
        let info = lamina(&["info", "--json", first.to_str().unwrap()]);
        let j: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
        assert_eq!(j["parts"].as_array().unwrap().len(), n_parts);
        assert_eq!(j["model"]["architecture"], "qwen3");
        // Splitting the parts onto themselves is refused, and leaves them.
        let before = sha_of(&first);
        let out = lamina(&[
            "split",
            "--split-max-tensors",
            "8",
            first.to_str().unwrap(),
            p,
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("does not write over the file it reads"),
            "{stderr}"
        );
        assert_eq!(sha_of(&first), before);
        // Merged: the model again, with split.count 0.
        let merged = dir.join("merged.gguf");
        let out = lamina(&["merge", first.to_str().unwrap(), merged.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let file = GgufFile::open(&merged).unwrap();
        assert_eq!(file.metadata().get_u16("split.count").unwrap(), 0);
        assert_eq!(logits(file), logits(GgufFile::open(&model).unwrap()));
        // Merging a file that is not split is refused.
        let out = lamina(&["merge", m, dir.join("again.gguf").to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("is not the first part of a split model"),
            "{stderr}"
        );
    }
}
