//! The module layers hold: no top-level module of `src/` uses one from a
//! layer above it, and no two top-level modules use each other through any
//! path (no cycles). The layers, from the bottom (ARCHITECTURE.md draws
//! them): foundations, tensor types, the file format and tokenizers, the
//! thread pool, the backend, the KV storage, the architectures, the context, the
//! services built on it, the bindings.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// Each top-level module and its layer (a module may use modules of its own
/// layer or below; cycles are checked separately).
const LAYERS: &[(&str, u32)] = &[
    ("error", 0),
    ("stopwatch", 0),
    ("memory", 0),
    ("log", 0),
    ("tensor", 1),
    ("output_file", 1),
    ("gguf", 2),
    ("tokenizer", 2),
    ("parallel", 3),
    ("backend", 4),
    ("kv", 5),
    ("model", 6),
    ("lora", 6),
    ("context", 7),
    ("sampling", 8),
    ("chat", 8),
    ("completion", 8),
    ("embedding", 8),
    ("perplexity", 8),
    ("bench", 8),
    ("session", 8),
    ("requantize", 8),
    ("kernel_bench", 8),
    ("wasm", 9),
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Which top-level modules each top-level module's files name as `crate::X`
/// (tests inside the files included: they are part of the module).
fn uses() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(REPO).join("src");
    let known: BTreeSet<&str> = LAYERS.iter().map(|(m, _)| *m).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if !known.contains(module.as_str()) {
            continue; // lib.rs and the CLI (src/bin) sit above everything
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let entry = graph.entry(module.clone()).or_default();
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            // `crate::{a, b}` groups.
            if rest.starts_with('{') {
                let group = &rest[1..rest.find('}').unwrap_or(1)];
                for part in group.split(',') {
                    let n = part.trim().split("::").next().unwrap_or("").trim();
                    if known.contains(n) && n != module {
                        entry.insert(n.to_string());
                    }
                }
            } else if known.contains(name.as_str()) && name != module {
                entry.insert(name);
            }
        }
    }
    graph
}

#[test]
fn no_module_uses_a_layer_above_it() {
    let layer: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut wrong = Vec::new();
    for (m, used) in uses() {
        for u in used {
            if layer[u.as_str()] > layer[m.as_str()] {
                wrong.push(format!(
                    "{m} (layer {}) uses {u} (layer {})",
                    layer[m.as_str()],
                    layer[u.as_str()]
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "layer violations:\n{}", wrong.join("\n"));
}

#[test]
fn top_level_modules_have_no_cycles() {
    let graph = uses();
    // Depth-first search for a back edge, reporting the cycle.
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut cycle = path[i..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for u in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(u, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        if let Some(cycle) = visit(m, &graph, &mut Vec::new(), &mut done) {
            panic!("module cycle: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn every_top_level_module_has_a_layer() {
    let src = Path::new(REPO).join("src");
    let known: BTreeSet<&str> = LAYERS.iter().map(|(m, _)| *m).collect();
    for entry in std::fs::read_dir(&src).unwrap() {
        let name = entry
            .unwrap()
            .file_name()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if name == "lib" || name == "bin" {
            continue;
        }
        assert!(
            known.contains(name.as_str()),
            "src/{name} has no layer in native-tests/layers.rs"
        );
    }
}
