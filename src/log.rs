//! The engine's log: what llama.cpp prints while it loads a model and makes a
//! context (the file, the architecture, the kernel variant, the cache), sent
//! to one sink the application sets: the CLI's `--verbose` prints it on
//! stderr, the JS package forwards it to `addNativeLogListener` listeners
//! once `toggleNativeLog(true)` (llama.rn's pair). Without a sink nothing is
//! formatted: a log call then costs one atomic load.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

impl LogLevel {
    /// llama.rn's level names.
    pub fn name(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

/// Where log lines go.
pub type LogSink = Arc<dyn Fn(LogLevel, &str) + Send + Sync>;

static ENABLED: AtomicBool = AtomicBool::new(false);
static SINK: RwLock<Option<LogSink>> = RwLock::new(None);

/// Sets (or with `None` removes) the sink for every later log line.
pub fn set_log_sink(sink: Option<LogSink>) {
    let on = sink.is_some();
    // A sink that panicked while another thread held the lock leaves it
    // poisoned; the value inside is still a sink or none.
    *SINK.write().unwrap_or_else(|e| e.into_inner()) = sink;
    ENABLED.store(on, Ordering::Release);
}

/// Whether a sink is set (callers can skip work that only feeds the log).
pub fn log_enabled() -> bool {
    ENABLED.load(Ordering::Acquire)
}

/// Sends one line to the sink, if there is one.
pub fn log(level: LogLevel, args: fmt::Arguments) {
    if !log_enabled() {
        return;
    }
    let sink = SINK.read().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(sink) = sink {
        sink(level, &args.to_string());
    }
}

/// `log_info!("n_ctx = {}", n)`: an info line for the engine's log.
#[macro_export]
macro_rules! log_info {
    ($($arg:tt)*) => {
        $crate::log::log($crate::log::LogLevel::Info, format_args!($($arg)*))
    };
}

/// A debug line for the engine's log.
#[macro_export]
macro_rules! log_debug {
    ($($arg:tt)*) => {
        $crate::log::log($crate::log::LogLevel::Debug, format_args!($($arg)*))
    };
}
