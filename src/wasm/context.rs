//! `LlamaContext` for JavaScript: a loaded model and its context, with
//! llama.rn's calls (completion with a token callback, tokenize, detokenize,
//! model info, bench). Parameters arrive as JSON text (the JS wrapper
//! stringifies llama.rn-style objects); results leave as JS objects.

use std::sync::Arc;

use serde::Deserialize;
use wasm_bindgen::prelude::*;

use super::params::parse;
use super::{js_error, json_to_js, JsStreamLoader};
use crate::backend::cpu::CpuDevice;
use crate::chat::tools::{ChatOptions, ReasoningFormat, ToolChoice};
use crate::chat::ChatMessage;
use crate::completion::parallel::{Parallel, ParallelEvent};
use crate::completion::{CompletionParams, CompletionResult, CompletionRun};
use crate::context::{Context, ContextParams, KvType};
use crate::embedding::{EmbedParams, Pooling, RerankParams};
use crate::gguf::{describe, GgufFile};
use crate::model::Model;
use crate::sampling::grammar::Triggers;
use crate::sampling::json_schema::json_schema_to_grammar;
use crate::sampling::logit_bias_from_json;
use crate::sampling::SamplingParams;
use crate::tokenizer::Vocab;

/// `loadModel`'s parameters, with llama.rn's names (initLlama). Its other
/// fields (n_gpu_layers, use_mlock, ...) have no meaning here and are ignored,
/// so llama.rn code runs unchanged.
#[derive(Deserialize, Default)]
#[serde(default)]
struct LoadParams {
    n_ctx: Option<usize>,
    n_batch: Option<usize>,
    n_ubatch: Option<usize>,
    n_threads: Option<usize>,
    cache_type_k: Option<String>,
    cache_type_v: Option<String>,
    cpu_variant: Option<String>,
    /// "none", "mean", "cls", "last", "rank", or llama.cpp's number for one.
    pooling_type: Option<serde_json::Value>,
    /// Whether completions shift the context when it fills (llama.rn's
    /// `ctx_shift`, default true); a completion's own `ctx_shift` wins.
    ctx_shift: Option<bool>,
}

/// `pooling_type` as a name or as llama.cpp's number.
fn pooling(v: &Option<serde_json::Value>) -> Result<Option<Pooling>, JsError> {
    let p = match v {
        None | Some(serde_json::Value::Null) => return Ok(None),
        Some(serde_json::Value::String(name)) => Pooling::from_name(name),
        Some(serde_json::Value::Number(n)) => match n.as_u64() {
            Some(t) if t <= u32::MAX as u64 => Pooling::from_type(t as u32),
            _ => Err(crate::Error::InvalidArgument(format!(
                "unknown pooling type {n}"
            ))),
        },
        Some(other) => Err(crate::Error::InvalidArgument(format!(
            "pooling_type must be a name or a number, got {other}"
        ))),
    };
    p.map(Some).map_err(js_error)
}

/// `completion`'s parameters, with llama.rn's names.
#[derive(Deserialize, Default)]
#[serde(default)]
struct JsCompletionParams {
    prompt: Option<String>,
    messages: Option<Vec<ChatMessage>>,
    /// A chat template (Jinja text or a built-in name) in place of the model's.
    chat_template: Option<String>,
    /// Render with the template's Jinja even where a built-in format matches.
    jinja: bool,
    n_predict: Option<i32>,
    temperature: Option<f32>,
    top_k: Option<i32>,
    top_p: Option<f32>,
    min_p: Option<f32>,
    typical_p: Option<f32>,
    xtc_probability: Option<f32>,
    xtc_threshold: Option<f32>,
    top_n_sigma: Option<f32>,
    dry_multiplier: Option<f32>,
    dry_base: Option<f32>,
    dry_allowed_length: Option<i32>,
    dry_penalty_last_n: Option<i32>,
    dry_sequence_breakers: Option<Vec<String>>,
    penalty_last_n: Option<i32>,
    penalty_repeat: Option<f32>,
    penalty_freq: Option<f32>,
    penalty_present: Option<f32>,
    mirostat: Option<u8>,
    mirostat_tau: Option<f32>,
    mirostat_eta: Option<f32>,
    seed: Option<i64>,
    stop: Vec<String>,
    ignore_eos: bool,
    n_probs: usize,
    /// Prompt tokens kept when a prompt is cut or the context shifts
    /// (-1: all of them).
    n_keep: Option<i32>,
    /// Whether a full context shifts (drops the oldest half after `n_keep`)
    /// or ends the completion.
    ctx_shift: Option<bool>,
    /// Pairs `[token or text, bias or false]`, or an object of them.
    logit_bias: serde_json::Value,
    cache_prompt: Option<bool>,
    grammar: Option<String>,
    grammar_lazy: bool,
    grammar_triggers: Vec<JsGrammarTrigger>,
    /// A JSON schema the output must follow (an object, or its JSON text as
    /// llama.rn's native layer takes it); `grammar` wins when both are given.
    json_schema: Option<serde_json::Value>,
    response_format: Option<JsResponseFormat>,
    /// OpenAI tool definitions; the output's calls come back in `tool_calls`.
    tools: Option<Vec<serde_json::Value>>,
    /// "auto", "required" or "none".
    tool_choice: Option<String>,
    parallel_tool_calls: bool,
    /// Passed to the template (Qwen3 closes its thinking block when false).
    enable_thinking: Option<bool>,
    /// "auto" (default) or "deepseek": reasoning into `reasoning_content`;
    /// "none": left in the content.
    reasoning_format: Option<String>,
    /// More template variables.
    chat_template_kwargs: Option<serde_json::Map<String, serde_json::Value>>,
}

/// llama.rn's (and OpenAI's) `response_format`: `{type: "text"}`,
/// `{type: "json_object", schema?}` (any JSON value without a schema, as
/// llama.rn and llama.cpp's server take it) or
/// `{type: "json_schema", json_schema: {schema}}`.
#[derive(Deserialize)]
struct JsResponseFormat {
    #[serde(rename = "type")]
    kind: String,
    schema: Option<serde_json::Value>,
    json_schema: Option<JsNamedSchema>,
}

#[derive(Deserialize)]
struct JsNamedSchema {
    schema: Option<serde_json::Value>,
}

/// The chat options of `completion`'s (and `getFormattedChat`'s) parameters.
fn chat_options(p: &mut JsCompletionParams, json_response: bool) -> Result<ChatOptions, JsError> {
    Ok(ChatOptions {
        tools: p.tools.take().unwrap_or_default(),
        tool_choice: match &p.tool_choice {
            Some(name) => ToolChoice::from_name(name).map_err(js_error)?,
            None => ToolChoice::Auto,
        },
        parallel_tool_calls: p.parallel_tool_calls,
        enable_thinking: p.enable_thinking.unwrap_or(true),
        reasoning_format: match &p.reasoning_format {
            Some(name) => ReasoningFormat::from_name(name).map_err(js_error)?,
            None => ReasoningFormat::Auto,
        },
        chat_template_kwargs: p.chat_template_kwargs.take().unwrap_or_default(),
        json_response,
        ..ChatOptions::default()
    })
}

/// The grammar the completion must follow: `grammar` as given, else the
/// one made from `json_schema` or `response_format`.
fn output_grammar(p: &mut JsCompletionParams) -> Result<Option<String>, JsError> {
    if p.grammar.is_some() {
        return Ok(p.grammar.take());
    }
    let schema = match (p.json_schema.take(), p.response_format.take()) {
        (Some(serde_json::Value::String(text)), _) => serde_json::from_str(&text)
            .map_err(|e| JsError::new(&format!("json_schema is not valid JSON: {e}")))?,
        (Some(schema), _) => schema,
        (None, Some(f)) => match f.kind.as_str() {
            "text" => return Ok(None),
            "json_object" => f.schema.unwrap_or_else(|| serde_json::json!({})),
            "json_schema" => f.json_schema.and_then(|s| s.schema).unwrap_or_else(|| serde_json::json!({})),
            other => {
                return Err(JsError::new(&format!(
                    "response_format.type must be \"text\", \"json_object\" or \"json_schema\", got \"{other}\""
                )))
            }
        },
        (None, None) => return Ok(None),
    };
    let converted = json_schema_to_grammar(&schema).map_err(|e| JsError::new(&e.to_string()))?;
    Ok(Some(converted.grammar))
}

/// llama.rn's `grammar_triggers` entries: `type` 0 a token (`token`), 1 a
/// word, 2 a pattern found anywhere, 3 a pattern the whole text matches
/// (llama.cpp's `common_grammar_trigger_type`).
#[derive(Deserialize)]
struct JsGrammarTrigger {
    #[serde(rename = "type")]
    kind: u8,
    #[serde(default)]
    value: String,
    #[serde(default)]
    token: Option<u32>,
}

fn grammar_triggers(list: &[JsGrammarTrigger]) -> Result<Triggers, JsError> {
    let mut t = Triggers::default();
    for (i, trigger) in list.iter().enumerate() {
        match (trigger.kind, trigger.token) {
            (0, Some(id)) => t.tokens.push(id),
            (0, None) => {
                return Err(JsError::new(&format!(
                    "grammar_triggers[{i}] is a token trigger (type 0) without a token"
                )))
            }
            (1, _) => t.patterns.push(regex::escape(&trigger.value)),
            (2, _) => t.patterns.push(trigger.value.clone()),
            (3, _) => t.patterns.push(format!("^(?:{})$", trigger.value)),
            (k, _) => {
                return Err(JsError::new(&format!(
                    "grammar_triggers[{i}].type must be 0 (token), 1 (word), 2 (pattern) or 3 (full pattern), got {k}"
                )))
            }
        }
    }
    Ok(t)
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct JsEmbedParams {
    embd_normalize: Option<i32>,
    truncate: bool,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct JsRerankParams {
    normalize: Option<serde_json::Value>,
    truncate: bool,
}

#[wasm_bindgen(js_name = LlamaContext)]
pub struct JsLlamaContext {
    ctx: Context,
    /// The completion in progress, between `completionStart` and
    /// `completionFinish`.
    run: Option<CompletionRun>,
    /// Completions' default for context shifting (`ctx_shift` at load).
    ctx_shift: bool,
    /// Parallel mode (`parallelEnable`): requests and their slots.
    parallel: Option<Parallel>,
}

/// `CompletionParams` from llama.rn-style JSON (its defaults where absent).
fn completion_params(
    params_json: &str,
    vocab: &Vocab,
    ctx_shift: bool,
) -> Result<CompletionParams, JsError> {
    let mut p: JsCompletionParams = parse("completion parameters", params_json)?;
    let json_response =
        p.json_schema.is_some() || p.response_format.as_ref().is_some_and(|f| f.kind != "text");
    let grammar = output_grammar(&mut p)?;
    let chat = chat_options(&mut p, json_response)?;
    let d = SamplingParams::default();
    let seed = match p.seed {
        None | Some(-1) => None,
        Some(s) if (0..=u32::MAX as i64).contains(&s) => Some(s as u32),
        Some(s) => return Err(JsError::new(&format!("seed {s} is out of range"))),
    };
    Ok(CompletionParams {
        prompt: p.prompt.unwrap_or_default(),
        messages: p.messages,
        chat_template: p.chat_template,
        jinja: p.jinja,
        chat,
        n_predict: p.n_predict.unwrap_or(-1),
        sampling: SamplingParams {
            temperature: p.temperature.unwrap_or(d.temperature),
            top_k: p.top_k.unwrap_or(d.top_k),
            top_p: p.top_p.unwrap_or(d.top_p),
            min_p: p.min_p.unwrap_or(d.min_p),
            typical_p: p.typical_p.unwrap_or(d.typical_p),
            xtc_probability: p.xtc_probability.unwrap_or(d.xtc_probability),
            xtc_threshold: p.xtc_threshold.unwrap_or(d.xtc_threshold),
            top_n_sigma: p.top_n_sigma.unwrap_or(d.top_n_sigma),
            dry_multiplier: p.dry_multiplier.unwrap_or(d.dry_multiplier),
            dry_base: p.dry_base.unwrap_or(d.dry_base),
            dry_allowed_length: p.dry_allowed_length.unwrap_or(d.dry_allowed_length),
            dry_penalty_last_n: p.dry_penalty_last_n.unwrap_or(d.dry_penalty_last_n),
            dry_sequence_breakers: p
                .dry_sequence_breakers
                .unwrap_or(d.dry_sequence_breakers.clone()),
            penalty_last_n: p.penalty_last_n.unwrap_or(d.penalty_last_n),
            penalty_repeat: p.penalty_repeat.unwrap_or(d.penalty_repeat),
            penalty_freq: p.penalty_freq.unwrap_or(d.penalty_freq),
            penalty_present: p.penalty_present.unwrap_or(d.penalty_present),
            mirostat: p.mirostat.unwrap_or(d.mirostat),
            mirostat_tau: p.mirostat_tau.unwrap_or(d.mirostat_tau),
            mirostat_eta: p.mirostat_eta.unwrap_or(d.mirostat_eta),
            seed,
            logit_bias: logit_bias_from_json(&p.logit_bias, vocab).map_err(js_error)?,
            grammar,
            grammar_lazy: p.grammar_lazy,
            grammar_triggers: grammar_triggers(&p.grammar_triggers)?,
            ..d
        },
        stop: p.stop,
        ignore_eos: p.ignore_eos,
        n_probs: p.n_probs,
        n_keep: p.n_keep.unwrap_or(0),
        context_shift: p.ctx_shift.unwrap_or(ctx_shift),
        cache_prompt: p.cache_prompt.unwrap_or(true),
        ..CompletionParams::default()
    })
}

impl JsLlamaContext {
    /// Calls that use the KV cache wait for the running completion's end.
    fn check_idle(&self) -> Result<(), JsError> {
        if self.run.is_some() {
            return Err(JsError::new(
                "a completion is running on this context (finish it first)",
            ));
        }
        if self.parallel_busy() {
            return Err(JsError::new(
                "parallel requests are running on this context (wait for them or stop them first)",
            ));
        }
        Ok(())
    }

    /// `on_progress(fraction)` hears the weights being bound (0..1).
    fn load(
        file: GgufFile,
        params_json: &str,
        on_progress: Option<&js_sys::Function>,
    ) -> Result<JsLlamaContext, JsError> {
        let p: LoadParams = parse("model parameters", params_json)?;
        let device = CpuDevice::new(p.cpu_variant.as_deref()).map_err(js_error)?;
        let mut report = |fraction: f32| {
            if let Some(f) = on_progress {
                // A listener that throws does not stop the load.
                let _ = f.call1(&JsValue::NULL, &JsValue::from_f64(fraction as f64));
            }
            true
        };
        let progress: Option<crate::model::Progress> = Some(&mut report);
        let model = Model::load(Arc::new(file), device.shared(), progress).map_err(js_error)?;
        let d = ContextParams::default();
        let kv = |t: &Option<String>| t.as_deref().map_or(Ok(KvType::F16), KvType::from_name);
        let params = ContextParams {
            n_ctx: p.n_ctx.unwrap_or(d.n_ctx),
            n_batch: p.n_batch.unwrap_or(d.n_batch),
            n_ubatch: p.n_ubatch.unwrap_or(d.n_ubatch),
            n_threads: p.n_threads.unwrap_or(d.n_threads),
            type_k: kv(&p.cache_type_k).map_err(js_error)?,
            type_v: kv(&p.cache_type_v).map_err(js_error)?,
            pooling: pooling(&p.pooling_type)?,
        };
        let ctx = Context::new(Arc::new(model), params).map_err(js_error)?;
        Ok(JsLlamaContext {
            ctx,
            run: None,
            ctx_shift: p.ctx_shift.unwrap_or(true),
            parallel: None,
        })
    }
}

#[wasm_bindgen(js_class = LlamaContext)]
impl JsLlamaContext {
    /// A context over a model held in memory (`paramsJson`: llama.rn's initLlama
    /// names: n_ctx, n_batch, n_ubatch, n_threads, cache_type_k/v, cpu_variant).
    #[wasm_bindgen(js_name = fromBytes)]
    pub fn from_bytes(bytes: Vec<u8>, params_json: &str) -> Result<JsLlamaContext, JsError> {
        let file = GgufFile::from_bytes(bytes).map_err(js_error)?;
        JsLlamaContext::load(file, params_json, None)
    }

    /// A context over the file a finished `GgufStreamLoader` gathered (no
    /// second copy of the model).
    /// `onProgress(fraction)`, if given, hears the weights being bound.
    #[wasm_bindgen(js_name = fromLoader)]
    pub fn from_loader(
        loader: &mut JsStreamLoader,
        params_json: &str,
        on_progress: Option<js_sys::Function>,
    ) -> Result<JsLlamaContext, JsError> {
        let file = loader
            .take_file()
            .ok_or_else(|| JsError::new("the stream loader has not finished (call finish())"))?;
        JsLlamaContext::load(file, params_json, on_progress.as_ref())
    }

    /// Starts a completion (llama.rn's parameters as JSON): the prompt is
    /// evaluated now; tokens then come one per `completionNext()`, so the JS
    /// caller can give its event loop a turn between tokens (a stop button,
    /// `stopCompletion`) and `completionFinish()` gives the result object.
    #[wasm_bindgen(js_name = completionStart)]
    pub fn completion_start(&mut self, params_json: &str) -> Result<(), JsError> {
        self.check_idle()?;
        if self.parallel.is_some() {
            // Its sequence would take positions the slots were promised.
            return Err(JsError::new(
                "parallel mode is enabled on this context: use parallel.completion, or parallel.disable() first",
            ));
        }
        let params = completion_params(params_json, &self.ctx.model().vocab, self.ctx_shift)?;
        self.run = Some(self.ctx.start_completion(&params).map_err(js_error)?);
        Ok(())
    }

    /// Evaluates the next micro-batch of the running completion's prompt;
    /// true while more remains. Called until false between JS turns, so a
    /// stop request can end a long prompt between micro-batches.
    #[wasm_bindgen(js_name = completionPrompt)]
    pub fn completion_prompt(&mut self) -> Result<bool, JsError> {
        let run = self
            .run
            .as_mut()
            .ok_or_else(|| JsError::new("no completion is running (call completionStart)"))?;
        run.eval_prompt(&mut self.ctx).map_err(js_error)
    }

    /// The next token as `{token, id, completion_probabilities}`, or
    /// `undefined` once the completion has ended.
    #[wasm_bindgen(js_name = completionNext)]
    pub fn completion_next(&mut self) -> Result<JsValue, JsError> {
        let run = self
            .run
            .as_mut()
            .ok_or_else(|| JsError::new("no completion is running (call completionStart)"))?;
        match run.next_token(&mut self.ctx).map_err(js_error)? {
            None => Ok(JsValue::UNDEFINED),
            Some(t) => {
                let mut data = serde_json::json!({
                    "token": t.text,
                    "id": t.id,
                    "completion_probabilities": t.probs,
                });
                // llama.rn's parsed fields so far, for chats read by a parser.
                if let Some(m) = run.partial_message() {
                    data["content"] = m.content.into();
                    data["reasoning_content"] = m.reasoning_content.into();
                    data["tool_calls"] = serde_json::to_value(&m.tool_calls).unwrap_or_default();
                }
                json_to_js(&data)
            }
        }
    }

    /// Ends the running completion (early if tokens remain: reported as
    /// aborted) and returns its result: `lamina run --json`'s fields plus
    /// llama.rn's `content`.
    #[wasm_bindgen(js_name = completionFinish)]
    pub fn completion_finish(&mut self) -> Result<JsValue, JsError> {
        let run = self
            .run
            .take()
            .ok_or_else(|| JsError::new("no completion is running (call completionStart)"))?;
        // A stop request ends with its completion; it must not cancel the
        // next decode (a bench, say).
        self.ctx.abort_handle().reset();
        let result = run.finish();
        json_to_js(&self.result_json(&result)?)
    }

    /// A completion's result for JS: `lamina run --json`'s fields plus
    /// llama.rn's `content`, `stopped_word`, `stopped_limit`, `interrupted`.
    fn result_json(&self, result: &CompletionResult) -> Result<serde_json::Value, JsError> {
        // `content` (llama.rn's field) is serialized by the result itself.
        let mut v = serde_json::to_value(result).map_err(|e| JsError::new(&e.to_string()))?;
        // llama.rn's types: the stop word itself ("" when none), the limit as
        // a number (1 when reached), `interrupted` for a stop request.
        v["stopped_word"] = if result.stopped_word {
            result.stopping_word.as_str()
        } else {
            ""
        }
        .into();
        v["stopped_limit"] = u32::from(result.stopped_limit).into();
        v["interrupted"] = result.stopped_aborted.into();
        v["cpu_variant"] = self.ctx.cpu_variant().into();
        Ok(v)
    }

    /// The handle that stops this context's completions. A separate object:
    /// the context itself is borrowed while a completion runs.
    #[wasm_bindgen(js_name = abortHandle)]
    pub fn abort_handle(&self) -> JsAbortHandle {
        JsAbortHandle(self.ctx.abort_handle())
    }

    /// llama.rn's `getFormattedChat`: the prompt `messages` (JSON) make
    /// with the model's chat template, or `template` (Jinja text or a
    /// built-in name), the assistant's turn opened. `options` (JSON):
    /// `jinja`, and the chat options of `completion` (`tools`,
    /// `tool_choice`, `enable_thinking`, ...). Without Jinja or tools:
    /// `{ type: "llama-chat", prompt }`; with: `{ type: "jinja", prompt,
    /// chat_format, grammar, grammar_lazy, grammar_triggers,
    /// preserved_tokens, additional_stops, thinking_forced_open,
    /// generation_prompt }`.
    #[wasm_bindgen(js_name = getFormattedChat)]
    pub fn get_formatted_chat(
        &self,
        messages_json: &str,
        template: Option<String>,
        options_json: &str,
    ) -> Result<JsValue, JsError> {
        let messages: Vec<ChatMessage> = parse("messages", messages_json)?;
        let mut p: JsCompletionParams = parse("getFormattedChat options", options_json)?;
        let t = crate::chat::ChatTemplate::for_model(self.ctx.model(), template.as_deref())
            .map_err(js_error)?;
        let tools = p.tools.take().unwrap_or_default();
        if !p.jinja && tools.is_empty() {
            let prompt = t.format(&messages, false).map_err(js_error)?;
            let kind = if t.family().is_none() {
                "jinja"
            } else {
                "llama-chat"
            };
            return json_to_js(&serde_json::json!({ "type": kind, "prompt": prompt }));
        }
        p.tools = Some(tools);
        let options = chat_options(&mut p, false)?;
        let chat = t.apply_chat(&messages, &options).map_err(js_error)?;
        let (grammar, lazy, triggers) = match &chat.grammar {
            Some(g) => (
                g.grammar.as_str(),
                g.lazy,
                g.triggers
                    .iter()
                    .map(|t| serde_json::json!({ "type": 2, "value": t }))
                    .collect::<Vec<_>>(),
            ),
            None => ("", false, Vec::new()),
        };
        json_to_js(&serde_json::json!({
            "type": "jinja",
            "prompt": chat.prompt,
            "chat_format": chat.parser.format().name,
            "grammar": grammar,
            "grammar_lazy": lazy,
            "grammar_triggers": triggers,
            "preserved_tokens": chat.preserved_tokens(),
            "additional_stops": Vec::<String>::new(),
            "thinking_forced_open": chat.thinking_forced_open,
            "generation_prompt": chat.generation_prompt,
        }))
    }

    /// Token ids of `text` (`addSpecial`, `parseSpecial` default true).
    pub fn tokenize(
        &self,
        text: &str,
        add_special: Option<bool>,
        parse_special: Option<bool>,
    ) -> Result<Vec<u32>, JsError> {
        self.ctx
            .model()
            .vocab
            .tokenize(
                text,
                add_special.unwrap_or(true),
                parse_special.unwrap_or(true),
            )
            .map_err(js_error)
    }

    /// The text of `ids` (special tokens rendered when `special`).
    pub fn detokenize(&self, ids: &[u32], special: Option<bool>) -> Result<String, JsError> {
        let vocab = &self.ctx.model().vocab;
        if let Some(&bad) = ids.iter().find(|&&t| t as usize >= vocab.len()) {
            return Err(JsError::new(&format!(
                "token {bad} is outside the vocabulary of {}",
                vocab.len()
            )));
        }
        let bytes = vocab.detokenize(ids, special.unwrap_or(false));
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// `lamina info --json` for the loaded model.
    #[wasm_bindgen(js_name = modelInfo)]
    pub fn model_info(&self) -> Result<JsValue, JsError> {
        json_to_js(&describe::to_json(self.ctx.model().file()))
    }

    /// llama.rn's `embedding`: `{embedding, token_ids, truncated, pooling}`
    /// — one vector, or one per token with pooling none. Params (JSON):
    /// `embd_normalize` (llama-embedding's `--embd-normalize`, default 2),
    /// `truncate`.
    pub fn embedding(&mut self, text: &str, params_json: &str) -> Result<JsValue, JsError> {
        self.check_idle()?;
        let p: JsEmbedParams = parse("embedding parameters", params_json)?;
        let params = EmbedParams {
            normalize: p.embd_normalize.unwrap_or(2),
            truncate: p.truncate,
        };
        let mut out = self.ctx.embed(&[text], &params).map_err(js_error)?;
        let e = out.pop().expect("one input, one embedding");
        let pooling = self.ctx.pooling();
        let embedding = if pooling == Pooling::None {
            serde_json::json!(e.vectors)
        } else {
            serde_json::json!(e.vectors[0])
        };
        json_to_js(&serde_json::json!({
            "embedding": embedding,
            "token_ids": e.token_ids,
            "truncated": e.truncated,
            "pooling": pooling.name(),
        }))
    }

    /// llama.rn's `rerank`: `[{index, score, document}]`, best first. Params
    /// (JSON): `normalize` (true or a non-zero number: scores through a
    /// sigmoid), `truncate`.
    pub fn rerank(
        &mut self,
        query: &str,
        documents: Vec<String>,
        params_json: &str,
    ) -> Result<JsValue, JsError> {
        self.check_idle()?;
        let p: JsRerankParams = parse("rerank parameters", params_json)?;
        let normalize = match p.normalize {
            None | Some(serde_json::Value::Null) => false,
            Some(serde_json::Value::Bool(b)) => b,
            Some(serde_json::Value::Number(n)) => n.as_f64() != Some(0.0),
            Some(other) => {
                return Err(JsError::new(&format!(
                    "normalize must be a boolean or a number, got {other}"
                )))
            }
        };
        let docs: Vec<&str> = documents.iter().map(String::as_str).collect();
        let params = RerankParams {
            normalize,
            truncate: p.truncate,
        };
        let results = self.ctx.rerank(query, &docs, &params).map_err(js_error)?;
        json_to_js(&serde_json::to_value(results).map_err(|e| JsError::new(&e.to_string()))?)
    }

    /// llama-bench's pp and tg tests (tg in `pl` sequences at once): a list
    /// of result rows.
    pub fn bench(
        &mut self,
        pp: usize,
        tg: usize,
        reps: Option<usize>,
        pl: Option<usize>,
    ) -> Result<JsValue, JsError> {
        self.check_idle()?;
        let rows = crate::bench::bench_parallel(
            &mut self.ctx,
            "",
            pp,
            tg,
            reps.unwrap_or(3),
            0,
            pl.unwrap_or(1),
        )
        .map_err(js_error)?;
        json_to_js(&serde_json::to_value(rows).map_err(|e| JsError::new(&e.to_string()))?)
    }

    /// llama.rn's `saveSession` without the file: the session bytes of the
    /// prompt cache's first `token_size` tokens (negative: all of them).
    #[wasm_bindgen(js_name = saveSession)]
    pub fn save_session(&self, token_size: i32) -> Result<Vec<u8>, JsError> {
        self.check_idle()?;
        let keep = usize::try_from(token_size).ok();
        crate::session::save_bytes(&self.ctx, keep).map_err(js_error)
    }

    /// Tokens a `saveSession(token_size)` would keep.
    #[wasm_bindgen(js_name = sessionTokens)]
    pub fn session_tokens(&self, token_size: i32) -> usize {
        let cached = self.ctx.prompt_cache().len();
        usize::try_from(token_size).map_or(cached, |n| n.min(cached))
    }

    /// llama.rn's `loadSession` from the bytes: `{ tokens_loaded, prompt }`;
    /// a corrupt session or another model's is an error that changes
    /// nothing.
    #[wasm_bindgen(js_name = loadSession)]
    pub fn load_session(&mut self, bytes: &[u8]) -> Result<JsValue, JsError> {
        self.check_idle()?;
        let loaded = crate::session::load_bytes(&mut self.ctx, bytes).map_err(js_error)?;
        json_to_js(&serde_json::to_value(loaded).map_err(|e| JsError::new(&e.to_string()))?)
    }

    /// llama.rn's `applyLoraAdapters`: the adapters in `files` (GGUF bytes,
    /// one `Uint8Array` each), named and scaled by `meta` (JSON `[{ path,
    /// scale }]`), replace the applied ones. Every file is checked first: a
    /// bad one is an error and the applied adapters stay as they were.
    #[wasm_bindgen(js_name = applyLoraAdapters)]
    pub fn apply_lora_adapters(
        &mut self,
        files: js_sys::Array,
        meta_json: &str,
    ) -> Result<(), JsError> {
        self.check_idle()?;
        #[derive(Deserialize)]
        struct Meta {
            path: String,
            scale: f32,
        }
        let meta: Vec<Meta> = parse("LoRA adapters", meta_json)?;
        if meta.len() != files.length() as usize {
            return Err(JsError::new("applyLoraAdapters: one file per adapter"));
        }
        let mut loras = Vec::with_capacity(meta.len());
        for (m, file) in meta.into_iter().zip(files.iter()) {
            let bytes = js_sys::Uint8Array::new(&file).to_vec();
            let gguf = crate::gguf::GgufFile::from_bytes(bytes)
                .map_err(|e| JsError::new(&format!("LoRA adapter {}: {e}", m.path)))?;
            let adapter = crate::lora::LoraAdapter::load(
                std::sync::Arc::new(gguf),
                self.ctx.model(),
                &m.path,
            )
            .map_err(js_error)?;
            loras.push(crate::lora::ActiveLora {
                adapter: std::sync::Arc::new(adapter),
                scale: m.scale,
            });
        }
        self.ctx.set_lora_adapters(loras).map_err(js_error)
    }

    /// llama.rn's `getLoadedLoraAdapters`: `[{ path, scaled }]`.
    #[wasm_bindgen(js_name = loadedLoraAdapters)]
    pub fn loaded_lora_adapters(&self) -> Result<JsValue, JsError> {
        let list: Vec<serde_json::Value> = self
            .ctx
            .lora_adapters()
            .iter()
            .map(|l| serde_json::json!({ "path": l.adapter.path(), "scaled": l.scale }))
            .collect();
        json_to_js(&serde_json::Value::Array(list))
    }

    /// llama.rn's `parallel.enable({ n_parallel })`: parallel mode with
    /// `n_parallel` slots (the cache is cleared). Enabling it again changes
    /// the slot count when no request is queued or running.
    #[wasm_bindgen(js_name = parallelEnable)]
    pub fn parallel_enable(&mut self, n_parallel: usize) -> Result<(), JsError> {
        if self.run.is_some() {
            return Err(JsError::new(
                "a completion is running on this context (finish it first)",
            ));
        }
        if self.parallel.as_ref().is_some_and(|p| !p.is_idle()) {
            return Err(JsError::new(
                "parallel requests are running: wait for them or stop them first",
            ));
        }
        self.parallel = Some(Parallel::new(&mut self.ctx, n_parallel).map_err(js_error)?);
        Ok(())
    }

    /// Leaves parallel mode; running and queued requests end (interrupted).
    #[wasm_bindgen(js_name = parallelDisable)]
    pub fn parallel_disable(&mut self) {
        self.parallel = None;
        self.ctx.kv_clear();
    }

    /// Queues a parallel completion (llama.rn's parameters as JSON); its
    /// request id.
    #[wasm_bindgen(js_name = parallelQueue)]
    pub fn parallel_queue(&mut self, params_json: &str) -> Result<u32, JsError> {
        let params = completion_params(params_json, &self.ctx.model().vocab, self.ctx_shift)?;
        Ok(self.parallel_mut()?.submit(params))
    }

    /// Stops parallel request `id` (false when it is not queued or running).
    #[wasm_bindgen(js_name = parallelCancel)]
    pub fn parallel_cancel(&mut self, id: u32) -> Result<bool, JsError> {
        Ok(self.parallel_mut()?.cancel(id))
    }

    /// Whether parallel requests are queued or running.
    #[wasm_bindgen(js_name = parallelBusy)]
    pub fn parallel_busy(&self) -> bool {
        self.parallel.as_ref().is_some_and(|p| !p.is_idle())
    }

    /// One parallel step: `[{ request_id, token: { token, id,
    /// completion_probabilities } } | { request_id, result } | { request_id,
    /// error }]`.
    #[wasm_bindgen(js_name = parallelStep)]
    pub fn parallel_step(&mut self) -> Result<JsValue, JsError> {
        let mut events = Vec::new();
        let parallel = self
            .parallel
            .as_mut()
            .ok_or_else(|| JsError::new("parallel mode is not enabled (call parallel.enable)"))?;
        let stepped = parallel.step(&mut self.ctx, &mut events);
        if !self.parallel_busy() {
            // A stop request ends with the requests it stopped.
            self.ctx.abort_handle().reset();
        }
        stepped.map_err(js_error)?;
        let mut out = Vec::with_capacity(events.len());
        for event in events {
            out.push(match event {
                ParallelEvent::Token { request, token, message } => {
                    let mut data = serde_json::json!({ "token": token.text, "id": token.id, "completion_probabilities": token.probs });
                    if let Some(m) = message {
                        data["content"] = m.content.into();
                        data["reasoning_content"] = m.reasoning_content.into();
                        data["tool_calls"] = serde_json::to_value(&m.tool_calls).unwrap_or_default();
                    }
                    serde_json::json!({ "request_id": request, "token": data })
                }
                ParallelEvent::Done { request, result: Ok(r) } => {
                    serde_json::json!({ "request_id": request, "result": self.result_json(&r)? })
                }
                ParallelEvent::Done { request, result: Err(e) } => {
                    serde_json::json!({ "request_id": request, "error": e.to_string() })
                }
            });
        }
        json_to_js(&serde_json::Value::Array(out))
    }

    /// llama.rn's `parallel.getStatus()`: `{ n_parallel, active_slots,
    /// queued_requests, requests: [{ request_id, state, prompt_length,
    /// tokens_generated }] }`.
    #[wasm_bindgen(js_name = parallelStatus)]
    pub fn parallel_status(&mut self) -> Result<JsValue, JsError> {
        let status = self.parallel_mut()?.status();
        json_to_js(&serde_json::to_value(status).map_err(|e| JsError::new(&e.to_string()))?)
    }

    fn parallel_mut(&mut self) -> Result<&mut Parallel, JsError> {
        self.parallel
            .as_mut()
            .ok_or_else(|| JsError::new("parallel mode is not enabled (call parallel.enable)"))
    }

    /// The model's description and this context's settings, with what its
    /// memory allows (`prompt_cache`, `context_shift`, `sessions`).
    #[wasm_bindgen(js_name = contextInfo)]
    pub fn context_info(&self) -> Result<JsValue, JsError> {
        let model = self.ctx.model();
        // Recurrent layers: partial prompt reuse from state checkpoints
        // only, no context shift (`kv::Memory::can_cut`); session files
        // hold their states.
        let can_cut = self.ctx.memory().can_cut();
        let tensors = model.file().tensors();
        json_to_js(&serde_json::json!({
            "model_desc": crate::bench::model_type(model),
            "model_size": tensors.iter().map(|t| t.n_bytes).sum::<u64>(),
            "model_n_params": tensors.iter().map(|t| t.n_elements()).sum::<u64>(),
            "arch": self.ctx.model().arch_name(),
            "pooling": self.ctx.pooling().name(),
            "n_embd": self.ctx.model().n_embd(),
            "cpu_variant": self.ctx.cpu_variant(),
            "n_threads": self.ctx.n_threads(),
            "n_ctx": self.ctx.n_ctx(),
            "recurrent_layers": self.ctx.memory().recurrent.layout().n_layer,
            "prompt_cache": if can_cut {
                "any common prefix is reused"
            } else {
                "reused when the prompt extends all of it, else from the longest state checkpoint within the common prefix (recurrent states keep no single position: one checkpoint is kept before each prompt's last token, the last 4)"
            },
            "context_shift": can_cut,
            "sessions": true,
        }))
    }
}

/// Stops a running completion at the next token (from `onToken`, or from
/// another thread of a threaded build).
#[wasm_bindgen(js_name = AbortHandle)]
pub struct JsAbortHandle(crate::context::AbortHandle);

#[wasm_bindgen(js_class = AbortHandle)]
impl JsAbortHandle {
    pub fn abort(&self) {
        self.0.abort();
    }
}
