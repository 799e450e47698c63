//! The JavaScript surface (wasm-bindgen). Errors reach JS as `Error` objects
//! carrying the engine's message.

mod context;
mod params;

pub use context::JsLlamaContext;
use wasm_bindgen::prelude::*;

use crate::gguf::{describe, GgufFile, StreamLoader};

/// The message of the last Rust panic. wasm32 aborts on panic (the JS side
/// sees `RuntimeError: unreachable`); the hook keeps the message so the JS
/// wrapper can throw an `Error` that says what went wrong.
static LAST_PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

#[wasm_bindgen(start)]
fn start() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        let at = info
            .location()
            .map(|l| format!(" (at {}:{})", l.file(), l.line()))
            .unwrap_or_default();
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = Some(format!("{message}{at}"));
        }
    }));
}

/// The message of the last panic, if any (taken: a second call gives none).
#[wasm_bindgen(js_name = takeLastPanic)]
pub fn take_last_panic() -> Option<String> {
    LAST_PANIC.lock().ok().and_then(|mut p| p.take())
}

/// Panics on purpose, to test that a panic reaches JS as an `Error` with its
/// message (not part of the API).
#[doc(hidden)]
#[wasm_bindgen(js_name = __testPanic)]
pub fn test_panic(message: &str) {
    panic!("{message}");
}

/// Test-only: allocates a gibibyte at a time until memory runs out. A
/// failed allocation in wasm32 is a trap without a panic message; the JS
/// side reports it as out of memory.
#[wasm_bindgen(js_name = __testOutOfMemory)]
pub fn test_out_of_memory() -> usize {
    let mut held: Vec<Vec<u8>> = Vec::new();
    for _ in 0..8 {
        held.push(vec![0u8; 1 << 30]);
    }
    held.len()
}

/// Which build this is: `"threaded"` (SIMD128 with a Web Worker thread pool),
/// `"memory64"` (single-thread, 64-bit memory) or `"single-thread"`.
#[wasm_bindgen(js_name = buildKind)]
pub fn build_kind() -> String {
    if cfg!(feature = "threads") {
        "threaded"
    } else if cfg!(target_arch = "wasm64") {
        "memory64"
    } else {
        "single-thread"
    }
    .into()
}

/// Starts rayon's pool of `n` Web Workers (a Promise); contexts then compute
/// with it. Only in the threaded build.
#[cfg(feature = "threads")]
pub use wasm_bindgen_rayon::init_thread_pool;

/// Tells the engine that `initThreadPool` has finished; returns the pool's
/// thread count.
#[cfg(feature = "threads")]
#[wasm_bindgen(js_name = threadPoolStarted)]
pub fn thread_pool_started() -> usize {
    crate::parallel::global_pool_started();
    crate::parallel::global_pool_threads()
}

thread_local! {
    /// The JS function that hears the engine's log (`setLogCallback`).
    static LOG_CALLBACK: std::cell::RefCell<Option<js_sys::Function>> =
        const { std::cell::RefCell::new(None) };
}

/// Sends the engine's log lines to `callback(level, text)`, or with
/// `undefined` stops them (llama.rn's `toggleNativeLog`). Lines logged on
/// the pool's threads of the threaded build are not forwarded: the model
/// and the context log from the calling thread.
#[wasm_bindgen(js_name = setLogCallback)]
pub fn set_log_callback(callback: Option<js_sys::Function>) {
    let on = callback.is_some();
    LOG_CALLBACK.with(|c| *c.borrow_mut() = callback);
    let sink: crate::log::LogSink =
        std::sync::Arc::new(|level: crate::log::LogLevel, text: &str| {
            LOG_CALLBACK.with(|c| {
                if let Some(f) = &*c.borrow() {
                    // A listener that throws must not stop the engine.
                    let _ = f.call2(&JsValue::NULL, &level.name().into(), &text.into());
                }
            });
        });
    crate::log::set_log_sink(on.then_some(sink));
}

fn js_error(e: crate::Error) -> JsError {
    JsError::new(&e.to_string())
}

fn json_to_js(value: &serde_json::Value) -> Result<JsValue, JsError> {
    let text = serde_json::to_string(value).map_err(|e| JsError::new(&e.to_string()))?;
    js_sys::JSON::parse(&text).map_err(|_| JsError::new("cannot convert model info to JS"))
}

/// Describes a GGUF file held in memory: `{version, metadata, tensors, ...}` as
/// `lamina info --json` prints it. Throws an `Error` on a bad file.
#[wasm_bindgen(js_name = modelInfo)]
pub fn model_info(bytes: &[u8]) -> Result<JsValue, JsError> {
    crate::memory::check_fits(
        &format!("a copy of a model file of {} bytes", bytes.len()),
        bytes.len() as u64,
        "the whole file is held in memory",
    )
    .map_err(js_error)?;
    let file = GgufFile::from_bytes(bytes.to_vec()).map_err(js_error)?;
    json_to_js(&describe::to_json(&file))
}

/// Loads a GGUF file from chunks (a `File` read piece by piece, a `fetch` body).
/// The header is checked as soon as it has arrived; the bytes are gathered once.
/// A split model loads part after part: `finish()` each, `beginPart()` the next.
#[wasm_bindgen(js_name = GgufStreamLoader)]
pub struct JsStreamLoader {
    /// The part arriving.
    inner: Option<StreamLoader>,
    /// The parts that have arrived, while more are expected.
    parts: Vec<GgufFile>,
    file: Option<GgufFile>,
}

#[wasm_bindgen(js_class = GgufStreamLoader)]
impl JsStreamLoader {
    /// A loader for a file of `totalBytes` bytes.
    #[wasm_bindgen(constructor)]
    pub fn new(total_bytes: f64) -> Result<JsStreamLoader, JsError> {
        Ok(JsStreamLoader {
            inner: Some(Self::part_loader(total_bytes)?),
            parts: Vec::new(),
            file: None,
        })
    }

    fn part_loader(total_bytes: f64) -> Result<StreamLoader, JsError> {
        if !(total_bytes >= 0.0 && total_bytes.fract() == 0.0 && total_bytes < 2f64.powi(53)) {
            return Err(JsError::new(&format!(
                "totalBytes must be a whole number of bytes, got {total_bytes}"
            )));
        }
        StreamLoader::new(total_bytes as u64).map_err(js_error)
    }

    /// How many files the model is in: the first part's `split.count`
    /// once it has finished (1 for an unsplit model, or before).
    #[wasm_bindgen(getter, js_name = partsExpected)]
    pub fn parts_expected(&self) -> usize {
        match (&self.file, self.parts.first()) {
            (Some(f), _) => f.part_count(),
            (None, Some(first)) => crate::gguf::split::parts_expected(first).unwrap_or(1),
            (None, None) => 1,
        }
    }

    /// Starts the next part of a split model (of `totalBytes` bytes), once
    /// the previous one has finished and more are expected.
    #[wasm_bindgen(js_name = beginPart)]
    pub fn begin_part(&mut self, total_bytes: f64) -> Result<(), JsError> {
        if self.inner.is_some() {
            return Err(JsError::new(
                "the current part has not finished (call finish())",
            ));
        }
        let expected = self.parts_expected();
        if self.file.is_some() || self.parts.len() >= expected {
            return Err(JsError::new(&format!(
                "the model is complete: it has {expected} part(s)"
            )));
        }
        self.inner = Some(Self::part_loader(total_bytes)?);
        Ok(())
    }

    fn loader(&mut self) -> Result<&mut StreamLoader, JsError> {
        self.inner
            .as_mut()
            .ok_or_else(|| JsError::new("the stream loader has already finished"))
    }

    /// Appends the next chunk; throws as soon as the bytes show a bad file.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), JsError> {
        self.loader()?.push(chunk).map_err(js_error)
    }

    /// Bytes of the current part received so far (all of them, once finished).
    #[wasm_bindgen(getter)]
    pub fn received(&self) -> f64 {
        match (&self.inner, &self.file, self.parts.last()) {
            (Some(l), _, _) => l.received() as f64,
            (None, Some(f), _) => f.part_len(f.part_count() - 1) as f64,
            (None, None, Some(p)) => p.file_len() as f64,
            _ => 0.0,
        }
    }

    /// The finished file, handed over once (to a `LlamaContext`).
    pub(crate) fn take_file(&mut self) -> Option<GgufFile> {
        self.file.take()
    }

    /// Whether the header has arrived and been validated.
    #[wasm_bindgen(getter, js_name = headerReady)]
    pub fn header_ready(&self) -> bool {
        self.file.is_some() || self.inner.as_ref().is_some_and(|l| l.header_ready())
    }

    /// Completes the current part once every byte of it has arrived. Returns
    /// the model info when the model is complete, `null` while parts of a
    /// split model are still to come (`beginPart`).
    pub fn finish(&mut self) -> Result<JsValue, JsError> {
        let loader = self
            .inner
            .take()
            .ok_or_else(|| JsError::new("the stream loader has already finished"))?;
        let part = loader.finish().map_err(js_error)?;
        // A later part given first is refused now, before the others load.
        let expected = match self.parts.first() {
            Some(first) => crate::gguf::split::parts_expected(first),
            None => crate::gguf::split::parts_expected(&part),
        }
        .map_err(js_error)?;
        self.parts.push(part);
        if self.parts.len() < expected {
            return Ok(JsValue::NULL);
        }
        let file = GgufFile::join(std::mem::take(&mut self.parts)).map_err(js_error)?;
        let info = json_to_js(&describe::to_json(&file));
        self.file = Some(file);
        info
    }
}
