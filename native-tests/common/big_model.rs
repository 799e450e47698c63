//! A model file larger than 4 GiB, for the memory64 build's tests (npm in
//! Node and Chromium): SmolLM2's tokenizer and attention shapes, with five
//! layers of 131072-wide F32 feed-forwards (4.5 GB). It is written sparse:
//! the feed-forward and attention weights are zeros (holes in the file), so
//! every layer passes its input on unchanged. Every token's embedding is
//! ones and the output matrix has one row of ones, that of `TOKEN`, the last
//! bytes of the file, past 4.6 GB: greedy decoding gives `TOKEN` every time
//! if, and only if, those bytes are read where they are.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};

use lamina::gguf::{GgufFile, GgufLayout, Value};
use lamina::tensor::GgmlType;

use super::{model_path, read_file};

/// The token the model always predicts: the last of SmolLM2's 49152.
pub const TOKEN: u32 = 49151;
const N_LAYER: u32 = 5;
const N_FF: u64 = 131_072;

/// Writes the model to `path`; returns its size in bytes.
pub fn write(path: &str) -> u64 {
    let smollm2 = GgufFile::from_bytes(read_file(&model_path("SmolLM2-135M-Instruct.Q4_1.gguf")))
        .expect("SmolLM2");
    let meta = smollm2.metadata();
    let n_embd = meta.get_u32("llama.embedding_length").expect("n_embd") as u64;
    let n_head = meta.get_u32("llama.attention.head_count").expect("n_head") as u64;
    let n_head_kv = meta
        .get_u32("llama.attention.head_count_kv")
        .expect("n_head_kv") as u64;
    let n_vocab = meta
        .get_str_array("tokenizer.ggml.tokens")
        .expect("tokens")
        .len() as u64;
    let head_dim = n_embd / n_head;

    let mut layout = GgufLayout::new();
    for (key, value) in meta.iter() {
        let value = match key {
            "llama.block_count" => Value::U32(N_LAYER),
            "llama.feed_forward_length" => Value::U32(N_FF as u32),
            "general.name" => Value::String("lamina sparse model over 4 GiB".into()),
            _ => value.clone(),
        };
        layout.add_metadata(key, value).unwrap();
    }
    // (name, shape, the value every element has): ones or zeros.
    let mut tensors: Vec<(String, Vec<u64>, bool)> =
        vec![("token_embd.weight".into(), vec![n_embd, n_vocab], true)];
    for i in 0..N_LAYER {
        let layer = |name: &str| format!("blk.{i}.{name}.weight");
        tensors.extend([
            (layer("attn_norm"), vec![n_embd], true),
            (layer("attn_q"), vec![n_embd, n_embd], false),
            (layer("attn_k"), vec![n_embd, head_dim * n_head_kv], false),
            (layer("attn_v"), vec![n_embd, head_dim * n_head_kv], false),
            (layer("attn_output"), vec![n_embd, n_embd], false),
            (layer("ffn_norm"), vec![n_embd], true),
            (layer("ffn_gate"), vec![n_embd, N_FF], false),
            (layer("ffn_up"), vec![n_embd, N_FF], false),
            (layer("ffn_down"), vec![N_FF, n_embd], false),
        ]);
    }
    tensors.push(("output_norm.weight".into(), vec![n_embd], true));
    for (name, shape, _) in &tensors {
        layout
            .add_tensor(name.as_str(), GgmlType::F32, shape)
            .unwrap();
    }
    layout
        .add_tensor("output.weight", GgmlType::F32, &[n_embd, n_vocab])
        .unwrap();

    let file = File::create(path).unwrap_or_else(|e| panic!("cannot create {path}: {e}"));
    let mut stream = layout.stream_to(SparseFile(file)).unwrap();
    let ones = |n: u64| 1f32.to_le_bytes().repeat(n as usize);
    for (name, shape, one) in &tensors {
        let n: u64 = shape.iter().product();
        if *one {
            stream.write_tensor(name, &ones(n)).unwrap();
        } else {
            stream
                .write_tensor(name, &vec![0u8; n as usize * 4])
                .unwrap();
        }
    }
    let mut output = vec![0u8; (n_embd * n_vocab * 4) as usize];
    let row = (TOKEN as u64 * n_embd * 4) as usize;
    output[row..row + n_embd as usize * 4].copy_from_slice(&ones(n_embd));
    stream.write_tensor("output.weight", &output).unwrap();
    let SparseFile(mut file) = stream.finish().unwrap();
    // A hole at the end is not part of the file until its length says so.
    let end = file.stream_position().unwrap();
    file.set_len(end).unwrap();
    end
}

/// A file whose runs of zeros are skipped (left as holes) instead of written.
struct SparseFile(File);

impl Write for SparseFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.iter().all(|&b| b == 0) {
            self.0.seek(SeekFrom::Current(buf.len() as i64))?;
            Ok(buf.len())
        } else {
            self.0.write(buf)
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}
