//! Session files: a context's prompt cache (sequence 0's tokens and their KV
//! rows) saved to bytes or a file and loaded back, as llama.rn's
//! `saveSession`/`loadSession` and llama.cpp's `--prompt-cache`. A loaded
//! session continues exactly as the context that saved it would have: the
//! rows are the saved bytes, and the next completion reuses them as its
//! cached prefix.
//!
//! The format is lamina's own (little-endian), versioned, checksummed and
//! tied to the model that wrote it:
//!
//! | bytes | what |
//! |---|---|
//! | 8 | magic `LAMSESS\0` |
//! | 4 | format version (2; 3 where the layers' rows differ; 4 with state checkpoints) |
//! | 8 | the model's fingerprint (`fingerprint`) |
//! | 4 + n | the model's description, for error messages (UTF-8) |
//! | 4 + n, 4 + n | the K and V cache types' names (`f16`, `f32`, `q8_0`) |
//! | 4, 4, 4 | values per cache row, layers, tokens (`n`); versions 3 and 4: layers (`L`), tokens, then `4 · L` values per row of each layer |
//! | 4 · n | the tokens |
//! | per layer | `n` K rows then `n` V rows, as the cache stores them |
//! | 4 + 4 · m | (from version 2) the recurrent layers' states after the tokens: `m` f32 values (0 without such layers) |
//! | 4 + c · (4 + 4 · m) | (version 4) `c` state checkpoints of the prompt cache, oldest first: the tokens each follows (at most `n`), then its `m` values |
//! | 8 | checksum of everything before it (`checksum`) |
//!
//! A cache whose layers all have rows of one width (every model but Gemma
//! 4's) and no checkpoints (every model without recurrent layers) is
//! written as version 2, the oldest version that holds it; version 1 files
//! (no recurrent states) still load.
//!
//! Reading checks the magic, the version and the checksum before anything
//! else, then every size against the bytes present before allocating;
//! loading checks the model, the cache types and the context size before
//! changing the context, so a corrupt file or another model's session is an
//! error that changes nothing.

mod hash;

use crate::context::{Context, KvSnapshot, KvType, SequenceState, StateCheckpoint};
use crate::error::{Error, Result};
use crate::model::Model;

pub use hash::{checksum, fingerprint};

const MAGIC: &[u8; 8] = b"LAMSESS\0";
const VERSION: u32 = 4;

/// What loading a session gave the context.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LoadedSession {
    /// Tokens now in the prompt cache.
    pub tokens_loaded: usize,
    /// Their text (llama.rn's `prompt`).
    pub prompt: String,
}

/// Sequence 0's first `max_tokens` (None: all) cached tokens and their KV
/// rows, as session bytes.
pub fn save_bytes(ctx: &Context, max_tokens: Option<usize>) -> Result<Vec<u8>> {
    let state = ctx.save_state(max_tokens)?;
    Ok(encode(ctx.model(), &state))
}

/// Loads session bytes into `ctx` (replacing its cache); an error changes
/// nothing.
pub fn load_bytes(ctx: &mut Context, bytes: &[u8]) -> Result<LoadedSession> {
    let state = decode(ctx.model(), bytes)?;
    ctx.load_state(&state)?;
    crate::log_info!(
        "session: loaded {} tokens ({} bytes)",
        state.tokens.len(),
        bytes.len()
    );
    Ok(LoadedSession {
        tokens_loaded: state.tokens.len(),
        prompt: String::from_utf8_lossy(&ctx.model().vocab.detokenize(&state.tokens, true))
            .into_owned(),
    })
}

/// Writes the session to `path` atomically (never over the model file) and
/// returns the tokens saved.
#[cfg(not(target_family = "wasm"))]
pub fn save_file(
    ctx: &Context,
    path: &std::path::Path,
    max_tokens: Option<usize>,
) -> Result<usize> {
    use std::io::Write;
    let inputs: Vec<&std::path::Path> = ctx.model().file().paths();
    let mut out = crate::output_file::OutputFile::create(path, &inputs)?;
    let state = ctx.save_state(max_tokens)?;
    out.write_all(&encode(ctx.model(), &state))
        .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
    out.commit()?;
    Ok(state.tokens.len())
}

/// Loads the session file at `path` into `ctx`; an error changes nothing.
#[cfg(not(target_family = "wasm"))]
pub fn load_file(ctx: &mut Context, path: &std::path::Path) -> Result<LoadedSession> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::io(format!("cannot read the session {}", path.display()), e))?;
    load_bytes(ctx, &bytes).map_err(|e| match e {
        Error::Session(why) => Error::Session(format!("{}: {why}", path.display())),
        other => other,
    })
}

fn model_description(model: &Model) -> String {
    crate::bench::model_type(model)
}

/// The session bytes of `state` for `model`.
pub fn encode(model: &Model, state: &SequenceState) -> Vec<u8> {
    let kv = &state.kv;
    let rows: usize = kv.layers.iter().map(|(k, v)| k.len() + v.len()).sum();
    let mut out = Vec::with_capacity(128 + 4 * state.tokens.len() + rows);
    let put_u32 = |out: &mut Vec<u8>, v: usize| out.extend_from_slice(&(v as u32).to_le_bytes());
    let put_str = |out: &mut Vec<u8>, s: &str| {
        put_u32(out, s.len());
        out.extend_from_slice(s.as_bytes());
    };
    // The oldest version that holds the state, so such files stay readable
    // by the lamina that wrote it.
    let uniform = kv.widths.iter().all(|&w| Some(&w) == kv.widths.first());
    let version = match (state.checkpoints.is_empty(), uniform) {
        (false, _) => 4,
        (true, false) => 3,
        (true, true) => 2,
    };
    out.extend_from_slice(MAGIC);
    put_u32(&mut out, version as usize);
    out.extend_from_slice(&fingerprint(model).to_le_bytes());
    put_str(&mut out, &model_description(model));
    put_str(&mut out, kv.type_k.name());
    put_str(&mut out, kv.type_v.name());
    if version == 2 {
        put_u32(&mut out, kv.widths.first().copied().unwrap_or(0));
        put_u32(&mut out, kv.layers.len());
        put_u32(&mut out, state.tokens.len());
    } else {
        put_u32(&mut out, kv.layers.len());
        put_u32(&mut out, state.tokens.len());
        for &w in &kv.widths {
            put_u32(&mut out, w);
        }
    }
    for &t in &state.tokens {
        out.extend_from_slice(&t.to_le_bytes());
    }
    for (k, v) in &kv.layers {
        out.extend_from_slice(k);
        out.extend_from_slice(v);
    }
    put_u32(&mut out, state.recurrent.len());
    for &v in &state.recurrent {
        out.extend_from_slice(&v.to_le_bytes());
    }
    if version >= 4 {
        put_u32(&mut out, state.checkpoints.len());
        for c in &state.checkpoints {
            put_u32(&mut out, c.tokens);
            for &v in &c.states {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    let sum = checksum(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Reads session bytes written for `model`: an error names what is wrong
/// (not a session, a newer version, corrupt, another model, truncated).
pub fn decode(model: &Model, bytes: &[u8]) -> Result<SequenceState> {
    let bad = |why: String| Error::Session(why);
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(bad("not a lamina session file (no LAMSESS magic)".into()));
    }
    // The smallest session: magic, version, and the checksum.
    let body_len = bytes
        .len()
        .checked_sub(8)
        .filter(|&n| n >= MAGIC.len() + 4)
        .ok_or_else(|| bad("the file is truncated".into()))?;
    let mut r = Reader {
        bytes: &bytes[MAGIC.len()..body_len],
    };
    let version = r.u32("the version")?;
    if !(1..=VERSION).contains(&version) {
        return Err(bad(format!(
            "format version {version}, this lamina reads versions 1 to {VERSION}"
        )));
    }
    // The checksum covers every byte before it: a session cut short or
    // changed is caught here, before any size in it is trusted.
    let stored = u64::from_le_bytes(bytes[body_len..].try_into().expect("8 bytes"));
    if checksum(&bytes[..body_len]) != stored {
        return Err(bad(
            "the checksum does not match: the file is corrupt or truncated".into(),
        ));
    }
    let saved_for = r.u64("the model fingerprint")?;
    let description = r.string("the model description")?;
    if saved_for != fingerprint(model) {
        return Err(bad(format!(
            "it was saved with another model ({description}), not this one ({})",
            model_description(model)
        )));
    }
    let type_k = KvType::from_name(&r.string("the K cache type")?)?;
    let type_v = KvType::from_name(&r.string("the V cache type")?)?;
    let (widths, n) = if version >= 3 {
        let n_layer = r.u32("the layer count")? as usize;
        let n = r.u32("the token count")? as usize;
        let widths = r
            .take("the row widths", n_layer.checked_mul(4))?
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")) as usize)
            .collect();
        (widths, n)
    } else {
        let width = r.u32("the row width")? as usize;
        let n_layer = r.u32("the layer count")? as usize;
        let n = r.u32("the token count")? as usize;
        // Checked against the bytes below; the list is only as long as
        // the rows that follow can be.
        if n_layer > r.bytes.len() {
            return Err(bad(format!(
                "{n_layer} layers need more than the {} bytes present",
                r.bytes.len()
            )));
        }
        (vec![width; n_layer], n)
    };
    let n_layer = widths.len();
    let tokens_bytes = r.take("the tokens", n.checked_mul(4))?;
    let tokens: Vec<u32> = tokens_bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    let rows_of = |w: usize| (type_k.bytes_per_row(w), type_v.bytes_per_row(w));
    // Every layer's rows (and, from version 2, the recurrent states' count
    // after them) must be present before any is copied.
    let after = if version >= 2 { 4 } else { 0 };
    let needed = widths.iter().try_fold(after, |sum: usize, &w| {
        let (k_row, v_row) = rows_of(w);
        let layer = n
            .checked_mul(k_row)
            .and_then(|k| n.checked_mul(v_row).and_then(|v| k.checked_add(v)))?;
        sum.checked_add(layer)
    });
    if needed.is_none_or(|all| all > r.bytes.len()) {
        return Err(bad(format!(
            "{n_layer} layers of {n} rows need more than the {} bytes present",
            r.bytes.len()
        )));
    }
    let mut layers = Vec::with_capacity(n_layer);
    for &w in &widths {
        let (k_row, v_row) = rows_of(w);
        let k = r.take("K rows", Some(n * k_row))?.to_vec();
        let v = r.take("V rows", Some(n * v_row))?.to_vec();
        layers.push((k, v));
    }
    let f32s = |b: &[u8]| -> Vec<f32> {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect()
    };
    let (recurrent, checkpoints) = if version >= 2 {
        let m = r.u32("the recurrent state count")? as usize;
        // Version 4's checkpoints follow: their count, then each one's
        // token count and `m` values.
        let fits = match m.checked_mul(4) {
            Some(b) if version >= 4 => b.checked_add(4).is_some_and(|b| b <= r.bytes.len()),
            Some(b) => b == r.bytes.len(),
            None => false,
        };
        if !fits {
            return Err(bad(format!(
                "{m} recurrent values need other than the {} bytes present",
                r.bytes.len()
            )));
        }
        let recurrent = f32s(r.take("the recurrent states", Some(4 * m))?);
        let mut checkpoints = Vec::new();
        if version >= 4 {
            let c = r.u32("the checkpoint count")? as usize;
            let each = 4 + 4 * m;
            if c.checked_mul(each) != Some(r.bytes.len()) {
                return Err(bad(format!(
                    "{c} checkpoints of {m} values need other than the {} bytes present",
                    r.bytes.len()
                )));
            }
            for _ in 0..c {
                let tokens = r.u32("a checkpoint's token count")? as usize;
                let states = f32s(r.take("a checkpoint's states", Some(4 * m))?);
                checkpoints.push(StateCheckpoint { tokens, states });
            }
        }
        (recurrent, checkpoints)
    } else {
        (Vec::new(), Vec::new())
    };
    if !r.bytes.is_empty() {
        return Err(bad(format!(
            "{} bytes follow the session's contents",
            r.bytes.len()
        )));
    }
    Ok(SequenceState {
        tokens,
        kv: KvSnapshot {
            type_k,
            type_v,
            widths,
            n_cells: n,
            layers,
        },
        recurrent,
        checkpoints,
    })
}

/// Little-endian fields off the front of a byte slice.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, what: &str, n: Option<usize>) -> Result<&'a [u8]> {
        match n {
            Some(n) if n <= self.bytes.len() => {
                let (head, rest) = self.bytes.split_at(n);
                self.bytes = rest;
                Ok(head)
            }
            _ => Err(Error::Session(format!(
                "the file ends inside {what} ({} bytes left)",
                self.bytes.len()
            ))),
        }
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.take(what, Some(4))?;
        Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.take(what, Some(8))?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let n = self.u32(what)? as usize;
        let b = self.take(what, Some(n))?;
        String::from_utf8(b.to_vec()).map_err(|_| Error::Session(format!("{what} is not UTF-8")))
    }
}
