//! Nothing is allocated per token: a counting global allocator watches 32
//! decode steps of SmolLM2 after a warm-up (llama2.c's rule: scratch is sized
//! once per context). With one thread the count must be 0. With two, rayon's
//! job queue may take a new block now and then (one per 63 jobs injected
//! into the pool, i.e. per 63 decodes), so the bound is a small constant that
//! does not grow with the steps.

mod common;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{model_path, read_file};
use lamina::backend::cpu::CpuDevice;
use lamina::context::{Batch, Context, ContextParams};
use lamina::gguf::GgufFile;
use lamina::model::Model;

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
/// The counter is global: the tests take turns, so one's loading is not
/// counted in another's decode steps.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

// SAFETY: every call is forwarded to the system allocator unchanged; the
// counter only observes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's layout contract is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: as for `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn argmax(v: &[f32]) -> u32 {
    (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b])).unwrap() as u32
}

/// Allocations during `steps` greedy decode steps after a 4-step warm-up.
fn allocations_per_run(model: &Arc<Model>, n_threads: usize, steps: usize) -> usize {
    let mut ctx = Context::new(
        model.clone(),
        ContextParams {
            n_ctx: 256,
            n_threads,
            ..ContextParams::default()
        },
    )
    .unwrap();
    let prompt = model
        .vocab
        .tokenize("The capital of France is", true, false)
        .unwrap();
    ctx.decode(&Batch::for_sequence(&prompt, 0, 0).unwrap())
        .unwrap();
    let mut next = argmax(ctx.logits(-1).unwrap());
    let mut batch = Batch::new(1);
    let mut pos = prompt.len() as i32;
    let mut step = |ctx: &mut Context, next: &mut u32| {
        batch.clear();
        batch.add(*next, pos, &[0], true).unwrap();
        ctx.decode(&batch).unwrap();
        *next = argmax(ctx.logits(-1).unwrap());
        pos += 1;
    };
    for _ in 0..4 {
        step(&mut ctx, &mut next);
    }
    ALLOCATIONS.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    for _ in 0..steps {
        step(&mut ctx, &mut next);
    }
    COUNTING.store(false, Ordering::SeqCst);
    ALLOCATIONS.load(Ordering::SeqCst)
}

#[test]
fn decoding_allocates_nothing_per_token() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let file = Arc::new(
        GgufFile::from_bytes(read_file(&model_path("SmolLM2-135M-Instruct.Q4_1.gguf"))).unwrap(),
    );
    let device = CpuDevice::new(None).unwrap();
    let model = Arc::new(Model::load(file, device.shared(), None).unwrap());
    assert_eq!(allocations_per_run(&model, 1, 32), 0, "1 thread, 32 steps");
    if cfg!(target_arch = "wasm32") {
        return; // the wasm test build has one thread
    }
    let two = allocations_per_run(&model, 2, 32);
    eprintln!("allocations with 2 threads: {two} in 32 steps");
    assert!(two <= 2, "2 threads, 32 steps: {two} allocations");
    let two_long = allocations_per_run(&model, 2, 96);
    eprintln!("allocations with 2 threads: {two_long} in 96 steps");
    assert!(two_long <= 4, "2 threads, 96 steps: {two_long} allocations");
}

/// The same for the families whose layers keep more than KV rows: LFM2's
/// convolutions, Qwen3.5's gated DeltaNets (heads over the workers), Gemma
/// 4's per-layer inputs and shared caches (small synthetic models).
#[test]
fn hybrid_families_decode_without_allocating() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for name in ["lfm2", "qwen35", "gemma4"] {
        let bytes = common::synth::family(name).write();
        let file = Arc::new(GgufFile::from_bytes(bytes).unwrap());
        let device = CpuDevice::new(None).unwrap();
        let model = Arc::new(Model::load(file, device.shared(), None).unwrap());
        assert_eq!(allocations_per_run(&model, 1, 32), 0, "{name}: 1 thread");
        if !cfg!(target_arch = "wasm32") {
            let two = allocations_per_run(&model, 2, 32);
            assert!(two <= 2, "{name}: 2 threads, 32 steps: {two} allocations");
        }
    }
}
