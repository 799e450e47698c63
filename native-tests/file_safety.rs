//! Files lamina writes are never lost: `lamina quantize` refuses to write
//! over its input (by path, hard link or symbolic link) before opening
//! anything for writing, a failed write leaves the old target and no
//! temporary behind, and the streamed output equals the in-memory one.
//! A mapped model's pages that the device has copied are released from
//! the process's resident memory, and still read the same bytes.
//! Native only (wasm has no file system); under qemu, scripts/test.sh names
//! the emulator in LAMINA_EXEC_WRAPPER.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{ggml_test_values, REPO};
use lamina::gguf::{GgufFile, GgufWriter, Value};
use lamina::output_file::OutputFile;
use lamina::requantize::{requantize, requantize_to, Target};
use lamina::tensor::GgmlType;

fn lamina(args: &[&str]) -> Output {
    let exe = env!("CARGO_BIN_EXE_lamina");
    let wrapper = std::env::var("LAMINA_EXEC_WRAPPER").unwrap_or_default();
    let mut words = wrapper.split_whitespace();
    let mut cmd = match words.next() {
        Some(program) => {
            let mut c = Command::new(program);
            c.args(words).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    cmd.args(args).output().expect("run lamina")
}

/// A fresh directory under target/ for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(REPO).join("target/file-safety").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A small llama-shaped GGUF file: two F32 matrices and a norm.
fn small_model() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add_metadata("general.architecture", Value::String("llama".into()))
        .unwrap();
    w.add_metadata("llama.block_count", Value::U32(1)).unwrap();
    let f32_bytes = |seed: u64, n: usize| -> Vec<u8> {
        ggml_test_values(seed, n)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect()
    };
    w.add_tensor(
        "output_norm.weight",
        GgmlType::F32,
        &[256],
        f32_bytes(1, 256),
    )
    .unwrap();
    w.add_tensor(
        "blk.0.ffn_up.weight",
        GgmlType::F32,
        &[256, 16],
        f32_bytes(2, 4096),
    )
    .unwrap();
    w.add_tensor(
        "blk.0.ffn_down.weight",
        GgmlType::F32,
        &[512, 8],
        f32_bytes(3, 4096),
    )
    .unwrap();
    w.to_bytes()
}

/// Files in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn assert_refused(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
    assert!(
        stderr.contains("does not write over the file it reads"),
        "{what}: {stderr}"
    );
}

#[test]
fn quantize_refuses_to_write_over_its_input() {
    let dir = scratch("over-input");
    let model = small_model();
    let input = dir.join("model.gguf");
    std::fs::write(&input, &model).unwrap();
    let hard = dir.join("hard-link.gguf");
    std::fs::hard_link(&input, &hard).unwrap();
    let soft = dir.join("symlink.gguf");
    std::os::unix::fs::symlink(&input, &soft).unwrap();
    let dotted = dir.join("sub/../model.gguf");
    std::fs::create_dir(dir.join("sub")).unwrap();
    let i = input.to_str().unwrap();
    for (output, what) in [
        (&input, "the same path"),
        (&hard, "a hard link"),
        (&soft, "a symbolic link"),
        (&dotted, "another spelling of the path"),
    ] {
        assert_refused(
            &lamina(&["quantize", i, output.to_str().unwrap(), "Q8_0"]),
            what,
        );
        assert_eq!(
            std::fs::read(&input).unwrap(),
            model,
            "{what}: the input changed"
        );
    }
    // The input through a link, the output the file itself.
    assert_refused(
        &lamina(&["quantize", soft.to_str().unwrap(), i, "Q8_0"]),
        "input through a link",
    );
    assert_eq!(std::fs::read(&input).unwrap(), model);
    assert_eq!(
        listing(&dir),
        ["hard-link.gguf", "model.gguf", "sub", "symlink.gguf"],
        "no temporary is left"
    );
}

#[test]
fn a_failed_quantize_keeps_the_old_output_and_leaves_no_temporary() {
    let dir = scratch("failed");
    let output = dir.join("out.gguf");
    std::fs::write(&output, b"the previous output").unwrap();
    let not_gguf = dir.join("not-a-model.gguf");
    std::fs::write(&not_gguf, b"plain text, not a GGUF file").unwrap();
    let out = lamina(&[
        "quantize",
        not_gguf.to_str().unwrap(),
        output.to_str().unwrap(),
        "Q8_0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read(&output).unwrap(), b"the previous output");
    assert_eq!(listing(&dir), ["not-a-model.gguf", "out.gguf"]);
    // A directory that does not exist: an error naming the temporary's
    // path, nothing created.
    let out = lamina(&[
        "quantize",
        not_gguf.to_str().unwrap(),
        dir.join("missing/out.gguf").to_str().unwrap(),
        "Q8_0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot create"));
    assert_eq!(listing(&dir), ["not-a-model.gguf", "out.gguf"]);
}

#[test]
fn quantize_replaces_the_output_with_the_streamed_file() {
    let dir = scratch("replace");
    let model = small_model();
    let input = dir.join("model.gguf");
    std::fs::write(&input, &model).unwrap();
    let output = dir.join("out.gguf");
    std::fs::write(&output, b"the previous output").unwrap();
    let out = lamina(&[
        "quantize",
        input.to_str().unwrap(),
        output.to_str().unwrap(),
        "Q8_0",
        "-t",
        "2",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = GgufFile::from_bytes(model).unwrap();
    let want = requantize(&file, Target::from_name("Q8_0").unwrap(), |_, _| {}).unwrap();
    assert_eq!(std::fs::read(&output).unwrap(), want);
    assert_eq!(listing(&dir), ["model.gguf", "out.gguf"]);
}

/// A writer that fails after `room` bytes, like a full disk.
struct FullDisk {
    room: usize,
}

impl std::io::Write for FullDisk {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.room == 0 {
            return Err(std::io::Error::other("no space left on device"));
        }
        let n = buf.len().min(self.room);
        self.room -= n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_write_error_is_returned_and_the_temporary_removed() {
    let file = GgufFile::from_bytes(small_model()).unwrap();
    let workers = lamina::parallel::Workers::new(1).unwrap();
    let target = Target::from_name("Q8_0").unwrap();
    for room in [0, 100, 5000] {
        let err = requantize_to(&file, target, &workers, FullDisk { room }, |_, _| {})
            .err()
            .expect("a full disk is an error");
        assert!(err.to_string().contains("no space left"), "{err}");
    }

    let dir = scratch("temporary");
    let target_path = dir.join("out.gguf");
    std::fs::write(&target_path, b"old").unwrap();
    let mut out = OutputFile::create(&target_path, &[]).unwrap();
    std::io::Write::write_all(&mut out, b"half of a file").unwrap();
    assert!(out.temp_path().exists());
    drop(out);
    assert_eq!(listing(&dir), ["out.gguf"]);
    assert_eq!(std::fs::read(&target_path).unwrap(), b"old");
    let mut out = OutputFile::create(&target_path, &[]).unwrap();
    std::io::Write::write_all(&mut out, b"new").unwrap();
    out.commit().unwrap();
    assert_eq!(listing(&dir), ["out.gguf"]);
    assert_eq!(std::fs::read(&target_path).unwrap(), b"new");
}

/// Resident kB of this process's mappings of `path` (/proc/self/smaps).
fn resident_kb(path: &Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let name = path.to_str().unwrap();
    let mut inside = false;
    let mut kb = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            // A mapping's header: "start-end perms offset dev inode path".
            inside = line.ends_with(name);
        } else if inside && first == "Rss:" {
            kb += line
                .split_whitespace()
                .nth(1)
                .unwrap()
                .parse::<u64>()
                .unwrap();
        }
    }
    kb
}

/// `release_pages` drops the mapped pages of a range from the process's
/// resident memory (checked natively on x86_64 Linux: qemu-user reports no
/// resident sizes), reading the range afterwards gives the same bytes, and
/// ranges outside the file or its parts change nothing.
#[test]
fn released_pages_read_the_same_bytes() {
    let path = scratch("release_pages").join("w.gguf");
    let bytes: Vec<u8> = ggml_test_values(7, 1024 * 1024)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let mut w = GgufWriter::new();
    w.add_tensor("w", GgmlType::F32, &[1024, 1024], bytes.clone())
        .unwrap();
    std::fs::write(&path, w.to_bytes()).unwrap();
    let file = GgufFile::open(&path).unwrap();
    let info = file.tensor("w").unwrap();
    let start = (file.data_offset() + info.offset) as usize;
    let range = start..start + info.n_bytes as usize;
    let native = cfg!(all(target_os = "linux", target_arch = "x86_64"));
    assert_eq!(&file.part_bytes(0)[range.clone()], &bytes[..]);
    if native {
        // All 4 MiB were read just now.
        assert!(resident_kb(&path) >= 4096, "{} kB", resident_kb(&path));
    }
    file.release_pages(0, range.clone());
    if native {
        // At most the pages around the range's ends (header and tail).
        assert!(resident_kb(&path) <= 16, "{} kB", resident_kb(&path));
    }
    let len = file.part_bytes(0).len();
    file.release_pages(0, len..len + 4096);
    file.release_pages(0, 10..5);
    file.release_pages(3, range.clone());
    assert_eq!(&file.part_bytes(0)[range], &bytes[..]);
}
