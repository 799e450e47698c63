//! `Context::completion` with the real SmolLM2 model: greedy ids against
//! llama.cpp's, stop strings, end of generation, ignore_eos, n_probs, abort,
//! the prompt cache, prompt cuts and context shifts, and timings.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::sync::Arc;

use common::{golden_path, json_ids, read_file};
use lamina::completion::{CompletionParams, CompletionResult};
use lamina::context::{Context, ContextParams};
use lamina::model::Model;
use lamina::sampling::SamplingParams;

fn model() -> Arc<Model> {
    common::smollm2_q4_1()
}

fn context(n_ctx: usize) -> Context {
    Context::new(
        model(),
        ContextParams {
            n_ctx,
            n_threads: if cfg!(target_arch = "wasm32") { 1 } else { 2 },
            ..ContextParams::default()
        },
    )
    .unwrap()
}

fn greedy(prompt: &str, n_predict: i32) -> CompletionParams {
    CompletionParams {
        prompt: prompt.into(),
        n_predict,
        sampling: SamplingParams {
            temperature: 0.0,
            ..SamplingParams::default()
        },
        ..CompletionParams::default()
    }
}

fn golden(name: &str) -> serde_json::Value {
    serde_json::from_slice(&read_file(&golden_path(&format!(
        "smollm2/generate/{name}.json"
    ))))
    .unwrap()
}

fn run(ctx: &mut Context, p: &CompletionParams) -> (CompletionResult, String) {
    let mut streamed = String::new();
    let r = ctx.completion(p, |ev| streamed.push_str(ev.text)).unwrap();
    (r, streamed)
}

const STEPS: i32 = if cfg!(target_arch = "x86_64") { 48 } else { 8 };

/// Free-running greedy ids equal llama.cpp's up to the first step whose
/// reference top1-top2 gap is under 0.5 (the golden README's rule).
#[test]
fn greedy_completions_follow_llama_cpp() {
    let mut ctx = context(512);
    for name in [
        "france",
        "chat",
        "prose",
        "code_fibonacci",
        "chat_study_tips",
    ] {
        let g = golden(&format!("q4_1_{name}"));
        let want = json_ids(&g["generated_ids"]);
        let gaps = g["top1_top2_gap_per_step"].as_array().unwrap();
        let sure = gaps
            .iter()
            .position(|v| v.as_f64().unwrap() < 0.5)
            .unwrap_or(want.len())
            .min(STEPS as usize);
        let (r, streamed) = run(&mut ctx, &greedy(g["prompt"].as_str().unwrap(), STEPS));
        assert_eq!(
            r.prompt_ids.len(),
            g["prompt_ids"].as_array().unwrap().len(),
            "{name}"
        );
        assert_eq!(&r.generated_ids[..sure], &want[..sure], "{name}");
        assert_eq!(streamed, r.text, "{name}: streamed text is the text");
        if r.generated_ids == want {
            assert_eq!(r.text, g["generated_text"].as_str().unwrap(), "{name}");
            assert_eq!(r.stopped_eos, g["stopped_at_eog"].as_bool().unwrap());
        }
    }
}

#[test]
fn stop_strings_end_the_text_and_are_never_emitted() {
    let mut ctx = context(512);
    let prompt = "def fibonacci(n):";
    let (free, _) = run(&mut ctx, &greedy(prompt, 24));
    // A stop string that spans several tokens of the free-running text.
    let text = &free.text;
    let at = text
        .find("return")
        .expect("the continuation returns something");
    let stop = text[at..at + 9].to_string();
    let mut p = greedy(prompt, 24);
    p.stop = vec!["never appears".into(), stop.clone()];
    let (r, streamed) = run(&mut ctx, &p);
    assert!(r.stopped_word && !r.stopped_eos && !r.stopped_limit);
    assert_eq!(r.stop_reason, "word");
    assert_eq!(r.stopping_word, stop);
    assert_eq!(r.text, text[..at]);
    assert_eq!(streamed, r.text);
    assert!(!streamed.contains(&stop));
    assert!(r.tokens_predicted < free.tokens_predicted);
}

#[test]
fn end_of_generation_and_ignore_eos() {
    let mut ctx = context(512);
    let prompt = golden("q4_1_chat")["prompt"].as_str().unwrap().to_string();
    let (r, _) = run(&mut ctx, &greedy(&prompt, 48));
    assert!(r.stopped_eos, "{:?}", r.text);
    let last = *r.generated_ids.last().unwrap();
    assert!(ctx.model().vocab.is_eog(last));
    assert!(!r.text.contains("<|im_end|>"));
    assert_eq!(r.tokens_predicted, r.generated_ids.len());
    let n = r.generated_ids.len() as i32 + 5;
    let mut p = greedy(&prompt, n);
    p.ignore_eos = true;
    let (r2, _) = run(&mut ctx, &p);
    assert!(r2.stopped_limit);
    assert_eq!(r2.tokens_predicted, n as usize);
    assert!(r2
        .generated_ids
        .iter()
        .all(|&t| !ctx.model().vocab.is_eog(t)));
    assert_eq!(
        &r2.generated_ids[..r.generated_ids.len() - 1],
        &r.generated_ids[..r.generated_ids.len() - 1]
    );
}

#[test]
fn n_probs_reports_the_top_probabilities() {
    let mut ctx = context(256);
    let mut p = greedy("The capital of France is", 4);
    p.n_probs = 5;
    let (r, _) = run(&mut ctx, &p);
    assert_eq!(r.completion_probabilities.len(), 4);
    for (probs, &id) in r.completion_probabilities.iter().zip(&r.generated_ids) {
        assert_eq!(probs.len(), 5);
        assert_eq!(probs[0].id, id, "greedy picks the most likely token");
        assert!(probs.windows(2).all(|w| w[0].prob >= w[1].prob));
        let total: f32 = probs.iter().map(|p| p.prob).sum();
        assert!(total > 0.0 && total <= 1.0 + 1e-5);
    }
    assert_eq!(r.completion_probabilities[0][0].piece, " Paris");
}

#[test]
fn an_abort_from_the_callback_stops_within_one_token() {
    let mut ctx = context(256);
    let handle = ctx.abort_handle();
    let mut p = greedy("Once upon a time", 40);
    p.ignore_eos = true;
    let mut seen = 0;
    let r = ctx
        .completion(&p, |_| {
            seen += 1;
            if seen == 3 {
                handle.abort();
            }
        })
        .unwrap();
    assert!(r.stopped_aborted);
    assert_eq!(r.stop_reason, "abort");
    assert_eq!(r.tokens_predicted, 3);
    // The next completion starts afresh.
    let (r, _) = run(&mut ctx, &p);
    assert_eq!(r.tokens_predicted, 40);
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn an_abort_from_another_thread() {
    let mut ctx = context(256);
    let handle = ctx.abort_handle();
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        rx.recv().unwrap();
        handle.abort();
    });
    let mut p = greedy("Once upon a time", 200);
    p.ignore_eos = true;
    let mut sent = false;
    let mut at = 0;
    let r = ctx
        .completion(&p, |_| {
            at += 1;
            if !sent {
                tx.send(()).unwrap();
                sent = true;
            }
        })
        .unwrap();
    t.join().unwrap();
    assert!(r.stopped_aborted);
    assert!(r.tokens_predicted < 200);
}

#[test]
fn the_prompt_cache_reuses_the_common_prefix() {
    let mut ctx = context(256);
    let p = greedy("The capital of France is Paris. The capital of Italy is", 6);
    let (first, _) = run(&mut ctx, &p);
    assert_eq!(first.tokens_cached, 0);
    let (again, _) = run(&mut ctx, &p);
    assert_eq!(again.tokens_cached, again.prompt_ids.len() - 1);
    assert_eq!(again.timings.prompt_n, 1);
    assert_eq!(again.generated_ids, first.generated_ids);
    let mut q = p.clone();
    q.cache_prompt = false;
    let (fresh, _) = run(&mut ctx, &q);
    assert_eq!(fresh.tokens_cached, 0);
    assert_eq!(fresh.generated_ids, first.generated_ids);
    assert!(fresh.timings.prompt_ms > 0.0 && fresh.timings.predicted_per_second > 0.0);
    // Prompt tokens, cached or not, as llama.rn and llama.cpp's server count.
    assert_eq!(fresh.tokens_evaluated, fresh.prompt_ids.len());
    assert_eq!(again.tokens_evaluated, again.prompt_ids.len());
}

/// The prompt is evaluated a micro-batch at a time (`eval_prompt`), with an
/// abort check between micro-batches: a stop request during a long prompt
/// ends the run before the prompt is done, with no token, and the next run
/// reuses what was evaluated.
#[test]
fn an_abort_during_the_prompt_stops_between_micro_batches() {
    let mut ctx = Context::new(
        common::smollm2_q4_1(),
        ContextParams {
            n_ctx: 256,
            n_batch: 64,
            n_ubatch: 16,
            n_threads: 1,
            ..ContextParams::default()
        },
    )
    .unwrap();
    let p = greedy(
        &"one two three four five six seven eight nine ten ".repeat(5),
        4,
    );
    let mut started = ctx.start_completion(&p).unwrap();
    assert!(
        started.eval_prompt(&mut ctx).unwrap(),
        "more than one micro-batch"
    );
    assert!(started.eval_prompt(&mut ctx).unwrap());
    ctx.abort_handle().abort();
    assert!(!started.eval_prompt(&mut ctx).unwrap());
    assert_eq!(started.next_token(&mut ctx).unwrap(), None);
    let r = started.finish();
    assert!(r.stopped_aborted && r.generated_ids.is_empty(), "{r:?}");
    assert_eq!(r.timings.prompt_n, 32, "two micro-batches of 16");
    assert!(r.prompt_ids.len() > 32);
    ctx.abort_handle().reset();
    let (again, _) = run(&mut ctx, &p);
    assert_eq!(
        again.tokens_cached, 32,
        "the evaluated micro-batches are reused"
    );
}

#[test]
fn long_prompts_are_cut_and_full_contexts_shift() {
    let mut ctx = context(32);
    let long = "one two three four five six seven eight nine ten ".repeat(6);
    let mut p = greedy(&long, 4);
    p.ignore_eos = true;
    let (r, _) = run(&mut ctx, &p);
    assert!(r.truncated);
    assert!(r.prompt_ids.len() < 32);
    assert_eq!(r.tokens_predicted, 4);
    // Generation past the end of the context slides it.
    let mut p = greedy("Count: 1, 2, 3,", 48);
    p.ignore_eos = true;
    let (r, _) = run(&mut ctx, &p);
    assert!(r.truncated);
    assert_eq!(r.tokens_predicted, 48);
    assert!(ctx.kv().used() <= 32);
    // Without the shift, generation stops at the end of the context.
    p.context_shift = false;
    let (r, _) = run(&mut ctx, &p);
    assert!(r.stopped_limit && r.context_full && !r.truncated);
    assert!(r.tokens_predicted < 32);
}

#[test]
fn bad_parameters_are_errors() {
    let mut ctx = context(64);
    let e = ctx.completion(&greedy("", 4), |_| {}).unwrap_err();
    assert_eq!(e.to_string(), "invalid argument: the prompt is empty");
    let mut p = greedy("hi", 4);
    p.sampling.mirostat = 3;
    assert!(ctx.completion(&p, |_| {}).is_err());
    let mut p = greedy("hi", 4);
    p.sampling.logit_bias = vec![(1 << 20, 1.0)];
    assert!(ctx
        .completion(&p, |_| {})
        .unwrap_err()
        .to_string()
        .contains("outside the vocabulary"));
}

#[test]
fn seeded_sampling_is_reproducible() {
    let mut ctx = context(128);
    let p = CompletionParams {
        prompt: "Once upon a time".into(),
        n_predict: 12,
        sampling: SamplingParams {
            seed: Some(42),
            ..SamplingParams::default()
        },
        cache_prompt: false,
        ..CompletionParams::default()
    };
    let (a, _) = run(&mut ctx, &p);
    let (b, _) = run(&mut ctx, &p);
    assert_eq!(a.generated_ids, b.generated_ids);
    assert_eq!(a.text, b.text);
}

/// A template in place of the model's (Jinja text or a built-in name, as
/// llama.cpp's `--chat-template`), and `jinja` rendering the model's own
/// Jinja where a built-in format matches (the same prompt for SmolLM2); a
/// template that does not parse is an error.
#[test]
fn chat_template_overrides_and_jinja() {
    use lamina::chat::ChatMessage;
    let mut ctx = context(256);
    let messages = vec![
        ChatMessage::new("system", "Be brief."),
        ChatMessage::new("user", "Hi"),
    ];
    let chat = |template: Option<&str>, jinja: bool| CompletionParams {
        messages: Some(messages.clone()),
        chat_template: template.map(String::from),
        jinja,
        ..greedy("", 1)
    };
    let (own, _) = run(&mut ctx, &chat(None, false));
    assert!(
        own.prompt
            .starts_with("<|im_start|>system\nBe brief.<|im_end|>"),
        "{:?}",
        own.prompt
    );
    let (jinja, _) = run(&mut ctx, &chat(None, true));
    assert_eq!(jinja.prompt, own.prompt);
    let (llama2, _) = run(&mut ctx, &chat(Some("llama2"), false));
    assert!(
        llama2.prompt.contains("[INST]") && llama2.prompt.contains("Be brief."),
        "{:?}",
        llama2.prompt
    );
    let custom = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}\
                  {% if add_generation_prompt %}<assistant>{% endif %}";
    let (custom, _) = run(&mut ctx, &chat(Some(custom), false));
    assert_eq!(custom.prompt, "<system>Be brief.<user>Hi<assistant>");
    let e = ctx
        .completion(&chat(Some("{% for %}"), false), |_| {})
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("does not parse"), "{e}");
}

/// Messages rendered with SmolLM2's chat template give llama.cpp's chat
/// prompts token for token.
#[test]
fn chat_messages_use_the_model_template() {
    use lamina::chat::ChatMessage;
    let mut ctx = context(512);
    for name in ["chat", "chat_study_tips"] {
        let g = golden(&format!("q4_1_{name}"));
        let prompt = g["prompt"].as_str().unwrap();
        // Take the conversation back apart: ChatML turns.
        let messages: Vec<ChatMessage> = prompt
            .split("<|im_start|>")
            .filter_map(|turn| {
                let (role, rest) = turn.split_once('\n')?;
                let content = rest.strip_suffix("<|im_end|>\n")?;
                Some(ChatMessage::new(role, content))
            })
            .collect();
        assert!(!messages.is_empty());
        let p = CompletionParams {
            messages: Some(messages),
            ..greedy("", 2)
        };
        let (r, _) = run(&mut ctx, &p);
        assert_eq!(r.prompt, prompt, "{name}");
        assert_eq!(r.prompt_ids, json_ids(&g["prompt_ids"]), "{name}");
    }
}

/// Ids of a parallel stream equal the same request run alone, up to the
/// first step where the lone run's two best tokens are within 0.05 in
/// probability (a batch of several rows may round differently; the
/// golden README's rule, in probabilities).
fn assert_follows(what: &str, parallel: &[u32], alone: &CompletionResult) {
    for (step, (&p, &a)) in parallel.iter().zip(&alone.generated_ids).enumerate() {
        if p != a {
            let probs = &alone.completion_probabilities[step];
            let gap = probs[0].prob - probs[1].prob;
            assert!(
                gap < 0.05,
                "{what}: step {step} differs ({p} vs {a}) with a gap of {gap}"
            );
            return;
        }
    }
    assert_eq!(parallel.len(), alone.generated_ids.len(), "{what}");
}

const PARALLEL_STEPS: i32 = if cfg!(target_arch = "x86_64") { 16 } else { 8 };

const PARALLEL_PROMPTS: [&str; 4] = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The three primary colors are",
];

/// Four requests at once (and four through two slots, two waiting in the
/// queue): each stream's ids are the request's own, its streamed text is
/// its text, and the plain completion works afterwards.
#[test]
fn parallel_streams_equal_their_solo_runs() {
    let mut ctx = context(512);
    let requests: Vec<CompletionParams> = PARALLEL_PROMPTS
        .iter()
        .map(|p| CompletionParams {
            n_probs: 2,
            cache_prompt: false,
            ..greedy(p, PARALLEL_STEPS)
        })
        .collect();
    let alone: Vec<CompletionResult> = requests.iter().map(|p| run(&mut ctx, p).0).collect();
    for n_parallel in [4, 2] {
        let mut streamed = vec![String::new(); requests.len()];
        let results = ctx
            .completions(&requests, n_parallel, |i, ev| streamed[i].push_str(ev.text))
            .unwrap();
        for (i, r) in results.iter().enumerate() {
            let what = format!("{n_parallel} slots, {}", PARALLEL_PROMPTS[i]);
            assert_eq!(r.prompt_ids, alone[i].prompt_ids, "{what}");
            assert_follows(&what, &r.generated_ids, &alone[i]);
            assert_eq!(streamed[i], r.text, "{what}");
            assert_eq!(r.tokens_predicted, PARALLEL_STEPS as usize);
            assert_eq!(r.timings.prompt_n, r.prompt_ids.len(), "{what}");
            assert!(r.timings.predicted_per_second > 0.0);
        }
    }
    let (after, _) = run(&mut ctx, &greedy(PARALLEL_PROMPTS[0], PARALLEL_STEPS));
    assert_eq!(after.generated_ids, alone[0].generated_ids);
}

/// Each request keeps its own limit, stop strings and seeded sampler (and
/// seeded parallel runs reproduce); a
/// slot that fills shifts (or, without context_shift, reports
/// context_full) without touching the other slot.
#[test]
fn parallel_requests_keep_their_own_state() {
    let mut ctx = context(128);
    let seeded = CompletionParams {
        prompt: "Once upon a time".into(),
        n_predict: 12,
        sampling: SamplingParams {
            seed: Some(42),
            ..SamplingParams::default()
        },
        ..CompletionParams::default()
    };
    let stop_at = CompletionParams {
        stop: vec![".".into()],
        ..greedy("The capital of France is", 20)
    };
    let short = greedy("def fibonacci(n):", 3);
    let other_seed = CompletionParams {
        sampling: SamplingParams {
            seed: Some(7),
            ..seeded.sampling.clone()
        },
        ..seeded.clone()
    };
    let requests = [seeded, stop_at, short, other_seed];
    let results = ctx.completions(&requests, 4, |_, _| {}).unwrap();
    // Seeded parallel runs reproduce. (Two copies of one request in one
    // batch need not draw alike: their cells interleave, so attention sums
    // them in another order, and a draw near a boundary can flip.)
    let again = ctx.completions(&requests, 4, |_, _| {}).unwrap();
    for (a, b) in results.iter().zip(&again) {
        assert_eq!(a.generated_ids, b.generated_ids, "seeded runs reproduce");
    }
    assert!(results[1].stopped_word && results[1].stopping_word == ".");
    assert!(!results[1].text.contains('.'));
    assert!(results[2].stopped_limit && results[2].tokens_predicted == 3);

    // Two slots of 32 positions: 40 tokens after a 5-token prompt shift.
    let mut ctx = context(64);
    let long = CompletionParams {
        ignore_eos: true,
        ..greedy("The capital of France is", 40)
    };
    let full = CompletionParams {
        context_shift: false,
        ..long.clone()
    };
    let results = ctx.completions(&[long, full], 2, |_, _| {}).unwrap();
    assert!(results[0].truncated && results[0].tokens_predicted == 40);
    assert!(results[1].context_full && results[1].stopped_limit);
    assert!(results[1].tokens_predicted < 40);
}

/// Cancelling a queued request reports it cancelled; cancelling a running
/// one ends it as interrupted with its tokens so far; bad requests and bad
/// slot counts are errors naming why.
#[test]
fn parallel_cancel_and_errors() {
    use lamina::completion::parallel::{Parallel, ParallelEvent};
    let mut ctx = context(256);
    let mut parallel = Parallel::new(&mut ctx, 1).unwrap();
    let first = parallel.submit(greedy("The capital of France is", 30));
    let second = parallel.submit(greedy("Once upon a time", 30));
    assert_eq!(parallel.status().queued_requests, 2);
    let mut events = Vec::new();
    parallel.step(&mut ctx, &mut events).unwrap();
    assert!(parallel.cancel(second));
    let status = parallel.status();
    assert_eq!(
        (status.active_slots, status.requests[0].request_id),
        (1, first)
    );
    for _ in 0..3 {
        parallel.step(&mut ctx, &mut events).unwrap();
    }
    assert!(parallel.cancel(first));
    assert!(!parallel.cancel(999));
    while !parallel.is_idle() {
        parallel.step(&mut ctx, &mut events).unwrap();
    }
    let mut ended = 0;
    for e in &events {
        if let ParallelEvent::Done { request, result } = e {
            ended += 1;
            if *request == first {
                let r = result.as_ref().unwrap();
                assert!(r.stopped_aborted && r.tokens_predicted >= 3 && r.tokens_predicted < 30);
            } else {
                let e = result.as_ref().unwrap_err();
                assert!(e.to_string().contains("cancelled"), "{e}");
            }
        }
    }
    assert_eq!(ended, 2);

    let e = ctx
        .completions(&[greedy("Hello", 2), greedy("", 2)], 2, |_, _| {})
        .unwrap_err();
    assert!(e.to_string().contains("the prompt is empty"), "{e}");
    let e = Parallel::new(&mut ctx, 0).err().unwrap();
    assert!(
        e.to_string()
            .contains("n_parallel must be between 1 and 63"),
        "{e}"
    );
    let e = Parallel::new(&mut ctx, 40).err().unwrap();
    assert!(e.to_string().contains("only 6 positions each"), "{e}");
    let mut narrow = Context::new(
        model(),
        ContextParams {
            n_ctx: 256,
            n_batch: 2,
            ..ContextParams::default()
        },
    )
    .unwrap();
    let e = Parallel::new(&mut narrow, 4).err().unwrap();
    assert!(
        e.to_string()
            .contains("n_parallel = 4 is more than n_batch = 2"),
        "{e}"
    );
}

/// With tools and `tool_choice: "required"`, the tools' grammar holds even
/// a 135M model to a valid call in each JSON format: the result's
/// `tool_calls` name the offered tool with the arguments its schema asks for.
/// (In Qwen3-Coder's XML format the grammar holds a string value open until
/// `</parameter>`, which this model does not write: it is left out here;
/// `chat_tools` checks that grammar on the reference's cases.)
#[test]
fn required_tool_calls_follow_the_tools() {
    use lamina::chat::tools::{ChatOptions, ToolChoice};
    use lamina::chat::ChatMessage;
    let dir = golden_path("chat/templates");
    let weather = serde_json::json!({"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}});
    let mut ctx = context(1024);
    for (file, format) in [
        ("Qwen-Qwen2.5-7B-Instruct.jinja", "hermes"),
        ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral-nemo"),
        ("Mistral-Small-3.2-24B-Instruct-2506.jinja", "mistral"),
        ("ibm-granite-granite-3.3-2B-Instruct.jinja", "granite"),
        ("meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3"),
    ] {
        let template = String::from_utf8(read_file(&format!("{dir}/{file}"))).unwrap();
        let p = CompletionParams {
            messages: Some(vec![ChatMessage::new(
                "user",
                "What is the weather in Paris?",
            )]),
            chat_template: Some(template),
            chat: ChatOptions {
                tools: vec![weather.clone()],
                tool_choice: ToolChoice::Required,
                now: Some(1_700_000_000),
                ..ChatOptions::default()
            },
            ..greedy("", 96)
        };
        let (r, _) = run(&mut ctx, &p);
        assert_eq!(r.chat_format, format, "{file}");
        assert_eq!(r.tool_calls.len(), 1, "{file}: {:?}", r.text);
        assert_eq!(r.tool_calls[0].name, "get_weather", "{file}");
        let args: serde_json::Value = serde_json::from_str(&r.tool_calls[0].arguments).unwrap();
        assert!(args["city"].is_string(), "{file}: {args}");
        assert!(
            r.stopped_eos,
            "{file}: the grammar ends in end of generation: {:?}",
            r.text
        );
        if format == "mistral-nemo" {
            assert_eq!(r.tool_calls[0].id.len(), 9, "{file}: Nemo's call ids");
        }
    }
}

/// A grammar of one's own cannot be combined with tools.
#[test]
fn a_grammar_with_tools_is_an_error() {
    use lamina::chat::tools::ChatOptions;
    use lamina::chat::ChatMessage;
    let template = String::from_utf8(read_file(&golden_path(
        "chat/templates/Qwen-Qwen2.5-7B-Instruct.jinja",
    )))
    .unwrap();
    let mut p = CompletionParams {
        messages: Some(vec![ChatMessage::new("user", "Hi")]),
        chat_template: Some(template),
        chat: ChatOptions {
            tools: vec![serde_json::json!({"type": "function", "function": {"name": "f"}})],
            ..ChatOptions::default()
        },
        ..greedy("", 4)
    };
    p.sampling.grammar = Some("root ::= \"a\"".into());
    let err = context(256).completion(&p, |_| {}).unwrap_err().to_string();
    assert!(err.contains("cannot be given with tools"), "{err}");
}
