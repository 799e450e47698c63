//! Parallel completions on one context (llama.rn's parallel mode, llama.cpp
//! server's slots): up to `n_parallel` requests run at once, each in a
//! sequence of its own (1..=n_parallel) with its own sampler and stop state,
//! and every step decodes one token of each generating request in a single
//! batch, so the weights are read once for all of them. Requests beyond the
//! slots wait in a queue. Each slot has `n_ctx / n_parallel` positions, as
//! the server divides the context; a full slot shifts or stops as its
//! request says.
//!
//! A caller drives it with `step` (a JS worker, between turns of its event
//! loop) or `Context::completions` (to the end).

use std::collections::VecDeque;

use serde::Serialize;

use super::{
    CompletionParams, CompletionResult, CompletionRun, GeneratedToken, NextStep, StopReason,
};
use crate::chat::ChatMessage;
use crate::context::{Batch, Context, SeqId, MAX_SEQUENCES};
use crate::error::{Error, Result};
use crate::stopwatch::Stopwatch;

pub type RequestId = u32;

/// What a step reports.
#[derive(Debug)]
pub enum ParallelEvent {
    Token {
        request: RequestId,
        token: GeneratedToken,
        /// The message so far, for chats whose output is parsed (tools,
        /// reasoning): as `CompletionRun::partial_message`.
        message: Option<ChatMessage>,
    },
    /// The request ended: its result, or why it failed.
    Done {
        request: RequestId,
        result: Result<CompletionResult>,
    },
}

/// A request's state in `status()` (llama.rn's names).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestStatus {
    pub request_id: RequestId,
    /// "queued", "processing_prompt" or "generating".
    pub state: &'static str,
    pub prompt_length: usize,
    pub tokens_generated: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ParallelStatus {
    pub n_parallel: usize,
    pub active_slots: usize,
    pub queued_requests: usize,
    pub requests: Vec<RequestStatus>,
}

struct Active {
    id: RequestId,
    run: CompletionRun,
}

pub struct Parallel {
    slots: Vec<Option<Active>>,
    /// Waiting requests; `None` for one cancelled while queued (the next
    /// step reports it).
    queue: VecDeque<(RequestId, Option<CompletionParams>)>,
    next_id: RequestId,
    n_ctx_slot: usize,
}

impl Parallel {
    /// Parallel mode with `n_parallel` slots on `ctx`, whose cache is cleared
    /// (the slots take sequences 1..=n_parallel).
    pub fn new(ctx: &mut Context, n_parallel: usize) -> Result<Parallel> {
        if n_parallel == 0 || n_parallel >= MAX_SEQUENCES {
            return Err(Error::InvalidArgument(format!(
                "n_parallel must be between 1 and {}, got {n_parallel}",
                MAX_SEQUENCES - 1
            )));
        }
        if n_parallel > ctx.params().n_batch {
            return Err(Error::InvalidArgument(format!(
                "n_parallel = {n_parallel} is more than n_batch = {}: one decode carries a token of every slot",
                ctx.params().n_batch
            )));
        }
        let n_ctx_slot = ctx.n_ctx() / n_parallel;
        if n_ctx_slot < 8 {
            return Err(Error::InvalidArgument(format!(
                "n_ctx = {} gives {n_parallel} parallel slots only {n_ctx_slot} positions each (at least 8)",
                ctx.n_ctx()
            )));
        }
        if !ctx.model().can_generate() {
            return Err(Error::InvalidArgument(format!(
                "a {} model cannot generate text (it is an encoder)",
                ctx.model().arch_name()
            )));
        }
        ctx.kv_clear();
        ctx.abort_handle().reset();
        crate::log_info!("parallel: {n_parallel} slots of {n_ctx_slot} positions");
        Ok(Parallel {
            slots: (0..n_parallel).map(|_| None).collect(),
            queue: VecDeque::new(),
            next_id: 1,
            n_ctx_slot,
        })
    }

    pub fn n_parallel(&self) -> usize {
        self.slots.len()
    }

    /// Queues a completion; it starts when a slot is free.
    pub fn submit(&mut self, params: CompletionParams) -> RequestId {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        self.queue.push_back((id, Some(params)));
        id
    }

    /// Stops request `id`: a queued one is dropped (reported by the next
    /// step as cancelled), a running one ends at the next step with what it
    /// has (as aborted). False when no such request is waiting or running.
    pub fn cancel(&mut self, id: RequestId) -> bool {
        if let Some(active) = self.slots.iter_mut().flatten().find(|a| a.id == id) {
            active.run.stop();
            return true;
        }
        if let Some((_, params)) = self.queue.iter_mut().find(|(q, _)| *q == id) {
            *params = None;
            return true;
        }
        false
    }

    /// Whether nothing is queued or running.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.slots.iter().all(Option::is_none)
    }

    pub fn status(&self) -> ParallelStatus {
        let mut requests: Vec<RequestStatus> = self
            .slots
            .iter()
            .flatten()
            .map(|a| RequestStatus {
                request_id: a.id,
                state: if a.run.prompt_done() {
                    "generating"
                } else {
                    "processing_prompt"
                },
                prompt_length: a.run.prompt_ids.len(),
                tokens_generated: a.run.generated.len(),
            })
            .collect();
        requests.extend(self.queue.iter().map(|(id, _)| RequestStatus {
            request_id: *id,
            state: "queued",
            prompt_length: 0,
            tokens_generated: 0,
        }));
        ParallelStatus {
            n_parallel: self.slots.len(),
            active_slots: self.slots.iter().flatten().count(),
            queued_requests: self.queue.len(),
            requests,
        }
    }

    /// One step: queued requests take free slots; each request still in its
    /// prompt evaluates one micro-batch of it; then one decode carries one
    /// token of every generating request, and each samples its next token.
    /// Tokens and ended requests are appended to `events`.
    pub fn step(&mut self, ctx: &mut Context, events: &mut Vec<ParallelEvent>) -> Result<()> {
        self.admit(ctx, events);
        for slot in 0..self.slots.len() {
            let Some(active) = &mut self.slots[slot] else {
                continue;
            };
            if !active.run.prompt_done() {
                if let Err(e) = active.run.eval_prompt(ctx) {
                    self.fail(ctx, slot, e, events);
                }
            }
        }
        self.generate(ctx, events)?;
        for slot in 0..self.slots.len() {
            if self.slots[slot].as_ref().is_some_and(|a| a.run.is_done()) {
                let active = self.slots[slot].take().expect("checked");
                self.free(ctx, slot)?;
                events.push(ParallelEvent::Done {
                    request: active.id,
                    result: Ok(active.run.finish()),
                });
            }
        }
        Ok(())
    }

    /// Starts queued requests in the free slots (an unusable request, bad
    /// parameters or an empty prompt, ends at once with its error).
    fn admit(&mut self, ctx: &mut Context, events: &mut Vec<ParallelEvent>) {
        while let Some(slot) = self.slots.iter().position(Option::is_none) {
            let Some((id, params)) = self.queue.pop_front() else {
                return;
            };
            let Some(params) = params else {
                events.push(ParallelEvent::Done {
                    request: id,
                    result: Err(Error::Cancelled(format!("request {id}"))),
                });
                continue;
            };
            match ctx.start_run(&params, slot_seq(slot), self.n_ctx_slot) {
                Ok(run) => self.slots[slot] = Some(Active { id, run }),
                Err(e) => events.push(ParallelEvent::Done {
                    request: id,
                    result: Err(e),
                }),
            }
        }
    }

    /// The shared decode: one token of each generating request.
    fn generate(&mut self, ctx: &mut Context, events: &mut Vec<ParallelEvent>) -> Result<()> {
        let t = Stopwatch::start();
        let mut batch = Batch::new(self.slots.len());
        let mut in_batch: Vec<(usize, u32)> = Vec::with_capacity(self.slots.len());
        for slot in 0..self.slots.len() {
            let Some(active) = &mut self.slots[slot] else {
                continue;
            };
            if !active.run.prompt_done() {
                continue;
            }
            match active.run.next_decode(ctx) {
                Ok(NextStep::Decode(token)) => {
                    batch.add(token, active.run.pos as i32, &[slot_seq(slot)], true)?;
                    in_batch.push((slot, token));
                }
                // A parallel run always has its pending token (the prompt's
                // last, or its last sampled one) until it ends.
                Ok(NextStep::Ended) | Ok(NextStep::Sample) => {}
                Err(e) => self.fail(ctx, slot, e, events),
            }
        }
        if batch.is_empty() {
            return Ok(());
        }
        match ctx.decode(&batch) {
            Ok(()) => {}
            Err(Error::Cancelled(_)) => {
                for &(slot, _) in &in_batch {
                    if let Some(a) = &mut self.slots[slot] {
                        a.run.end(StopReason::Abort);
                    }
                }
                return Ok(());
            }
            Err(e) => {
                let why = e.to_string();
                for &(slot, _) in &in_batch {
                    self.fail(ctx, slot, Error::InvalidArgument(why.clone()), events);
                }
                return Ok(());
            }
        }
        let ms = t.elapsed_ms();
        for (index, &(slot, token)) in in_batch.iter().enumerate() {
            let Some(active) = &mut self.slots[slot] else {
                continue;
            };
            active.run.decoded(ctx, token);
            let t = Stopwatch::start();
            match active.run.sample_at(ctx, index as i32) {
                Ok(Some(token)) => events.push(ParallelEvent::Token {
                    request: active.id,
                    token,
                    message: active.run.partial_message(),
                }),
                Ok(None) => {}
                Err(e) => {
                    self.fail(ctx, slot, e, events);
                    continue;
                }
            }
            // Each stream's time is the shared decode and its own sampling.
            if let Some(a) = &mut self.slots[slot] {
                a.run.predicted_ms += ms + t.elapsed_ms();
            }
        }
        Ok(())
    }

    /// Ends the request in `slot` with `error`, freeing the slot.
    fn fail(
        &mut self,
        ctx: &mut Context,
        slot: usize,
        error: Error,
        events: &mut Vec<ParallelEvent>,
    ) {
        if let Some(active) = self.slots[slot].take() {
            // Freeing a valid sequence id cannot fail.
            let _ = self.free(ctx, slot);
            events.push(ParallelEvent::Done {
                request: active.id,
                result: Err(error),
            });
        }
    }

    fn free(&mut self, ctx: &mut Context, slot: usize) -> Result<()> {
        ctx.kv_seq_rm(slot_seq(slot) as i32, -1, -1)
    }
}

/// The sequence of a slot: sequence 0 stays the plain completion's.
fn slot_seq(slot: usize) -> SeqId {
    slot as SeqId + 1
}

impl Context {
    /// Runs `requests` with `n_parallel` of them at a time (see `Parallel`),
    /// calling `on_token(i, token)` for request `i`'s tokens, and returns
    /// their results in order; the first request that fails is the error.
    /// The context's cache is cleared first.
    pub fn completions(
        &mut self,
        requests: &[CompletionParams],
        n_parallel: usize,
        mut on_token: impl FnMut(usize, &super::TokenEvent),
    ) -> Result<Vec<CompletionResult>> {
        let mut parallel = Parallel::new(self, n_parallel)?;
        let ids: Vec<RequestId> = requests
            .iter()
            .map(|p| parallel.submit(p.clone()))
            .collect();
        let index = |id: RequestId| ids.iter().position(|&i| i == id).expect("submitted");
        let mut results: Vec<Option<CompletionResult>> = vec![None; requests.len()];
        let mut events = Vec::new();
        let ended = loop {
            if parallel.is_idle() {
                break Ok(());
            }
            if let Err(e) = parallel.step(self, &mut events) {
                break Err(e);
            }
            let mut failed = None;
            for event in events.drain(..) {
                match event {
                    ParallelEvent::Token { request, token, .. } => {
                        on_token(index(request), &token.event())
                    }
                    ParallelEvent::Done { request, result } => match result {
                        Ok(r) => results[index(request)] = Some(r),
                        Err(e) => failed = failed.or(Some(e)),
                    },
                }
            }
            if let Some(e) = failed {
                break Err(e);
            }
        };
        self.abort_handle().reset();
        ended?;
        Ok(results
            .into_iter()
            .map(|r| r.expect("every request ended"))
            .collect())
    }
}
