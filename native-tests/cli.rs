//! The `lamina` command line. Native only (a wasm32 build has no CLI); under
//! qemu, scripts/test.sh names the emulator in LAMINA_EXEC_WRAPPER.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::process::{Command, Output};

use common::{golden_path, model_path, REPO};

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

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "lamina failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

#[test]
fn info_prints_the_tensor_table() {
    let out = stdout(&lamina(&[
        "info",
        &model_path("SmolLM2-135M-Instruct.Q4_1.gguf"),
    ]));
    assert!(
        out.starts_with("GGUF v3: 33 metadata keys, 272 tensors, alignment 32"),
        "{out}"
    );
    assert!(out.contains("general.architecture"));
    assert!(out.contains("\"llama\""));
    assert!(out.contains("[string; 49152]"));
    let embd = out
        .lines()
        .find(|l| l.contains("token_embd.weight"))
        .unwrap();
    let cols: Vec<&str> = embd.split_whitespace().collect();
    assert_eq!(
        cols,
        [
            "0",
            "token_embd.weight",
            "Q8_0",
            "[576,",
            "49152]",
            "0",
            "30081024"
        ]
    );
    assert!(
        out.contains("totals: 272 tensors (61 F32, 210 Q4_1, 1 Q8_0)"),
        "{out}"
    );
}

#[test]
fn info_json() {
    let out = stdout(&lamina(&[
        "info",
        &model_path("SmolLM2-135M-Instruct.Q4_1.gguf"),
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(v["version"], 3);
    assert_eq!(v["metadata"]["general.architecture"], "llama");
    assert_eq!(v["metadata"]["llama.block_count"], 30);
    assert_eq!(
        v["metadata"]["llama.attention.layer_norm_rms_epsilon"],
        1e-5
    );
    assert_eq!(v["metadata"].as_object().unwrap().len(), 33);
    // Keys in file order.
    assert_eq!(
        v["metadata"].as_object().unwrap().keys().next().unwrap(),
        "general.architecture"
    );
    let tokens = &v["metadata"]["tokenizer.ggml.tokens"];
    assert_eq!(tokens["element_type"], "string");
    assert_eq!(tokens["len"], 49152);
    assert_eq!(tokens["head"][1], "<|im_start|>");
    let tensors = v["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), 272);
    assert_eq!(
        tensors[0],
        serde_json::json!({"name": "token_embd.weight", "type": "Q8_0",
            "shape": [576, 49152], "offset": 0, "bytes": 30081024, "part": 0})
    );
    let parts = v["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0]["bytes"], v["file_bytes"]);
    assert_eq!(parts[0]["tensors"], 272);
    assert!(parts[0]["path"]
        .as_str()
        .unwrap()
        .ends_with("SmolLM2-135M-Instruct.Q4_1.gguf"));
    assert_eq!(v["totals"]["by_type"]["Q4_1"], 210);
    assert_eq!(v["model"]["architecture"], "llama");
    assert_eq!(
        v["model"]["hyperparameters"][2][1],
        "9 heads, 3 KV heads of 64"
    );
}

/// `info` names the architecture's hyperparameters as lamina reads them:
/// Gemma 3's two kinds of layers, its scales.
#[test]
fn info_names_gemma3_hyperparameters() {
    let out = stdout(&lamina(&["info", &model_path("gemma-3-270m-q4_k_m.gguf")]));
    let model = &out[out
        .find("model: gemma3, as lamina runs it")
        .expect("model section")..];
    for want in [
        "attention          4 heads, 1 KV heads of 256",
        "feed-forward       2048 (GeluTanh)",
        "rope Neox over 256 dims, base 10000, scale 1; sliding window 512: layers [0, 1, 2, 3, 4, 6,",
        "rope Neox over 256 dims, base 1000000, scale 1; full attention: layers [5, 11, 17]",
        "embedding scale    25.298222",
        "query scale        0.0625",
    ] {
        assert!(model.contains(want), "{want:?} not in:\n{model}");
    }
    // A file lamina cannot run says why.
    let out = stdout(&lamina(&[
        "info",
        &format!("{REPO}/models/vocab/ggml-vocab-qwen35.gguf"),
    ]));
    assert!(out.contains("model: lamina cannot run it: "), "{out}");
}

#[test]
fn bad_input_exits_1_with_the_message() {
    let out = lamina(&["info", &format!("{REPO}/Cargo.toml")]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim(),
        "lamina: not a GGUF file: starts with 5b 70 61 63"
    );
    assert!(out.stdout.is_empty());

    let out = lamina(&["info", "/nonexistent.gguf"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot open /nonexistent.gguf"));
}

#[test]
fn devices_reports_the_selected_variant() {
    let out = stdout(&lamina(&["devices", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0]["kind"], "cpu");
    let variants = devices[0]["variants"].as_array().unwrap();
    let names: Vec<&str> = variants
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "scalar",
            "avx2",
            "avx-vnni",
            "avx512",
            "neon",
            "neon-dotprod",
            "neon-i8mm",
            "sve",
            "simd128",
            "relaxed-simd"
        ]
    );
    let selected: Vec<&str> = variants
        .iter()
        .filter(|v| v["selected"] == true)
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(selected.len(), 1);
    if let Ok(expected) = std::env::var("LAMINA_EXPECT_VARIANT") {
        assert_eq!(selected[0], expected);
    }
    assert!(variants
        .iter()
        .all(|v| v["supported"] == false || v["compiled"] == true));

    let out = stdout(&lamina(&["--cpu-variant", "scalar", "devices", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["devices"][0]["forced"], true);
    assert_eq!(v["devices"][0]["variants"][0]["selected"], true);

    let out = lamina(&["--cpu-variant", "simd128", "devices"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CPU variant 'simd128' cannot run here"));
}

#[test]
fn tokenize_command() {
    let model = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    let out = stdout(&lamina(&[
        "tokenize",
        "-m",
        &model,
        "-p",
        "<|im_start|>user\nHi",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ids"][0], 1);
    assert_eq!(v["pieces"][0], "<|im_start|>");
    let out = stdout(&lamina(&[
        "tokenize",
        "-m",
        &model,
        "-p",
        "<|im_start|>",
        "--no-parse-special",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["ids"].as_array().unwrap().len() > 1, "split as text: {v}");
    // Vocab-only files work; a missing text is an error.
    let vocab = format!("{REPO}/native-tests/golden/vocab/ggml-vocab-gpt-2.gguf");
    let out = stdout(&lamina(&[
        "tokenize",
        "-m",
        &vocab,
        "-p",
        "Hello world",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ids"], serde_json::json!([15496, 995]));
    let out = lamina(&["tokenize", "-m", &vocab]);
    assert_ne!(out.status.code(), Some(0));
}

/// Greedy generation through the CLI reproduces llama.cpp's first tokens (up to
/// the golden file's first near-tie, step 5 of this prompt).
#[test]
fn run_greedy_json() {
    let model = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    let out = stdout(&lamina(&[
        "run",
        "-m",
        &model,
        "-p",
        "The capital of France is",
        "-n",
        "5",
        "--temp",
        "0",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["prompt_ids"],
        serde_json::json!([504, 3575, 282, 4649, 314])
    );
    assert_eq!(
        v["generated_ids"],
        serde_json::json!([7042, 30, 198, 198, 504])
    );
    assert_eq!(v["text"], " Paris.\n\nThe");
    assert_eq!(v["stop_reason"], "limit");
    assert_eq!(v["timings"]["predicted_n"], 5);
    // Bad parameters are errors, not crashes.
    let out = lamina(&["run", "-m", &model, "-p", "Hello", "--ctk", "q4_0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsupported KV cache type 'q4_0'"));
    let out = lamina(&["run", "-m", &model, "-p", "Hello", "--mirostat", "3"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("mirostat must be 0, 1 or 2"));
    let out = lamina(&[
        "run",
        "-m",
        &model,
        "-p",
        "Hello",
        "--xtc-probability",
        "1.5",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("xtc_probability must be between 0 and 1, got 1.5"));
    let out = lamina(&["run", "-m", &model, "-p", "Hello", "--top-nsigma", "nan"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("top_n_sigma must be a finite number"));
    let out = lamina(&["run", "-m", &model, "-p", "Hello", "-t", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("threads must be at least 1"));
}

/// --grammar and --grammar-file constrain the output as llama.cpp's
/// llama-completion does (the golden's text); a grammar that does not parse
/// and a file that cannot be read are errors naming why.
/// `--json-schema-file` holds the output to a schema (greedy: the person
/// the prompt describes); a schema that cannot be read (`-j`) is an error
/// naming where, before the model loads.
#[test]
fn run_with_a_json_schema() {
    let model = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    let schema = r#"{"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
        "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name", "age"],
        "additionalProperties": false}"#;
    let file = std::env::temp_dir().join(format!("lamina-cli-schema-{}.json", std::process::id()));
    std::fs::write(&file, schema).unwrap();
    let prompt = "Describe a person named Tom who is 32 years old, as JSON:";
    let args = [
        "run", "-m", &model, "-p", prompt, "--temp", "0", "-n", "64", "--json",
    ];
    let out = lamina(&[&args[..], &["--json-schema-file", file.to_str().unwrap()]].concat());
    std::fs::remove_file(&file).unwrap();
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["stop_reason"], "eos");
    let person: serde_json::Value = serde_json::from_str(v["text"].as_str().unwrap()).unwrap();
    assert_eq!(person, serde_json::json!({"name": "Tom", "age": 32}));
    let out = lamina(&[
        "run",
        "-m",
        &model,
        "-p",
        "x",
        "-j",
        r#"{"items": {"type": 3}}"#,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("JSON schema error at #/items: type must be a string"),
        "{err}"
    );
}

/// `--chat-template` and `--chat-template-file` in place of the model's.
#[test]
fn run_chat_with_another_template() {
    let model = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    let file =
        std::env::temp_dir().join(format!("lamina-cli-template-{}.jinja", std::process::id()));
    std::fs::write(
        &file,
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>",
    )
    .unwrap();
    let base = [
        "run", "-m", &model, "-p", "Hi", "-n", "1", "--temp", "0", "--json", "--chat",
    ];
    let prompt = |extra: &[&str]| {
        let v: serde_json::Value =
            serde_json::from_str(&stdout(&lamina(&[&base[..], extra].concat()))).unwrap();
        v["prompt"].as_str().unwrap().to_string()
    };
    assert!(prompt(&["--chat-template", "llama2"]).contains("[INST]"));
    assert_eq!(
        prompt(&["--chat-template-file", file.to_str().unwrap()]),
        "<user>Hi<assistant>"
    );
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn run_with_a_grammar() {
    let model = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    let g: serde_json::Value =
        serde_json::from_slice(&std::fs::read(golden_path("grammar/arithmetic.json")).unwrap())
            .unwrap();
    let grammar = g["grammar"].as_str().unwrap();
    let file = std::env::temp_dir().join(format!("lamina-cli-grammar-{}.gbnf", std::process::id()));
    std::fs::write(&file, grammar).unwrap();
    for args in [
        vec!["--grammar", grammar],
        vec!["--grammar-file", file.to_str().unwrap()],
    ] {
        let mut all = vec![
            "run",
            "-m",
            &model,
            "-p",
            g["prompt"].as_str().unwrap(),
            "--temp",
            "0",
            "-n",
            "8",
            "--json",
        ];
        all.extend(args);
        let v: serde_json::Value = serde_json::from_str(&stdout(&lamina(&all))).unwrap();
        assert_eq!(v["text"], g["text"]);
        assert_eq!(v["stop_reason"], "eos");
    }
    std::fs::remove_file(&file).unwrap();
    let out = lamina(&["run", "-m", &model, "-p", "x", "--grammar", "root ::= [a-"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("grammar line 1, column 13: unexpected end of input"),
        "{err}"
    );
    let out = lamina(&[
        "run",
        "-m",
        &model,
        "-p",
        "x",
        "--grammar-file",
        "/nonexistent.gbnf",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("cannot read the grammar file /nonexistent.gbnf"));
}

/// --chat renders the prompt with the model's template; two threads and a
/// stop string.
#[test]
fn run_chat_two_threads() {
    let model = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    let out = stdout(&lamina(&[
        "run",
        "-m",
        &model,
        "--chat",
        "-p",
        "What is 2+2?",
        "-n",
        "16",
        "--temp",
        "0",
        "-t",
        "2",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["prompt"],
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    );
    assert_eq!(v["n_threads"], 2);
    assert_eq!(v["generated_ids"][0], 504);
    let out = stdout(&lamina(&[
        "run",
        "-m",
        &model,
        "--chat",
        "-p",
        "What is 2+2?",
        "-n",
        "16",
        "--temp",
        "0",
        "--stop",
        "answer",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["text"], "The ");
    assert_eq!(v["stop_reason"], "word");
    assert_eq!(v["stopping_word"], "answer");
}

/// The whole sampler chain from the command line: seeded runs repeat, and
/// mirostat 2 and the penalties take effect.
#[test]
fn run_sampler_options() {
    let model = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    let ids = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "-m",
            &model,
            "-p",
            "Once upon a time",
            "-n",
            "12",
            "--seed",
            "7",
            "--json",
        ];
        args.extend_from_slice(extra);
        let v: serde_json::Value = serde_json::from_str(&stdout(&lamina(&args))).unwrap();
        v["generated_ids"].clone()
    };
    let plain = ids(&[]);
    assert_eq!(plain, ids(&[]), "a seeded run repeats");
    let miro = ids(&[
        "--mirostat",
        "2",
        "--mirostat-ent",
        "3",
        "--mirostat-lr",
        "0.2",
    ]);
    assert_eq!(
        miro,
        ids(&[
            "--mirostat",
            "2",
            "--mirostat-ent",
            "3",
            "--mirostat-lr",
            "0.2"
        ])
    );
    assert_ne!(miro, plain);
    let greedy = ids(&["--temp", "0"]);
    let penalized = ids(&[
        "--temp",
        "0",
        "--frequency-penalty",
        "5",
        "--presence-penalty",
        "5",
        "--repeat-last-n",
        "-1",
    ]);
    assert_ne!(penalized, greedy, "strong penalties change a greedy run");
    let typical = ids(&["--typical", "0.5"]);
    assert_eq!(typical, ids(&["--typical", "0.5"]));
    // -l bans " Paris" (7042), as llama.cpp's -l 7042-inf: greedy goes elsewhere.
    let capital = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "-m",
            &model,
            "-p",
            "The capital of France is",
            "-n",
            "4",
            "--temp",
            "0",
        ];
        args.extend_from_slice(extra);
        stdout(&lamina(&args))
    };
    assert!(capital(&[]).starts_with(" Paris"));
    assert_eq!(
        capital(&["-l", "7042-inf"]).trim_end(),
        " the capital of the"
    );
    // DRY, greedy: the repeated list's next "," (28) would extend a repeat
    // of the prompt, so DRY makes it "." (30), as llama.cpp's does. The
    // penalty (multiplier × base^(repeat − 2)) is set away from near ties,
    // where rounding may decide (the golden README's gap rule): at the first
    // token " Wednesday" leads " Thursday" by about 2.4 and its repeat of 4
    // costs 0.1 × 4² = 1.6; at the second "," leads "." by 3.6 and its
    // repeat of 5 costs 6.4. (The default base, 1.75, with a multiplier of
    // 0.8 costs the first token 2.45: the kernels' rounding decided it.)
    let days = "List the days of the week: Monday, Tuesday, Wednesday, Thursday, Friday, \
                Saturday, Sunday. Again: Monday, Tuesday,";
    let first_two = |extra: &[&str]| {
        let mut args = vec![
            "run", "-m", &model, "-p", days, "-n", "2", "--temp", "0", "--json",
        ];
        args.extend_from_slice(extra);
        let v: serde_json::Value = serde_json::from_str(&stdout(&lamina(&args))).unwrap();
        v["generated_ids"].clone()
    };
    assert_eq!(first_two(&[]), serde_json::json!([15083, 28]));
    let dry = ["--dry-multiplier", "0.1", "--dry-base", "4"];
    assert_eq!(first_two(&dry), serde_json::json!([15083, 30]));
    // A "," breaker stops the repeat before it reaches the ",".
    let broken = first_two(&[&dry[..], &["--dry-sequence-breaker", ","]].concat());
    assert_eq!(broken, serde_json::json!([15083, 28]));
}

#[test]
fn nonsense_sampler_values_are_errors_naming_them() {
    let model = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    for (flag, value, name) in [
        ("--temp", "nan", "temperature"),
        ("--repeat-penalty", "nan", "penalty_repeat"),
        ("--min-p", "2", "min_p"),
        ("--top-p", "-0.5", "top_p"),
        ("--repeat-last-n", "-2", "penalty_last_n"),
        ("--dry-multiplier", "-1", "dry_multiplier"),
        ("--dry-penalty-last-n", "-2", "dry_penalty_last_n"),
        ("--logit-bias", "7042*2", "expected TOKEN+BIAS"),
    ] {
        let arg = format!("{flag}={value}");
        let out = lamina(&["run", "-m", &model, "-p", "Hi", "-n", "2", &arg]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag} {value}: {stderr}");
        assert!(stderr.contains(name), "{flag} {value}: {stderr}");
    }
}

#[test]
fn more_threads_than_cores_warn_and_absurd_counts_are_errors() {
    let model = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    let cores = std::thread::available_parallelism().unwrap().get();
    let over = (cores + 1).to_string();
    let out = lamina(&["tokenize", "-m", &model, "-p", "hi", "-t", &over]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("warning: {over} threads on {cores} cores")),
        "{stderr}"
    );
    let out = lamina(&["run", "-m", &model, "-p", "hi", "-n", "1", "-t", "100000"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("100000 threads is too many"), "{stderr}");
}

#[test]
fn bench_json_has_llama_bench_keys() {
    let model = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    let out = stdout(&lamina(&[
        "bench", "-m", &model, "-p", "8", "-n", "4", "-r", "2", "-t", "1", "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0]["n_prompt"].as_u64(), rows[0]["n_gen"].as_u64()),
        (Some(8), Some(0))
    );
    assert_eq!(
        (rows[1]["n_prompt"].as_u64(), rows[1]["n_gen"].as_u64()),
        (Some(0), Some(4))
    );
    for r in rows {
        assert_eq!(r["n_threads"], 1);
        assert!(r["avg_ts"].as_f64().unwrap() > 0.0);
        assert!(r["stddev_ts"].as_f64().unwrap() >= 0.0);
        assert_eq!(r["samples_ts"].as_array().unwrap().len(), 2);
    }
    let out = lamina(&["bench", "-m", &model, "-p", "8", "-n", "4", "-r", "0"]);
    assert_eq!(out.status.code(), Some(1));
    // tg in 3 sequences at once (llama.rn's pl): t/s count all 12 tokens.
    let out = stdout(&lamina(&[
        "bench",
        "-m",
        &model,
        "-p",
        "0",
        "-n",
        "4",
        "-r",
        "1",
        "--parallel",
        "3",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = &v.as_array().unwrap()[0];
    assert_eq!(
        (row["n_gen"].as_u64(), row["n_parallel"].as_u64()),
        (Some(4), Some(3))
    );
    let ts = row["avg_ts"].as_f64().unwrap();
    assert!(
        (ts - 12e9 / row["avg_ns"].as_f64().unwrap()).abs() < 1e-6 * ts,
        "{ts}"
    );
}

/// llama-perplexity's scheme on a short text: chunks of -c 16, half scored.
#[test]
fn perplexity_json() {
    let model = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    let dir = std::env::temp_dir().join(format!("lamina-ppl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("text.txt");
    std::fs::write(
        &text,
        "The cat sat on the mat. The dog sat on the log. ".repeat(6) + "\n",
    )
    .unwrap();
    let out = stdout(&lamina(&[
        "perplexity",
        "-m",
        &model,
        "-f",
        text.to_str().unwrap(),
        "-c",
        "16",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ppl = v["ppl"].as_f64().unwrap();
    assert!(ppl > 1.0 && ppl < 50.0, "{ppl}");
    assert_eq!(
        v["tokens_scored"].as_u64().unwrap(),
        v["n_chunks"].as_u64().unwrap() * 7
    );
    std::fs::write(&text, "too short").unwrap();
    let out = lamina(&[
        "perplexity",
        "-m",
        &model,
        "-f",
        text.to_str().unwrap(),
        "-c",
        "16",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs at least 32"));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn golden_json(rel: &str) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(golden_path(rel)).unwrap()).unwrap()
}

fn floats(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// `lamina embed --json`: one vector per -p (llama.cpp's, within the golden
/// bound), per-token vectors with --pooling none, errors with exit 1.
#[test]
fn embed_json() {
    let model = model_path("all-MiniLM-L6-v2-f16.gguf");
    let g = golden_json("minilm/embedding.json");
    let item = &g["items"][0];
    let text = item["text"].as_str().unwrap();
    let v: serde_json::Value = serde_json::from_str(&stdout(&lamina(&[
        "embed", "-m", &model, "-p", text, "-p", text, "--json",
    ])))
    .unwrap();
    assert_eq!(v["pooling"], "mean");
    assert_eq!(v["n_embd"], 384);
    assert_eq!(v["inputs"][0]["token_ids"], item["token_ids"]);
    let embeddings = v["embeddings"].as_array().unwrap();
    assert_eq!(embeddings.len(), 2);
    let (got, want) = (floats(&embeddings[0]), floats(&item["embedding_mean"]));
    let dot: f64 = got.iter().zip(&want).map(|(a, b)| a * b).sum();
    let norm = |x: &[f64]| x.iter().map(|a| a * a).sum::<f64>().sqrt();
    assert!(dot / (norm(&got) * norm(&want)) >= 0.9999);
    assert!((norm(&got) - 1.0).abs() < 1e-5, "L2-normalised by default");
    let v: serde_json::Value = serde_json::from_str(&stdout(&lamina(&[
        "embed",
        "-m",
        &model,
        "-p",
        text,
        "--pooling",
        "none",
        "--embd-normalize",
        "-1",
        "--json",
    ])))
    .unwrap();
    assert_eq!(
        v["embeddings"].as_array().unwrap().len(),
        3,
        "one vector per token"
    );
    let out = lamina(&["embed", "-m", &model, "-p", text, "--pooling", "max"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown pooling 'max'"));
}

/// `lamina rerank --json`: llama.cpp's order for the golden query; a
/// generation model is refused with a message.
#[test]
fn rerank_json() {
    let model = model_path("ms-marco-MiniLM-L12-v2-reranker-withpooler-q8_0.gguf");
    let g = golden_json("reranker/rerank.json");
    let pairs: Vec<&serde_json::Value> = g["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["query"] == "what is panda?")
        .collect();
    let mut args = vec!["rerank", "-m", &model, "-q", "what is panda?", "--json"];
    for p in &pairs {
        args.extend(["-d", p["document"].as_str().unwrap()]);
    }
    let v: serde_json::Value = serde_json::from_str(&stdout(&lamina(&args))).unwrap();
    let results = v["results"].as_array().unwrap();
    let mut want: Vec<usize> = (0..pairs.len()).collect();
    let score = |i: usize| pairs[i]["score"]["q8_0"].as_f64().unwrap();
    want.sort_by(|&a, &b| score(b).total_cmp(&score(a)));
    let got: Vec<usize> = results
        .iter()
        .map(|r| r["index"].as_u64().unwrap() as usize)
        .collect();
    assert_eq!(got, want);
    for r in results {
        let i = r["index"].as_u64().unwrap() as usize;
        assert!((r["score"].as_f64().unwrap() - score(i)).abs() <= 0.1);
        assert_eq!(r["document"], pairs[i]["document"]);
    }
    let smollm2 = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    let out = lamina(&["rerank", "-m", &smollm2, "-q", "q", "-d", "d"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("classifier head"));
}

/// `--prompt-cache FILE` as llama-cli's: the first run writes the prompt's
/// tokens, the second loads them and evaluates one prompt token, with the
/// same output; `--prompt-cache-ro` leaves the file alone, `-all` adds the
/// generated tokens; a file that is not a session, or the model itself, is
/// an error and the model file is untouched.
#[test]
fn run_with_a_prompt_cache() {
    let model = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    let dir = std::env::temp_dir().join(format!("lamina-cli-session-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let session = dir.join("prompt.session");
    let session_arg = session.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "-m",
            &model,
            "-p",
            "The capital of France is Paris. The capital of Italy is",
            "-n",
            "5",
            "--temp",
            "0",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = stdout(&lamina(&args));
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let first = run(&["--prompt-cache", session_arg]);
    let n_prompt = first["prompt_ids"].as_array().unwrap().len();
    assert_eq!(first["tokens_cached"], 0);
    let written = std::fs::read(&session).unwrap();
    let second = run(&["--prompt-cache", session_arg, "--prompt-cache-ro"]);
    assert_eq!(second["tokens_cached"], n_prompt - 1);
    assert_eq!(second["timings"]["prompt_n"], 1);
    assert_eq!(second["generated_ids"], first["generated_ids"]);
    assert_eq!(std::fs::read(&session).unwrap(), written, "read-only");
    run(&["--prompt-cache", session_arg, "--prompt-cache-all"]);
    assert!(std::fs::read(&session).unwrap().len() > written.len());

    std::fs::write(&session, b"not a session").unwrap();
    let out = lamina(&[
        "run",
        "-m",
        &model,
        "-p",
        "Hi",
        "--prompt-cache",
        session_arg,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a lamina session"));
    let before = std::fs::metadata(&model).unwrap().len();
    let out = lamina(&["run", "-m", &model, "-p", "Hi", "--prompt-cache", &model]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a lamina session"));
    assert_eq!(std::fs::metadata(&model).unwrap().len(), before);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn run_with_tools() {
    let model = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    let template = golden_path("chat/templates/Qwen-Qwen2.5-7B-Instruct.jinja");
    let tools = r#"[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]"#;
    let args = [
        "run",
        "-m",
        &model,
        "-p",
        "What is the weather in Paris?",
        "-n",
        "64",
        "--temp",
        "0",
        "--json",
        "--chat",
        "--chat-template-file",
        &template,
        "--tools",
        tools,
        "--tool-choice",
        "required",
    ];
    let v: serde_json::Value = serde_json::from_str(&stdout(&lamina(&args))).unwrap();
    assert_eq!(v["chat_format"], "hermes");
    assert_eq!(v["tool_calls"][0]["function"]["name"], "get_weather", "{v}");
    let call: serde_json::Value = serde_json::from_str(
        v["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert!(call["city"].is_string(), "{call}");
    assert!(v["prompt"].as_str().unwrap().contains("<tools>"));
    // Tools that are not a JSON array, and an unknown choice, are errors.
    let out = lamina(&[
        "run", "-m", &model, "-p", "Hi", "--chat", "--tools", "[1", "-n", "1",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--tools is not JSON"),
        "{out:?}"
    );
    let out = lamina(&[
        "run",
        "-m",
        &model,
        "-p",
        "Hi",
        "--chat",
        "--tools",
        tools,
        "--tool-choice",
        "maybe",
        "-n",
        "1",
    ]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("tool_choice \"maybe\""),
        "{out:?}"
    );
}

/// `--lora FILE[:SCALE]`: a seeded adapter on SmolLM2's first layer changes
/// the greedy text, scale 0 gives the plain model's, and a file that is not
/// an adapter is an error naming it.
#[test]
fn run_with_a_lora_adapter() {
    use lamina::gguf::{GgufWriter, Value};
    use lamina::tensor::GgmlType;
    let model = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    let dir = std::env::temp_dir();
    let adapter = dir.join(format!("lamina-cli-lora-{}.gguf", std::process::id()));
    let mut w = GgufWriter::new();
    w.add_metadata("general.architecture", Value::String("llama".into()))
        .unwrap();
    w.add_metadata("general.type", Value::String("adapter".into()))
        .unwrap();
    w.add_metadata("adapter.type", Value::String("lora".into()))
        .unwrap();
    w.add_metadata("adapter.lora.alpha", Value::F32(4.0))
        .unwrap();
    let (rank, width) = (4u64, 576u64);
    let values = |n: u64, k: u64| -> Vec<u8> {
        (0..n)
            .flat_map(|i| (((i * k) % 17) as f32 / 17.0 - 0.5).to_le_bytes())
            .collect()
    };
    for name in ["blk.0.attn_v.weight", "blk.0.ffn_down.weight"] {
        let (cols, rows) = if name.contains("ffn_down") {
            (1536, width)
        } else {
            (width, 192)
        };
        w.add_tensor(
            format!("{name}.lora_a"),
            GgmlType::F32,
            &[cols, rank],
            values(cols * rank, 7),
        )
        .unwrap();
        w.add_tensor(
            format!("{name}.lora_b"),
            GgmlType::F32,
            &[rank, rows],
            values(rank * rows, 5),
        )
        .unwrap();
    }
    std::fs::write(&adapter, w.to_bytes()).unwrap();
    let adapter_path = adapter.to_str().unwrap();
    let text = |extra: &[&str]| {
        let base = [
            "run",
            "-m",
            &model,
            "-p",
            "The capital of France is",
            "-n",
            "8",
            "--temp",
            "0",
            "--json",
        ];
        let out = lamina(&[&base[..], extra].concat());
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        v["text"].as_str().unwrap().to_string()
    };
    let plain = text(&[]);
    assert_eq!(text(&["--lora", &format!("{adapter_path}:0")]), plain);
    assert_ne!(text(&["--lora", &format!("{adapter_path}:2.5")]), plain);
    let out = lamina(&["run", "-m", &model, "-p", "Hi", "-n", "1", "--lora", &model]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("general.type"),
        "{out:?}"
    );
    std::fs::remove_file(&adapter).unwrap();
}
