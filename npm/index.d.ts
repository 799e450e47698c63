/** A GGUF metadata value; arrays over 32 elements are summarised. */
export type MetadataValue =
  | number
  | string
  | boolean
  | MetadataValue[]
  | { type: 'array'; element_type: string; len: number; head: MetadataValue[] };

export interface TensorInfo {
  name: string;
  /** ggml type name, e.g. "Q4_1". */
  type: string;
  /** ggml order: shape[0] is the row length. */
  shape: number[];
  /** Offset from the start of the data section (of its part). */
  offset: number;
  bytes: number;
  /** Which file of a split model holds it (0 for an unsplit model). */
  part: number;
}

/**
 * A model source: one GGUF file as bytes, a Blob/File, a URL, or in Node a
 * file path; or the parts of a split model (NAME-00001-of-0000N.gguf, ...)
 * as an array in order. A first part's URL or path alone brings the others.
 */
export type ModelSource =
  | ArrayBuffer
  | Uint8Array
  | Blob
  | string
  | URL
  | Array<ArrayBuffer | Uint8Array | Blob | string | URL>;

export interface ModelInfo {
  version: number;
  alignment: number;
  data_offset: number;
  /** Bytes of every file of the model together. */
  file_bytes: number;
  /** The model's files: one, or each part of a split model. */
  parts: { path: string | null; bytes: number; tensors: number }[];
  metadata: Record<string, MetadataValue>;
  tensors: TensorInfo[];
  totals: { tensors: number; elements: number; bytes: number; by_type: Record<string, number> };
}

export interface LoadOptions {
  /** Called with the fraction (0..1) of the model downloaded or read so far (every part of a split model). */
  onProgress?: (fraction: number) => void;
  /** Stops the download and the load; the promise rejects with its reason. */
  signal?: AbortSignal;
  /** A URL downloads in 16 MiB ranges, this many at once (default 4; 1: one after another). */
  parallel?: number;
  /** Times a range is asked for again, from the byte it reached, after a dropped connection (default 3). */
  retries?: number;
  /**
   * Keep a model downloaded by URL in the model cache (`cache`) and load it from there next
   * time: checked against the server's ETag and size when it answers, used as it is offline.
   */
  cache?: boolean;
  /** The file's SHA-256 (hex), or one per part of a split model: a mismatch is an Error, and nothing is cached. */
  sha256?: string | string[];
}

/** An entry of the model cache. */
export interface CacheEntry {
  url: string;
  size: number;
  etag: string | null;
  /** Of the stored bytes (in browsers only when a sha256 was given to check). */
  sha256: string | null;
  /** ISO 8601. */
  stored: string;
}

/**
 * The model cache: a directory in Node (LAMINA_CACHE_DIR, else $XDG_CACHE_HOME/lamina/models,
 * else ~/.cache/lamina/models), the origin private file system in browsers (Cache Storage where there is none).
 */
export declare const cache: {
  where(): Promise<string>;
  list(): Promise<CacheEntry[]>;
  delete(url: string | URL): Promise<void>;
  clear(): Promise<void>;
};

export interface BuildInfo {
  build: 'single-thread' | 'threaded' | 'memory64';
  /**
   * The instruction set of the build: 'relaxed-simd' where the engine runs
   * relaxed SIMD correctly (a check at load: Chromium's V8 does; Node 20's,
   * behind a flag, sums wrongly and is not used), else 'simd128'; the same
   * numbers either way.
   */
  simd: 'simd128' | 'relaxed-simd';
  /** Why this instruction set (e.g. "this engine has no relaxed SIMD"). */
  simd_reason: string;
  /** Threads of the engine's pool (Node: 1). */
  threads?: number;
  /** Why this build (e.g. "the page is not cross-origin isolated (COOP/COEP)"). */
  reason?: string;
}

/** What runs a loaded model. */
export interface ContextInfo {
  arch: string;
  pooling: Pooling;
  n_embd: number;
  cpu_variant: string;
  n_threads: number;
  n_ctx: number;
  /** Layers with a recurrent state per sequence (LFM2's convolutions,
   *  Qwen3.5's gated DeltaNets). */
  recurrent_layers: number;
  /** How completions reuse the cached prompt. */
  prompt_cache: string;
  /** Whether a full context shifts (false with recurrent layers: it ends). */
  context_shift: boolean;
  /** Whether session files can be saved and loaded (always: they hold
   *  recurrent layers' states beside the KV rows). */
  sessions: boolean;
  build: 'single-thread' | 'threaded' | 'memory64';
}

export function init(): Promise<BuildInfo>;
export function buildInfo(): Promise<BuildInfo>;
export function modelInfo(
  source: ModelSource,
  options?: LoadOptions,
): Promise<ModelInfo>;

/** llama.rn's initLlama parameters that apply. */
export interface LoadParams {
  /** llama.rn's load-time LoRA adapters (applied as `applyLoraAdapters` does). */
  lora?: string;
  lora_scaled?: number;
  lora_list?: LoraAdapter[];
  n_ctx?: number;
  n_batch?: number;
  n_ubatch?: number;
  n_threads?: number;
  cache_type_k?: 'f16' | 'f32' | 'q8_0';
  cache_type_v?: 'f16' | 'f32' | 'q8_0';
  /** How embeddings pool (default: the model's); 'rank' for rerankers. */
  pooling_type?: Pooling | 0 | 1 | 2 | 3 | 4;
  cpu_variant?: string;
  /** Whether completions shift a full context (default true), as llama.rn's. */
  ctx_shift?: boolean;
  /**
   * Which build the model's worker loads: 'simd128' or 'relaxed-simd'
   * (an Error where the engine lacks it); default: the best it runs.
   */
  simd?: 'simd128' | 'relaxed-simd';
  /**
   * The memory64 build (64-bit memory up to 16 GiB, single-thread, SIMD128):
   * true asks for it (an Error where the engine has no 64-bit memory), false
   * never loads it; default: for models over 3 GiB, where the engine has it.
   */
  memory64?: boolean;
}

export type Pooling = 'none' | 'mean' | 'cls' | 'last' | 'rank';

export interface EmbeddingParams {
  /** -1 none, 0 max-abs to int16 range, 1 taxicab, 2 euclidean (default), >2 p-norm. */
  embd_normalize?: number;
  /** Cut a text longer than a batch instead of refusing it. */
  truncate?: boolean;
}

export interface EmbeddingResult {
  /** One vector; one per token with pooling 'none'. */
  embedding: number[] | number[][];
  token_ids: number[];
  truncated: boolean;
  pooling: Pooling;
}

export interface RerankParams {
  /** Scores through a sigmoid (0..1) instead of raw logits. */
  normalize?: boolean | number;
  truncate?: boolean;
}

export interface RerankResult {
  index: number;
  score: number;
  document: string;
}

export interface ChatMessage {
  role: string;
  /** null reads as '' (an assistant turn made only of tool calls). */
  content: string | null;
  reasoning_content?: string;
  tool_calls?: ToolCall[];
  /** For a tool result (`role: 'tool'`): the call it answers, and the tool's name. */
  tool_call_id?: string;
  name?: string;
}

/** llama.rn's completion parameters that apply. */
export interface CompletionParams {
  prompt?: string;
  messages?: ChatMessage[];
  n_predict?: number;
  temperature?: number;
  top_k?: number;
  top_p?: number;
  min_p?: number;
  typical_p?: number;
  /** XTC: the chance per token of removing the likeliest tokens (0: off). */
  xtc_probability?: number;
  /** XTC: tokens at or above this probability go, but the least likely of them (> 0.5: off). */
  xtc_threshold?: number;
  /** Keep tokens within this many standard deviations of the best logit (<= 0: off). */
  top_n_sigma?: number;
  penalty_last_n?: number;
  penalty_repeat?: number;
  penalty_freq?: number;
  penalty_present?: number;
  mirostat?: 0 | 1 | 2;
  mirostat_tau?: number;
  mirostat_eta?: number;
  seed?: number;
  stop?: string[];
  ignore_eos?: boolean;
  n_probs?: number;
  /** [token id or text, bias or false (banned)] pairs, or an object keyed by id or text; a text biases each of its tokens. */
  logit_bias?: [number | string, number | false][] | Record<string, number | false>;
  cache_prompt?: boolean;
  /** A chat template for `messages` (Jinja text or a built-in name) in place of the model's. */
  chat_template?: string;
  /** Render `messages` with the template's Jinja even where a built-in format matches. */
  jinja?: boolean;
  /** OpenAI tool definitions; with them (or `jinja`) the output is parsed into `content`, `reasoning_content` and `tool_calls`. */
  tools?: { type: 'function'; function: { name: string; description?: string; parameters?: object } }[];
  tool_choice?: 'auto' | 'required' | 'none';
  parallel_tool_calls?: boolean;
  /** Passed to the template (Qwen3 closes its thinking block when false). Default true. */
  enable_thinking?: boolean;
  /** 'auto' (default) or 'deepseek': reasoning into `reasoning_content`; 'none': left in the content. */
  reasoning_format?: 'none' | 'auto' | 'deepseek';
  /** More template variables. */
  chat_template_kwargs?: Record<string, unknown>;
  /** Prompt tokens kept when a prompt is cut or the context shifts (-1: all). */
  n_keep?: number;
  /** This completion's context shifting (default: the load's `ctx_shift`). */
  ctx_shift?: boolean;
  /** DRY: tokens extending a repeat lose dry_multiplier * dry_base^(length - dry_allowed_length) (0: off). */
  dry_multiplier?: number;
  dry_base?: number;
  dry_allowed_length?: number;
  /** Recent tokens DRY looks at (0: off, -1: the context size; default 64). */
  dry_penalty_last_n?: number;
  /** Strings no repeat reaches across (default ['\n', ':', '"', '*']). */
  dry_sequence_breakers?: string[];
  /** A GBNF grammar (llama.cpp's language, start rule `root`) the output must match. */
  grammar?: string;
  /** Constrain only after one of `grammar_triggers` appears. */
  grammar_lazy?: boolean;
  /** type 0: a token (`token`); 1: a word; 2: a pattern found anywhere; 3: a pattern matching the whole output. */
  grammar_triggers?: { type: 0 | 1 | 2 | 3; value?: string; token?: number }[];
  /** A JSON schema (object or JSON text) the output must follow; ignored when `grammar` is given. */
  json_schema?: object | string;
  /** As llama.rn and OpenAI: 'json_object' (any JSON value, or `schema`) or 'json_schema' (`json_schema.schema`). */
  response_format?:
    | { type: 'text' }
    | { type: 'json_object'; schema?: object }
    | { type: 'json_schema'; json_schema: { name?: string; strict?: boolean; schema?: object } };
}

export interface TokenProb {
  id: number;
  piece: string;
  prob: number;
}

/** A LoRA adapter (GGUF): a path (Node) or OPFS file name (browsers), or its bytes; `scaled` (or `scale`) defaults to 1. */
export interface LoraAdapter {
  path?: string;
  bytes?: Uint8Array | ArrayBuffer | Blob;
  scaled?: number;
  scale?: number;
}

export interface ToolCall {
  type: 'function';
  function: { name: string; arguments: string };
  id?: string;
}

export interface TokenData {
  token: string;
  id: number;
  completion_probabilities: TokenProb[];
  /** For parsed chats: the message so far (a marker being written held back, calls once complete). */
  content?: string;
  reasoning_content?: string;
  tool_calls?: ToolCall[];
}

export interface Timings {
  prompt_n: number;
  prompt_ms: number;
  prompt_per_token_ms: number;
  prompt_per_second: number;
  predicted_n: number;
  predicted_ms: number;
  predicted_per_token_ms: number;
  predicted_per_second: number;
}

export interface CompletionResult {
  text: string;
  /** The text without reasoning and tool calls (the text itself when not parsed). */
  content: string;
  reasoning_content?: string;
  tool_calls?: ToolCall[];
  /** The output format the text was parsed in ('hermes', 'qwen3-coder', 'llama3', 'mistral', 'gemma4', ...; 'content' when not parsed). */
  chat_format: string;
  prompt: string;
  prompt_ids: number[];
  generated_ids: number[];
  tokens_predicted: number;
  tokens_evaluated: number;
  tokens_cached: number;
  stopped_eos: boolean;
  /** The stop word that ended the text, '' when none did (llama.rn's type). */
  stopped_word: string;
  /** 1 when `n_predict` (or a full context) ended it, else 0 (llama.rn's type). */
  stopped_limit: number;
  /** Whether `stopCompletion()` ended it (llama.rn's name for stopped_aborted). */
  interrupted: boolean;
  /** Whether the context filled without `ctx_shift` (stopped_limit is 1 too). */
  context_full: boolean;
  stopped_aborted: boolean;
  stopping_word: string;
  stop_reason: 'eos' | 'word' | 'limit' | 'abort';
  truncated: boolean;
  timings: Timings;
  completion_probabilities: TokenProb[][];
  cpu_variant: string;
}

export interface BenchRow {
  n_prompt: number;
  n_gen: number;
  n_threads: number;
  avg_ts: number;
  stddev_ts: number;
  [key: string]: unknown;
}

/** llama.rn's bench result (tokens/s), with llama-bench's rows. */
export interface BenchResult {
  modelDesc: string;
  modelSize: number;
  modelNParams: number;
  ppAvg: number;
  ppStd: number;
  tgAvg: number;
  tgStd: number;
  rows: BenchRow[];
}

/**
 * A loaded model and its context. It lives in a worker of its own (a Web
 * Worker in browsers, a worker_threads Worker in Node); every method is a
 * message to it. After its engine panics or runs out of memory, its calls
 * reject with why it stopped; other models are not affected.
 */
export declare class LlamaContext {
  /** The build that runs this model, and why it was picked. */
  readonly build: ContextInfo & { simd: 'simd128' | 'relaxed-simd'; simd_reason: string; reason: string };
  /**
   * Resolves with the result once generation ends; `onToken` hears each
   * released piece of text. The event loop gets a turn between tokens.
   */
  completion(params: CompletionParams, onToken?: (data: TokenData) => void): Promise<CompletionResult>;
  stopCompletion(): void;
  tokenize(text: string, opts?: { addSpecial?: boolean; parseSpecial?: boolean }): Promise<{ tokens: number[] }>;
  detokenize(ids: number[], opts?: { special?: boolean }): Promise<string>;
  modelInfo(): Promise<ModelInfo>;
  contextInfo(): Promise<ContextInfo>;
  embedding(text: string, params?: EmbeddingParams): Promise<EmbeddingResult>;
  /** Best first; needs a reranker loaded with pooling_type 'rank'. */
  rerank(query: string, documents: string[], params?: RerankParams): Promise<RerankResult[]>;
  /** llama.rn's bench: tokens/s over `nr` runs; tg in `pl` sequences at once. */
  bench(pp?: number, tg?: number, pl?: number, nr?: number): Promise<BenchResult>;
  /** The prompt `messages` make with the model's template or `template` (Jinja text or a built-in name). */
  getFormattedChat(
    messages: ChatMessage[],
    template?: string | null,
    options?: {
      jinja?: boolean;
      tools?: CompletionParams['tools'];
      tool_choice?: CompletionParams['tool_choice'];
      parallel_tool_calls?: boolean;
      enable_thinking?: boolean;
      reasoning_format?: CompletionParams['reasoning_format'];
      chat_template_kwargs?: Record<string, unknown>;
    },
  ): Promise<
    | { type: 'llama-chat'; prompt: string }
    | {
        type: 'jinja';
        prompt: string;
        /** The output format the answer will be read in ('hermes', 'qwen3-coder', 'llama3', 'mistral', 'gemma4', 'content', ...). */
        chat_format: string;
        /** The tools' grammar ('' when none: no tools, or a format whose calls are not constrained). */
        grammar: string;
        grammar_lazy: boolean;
        grammar_triggers: { type: 2; value: string }[];
        preserved_tokens: string[];
        additional_stops: string[];
        thinking_forced_open: boolean;
        generation_prompt: string;
      }
  >;
  /** llama.rn's: LoRA adapters applied from now on, in place of the applied ones; a bad one is an Error and nothing changes. */
  applyLoraAdapters(list: LoraAdapter[]): Promise<void>;
  removeLoraAdapters(): Promise<void>;
  getLoadedLoraAdapters(): Promise<{ path: string; scaled: number }[]>;
  /** llama.rn's parallel mode: several completions at once on this context. */
  parallel: {
    enable(config?: { n_parallel?: number; n_batch?: number }): Promise<boolean>;
    configure(config: { n_parallel?: number; n_batch?: number }): Promise<boolean>;
    disable(): Promise<boolean>;
    /** Resolves once queued; `promise` gives the result, `stop()` ends the request. */
    completion(
      params: CompletionParams,
      onToken?: (requestId: number, data: TokenData) => void,
    ): Promise<{ requestId: number; promise: Promise<CompletionResult>; stop: () => Promise<boolean> }>;
    getStatus(): Promise<ParallelStatus>;
  };
  /**
   * llama.rn's saveSession: the prompt cache's first `tokenSize` tokens (0 or
   * less: all) to a file path (Node) or an OPFS file (browsers); the tokens saved.
   */
  saveSession(path: string, options?: { tokenSize?: number }): Promise<number>;
  /** The session saveSession would write, as bytes. */
  sessionBytes(options?: { tokenSize?: number }): Promise<Uint8Array>;
  /** llama.rn's loadSession, from a path (Node), an OPFS file name (browsers) or bytes. */
  loadSession(source: string | Uint8Array | ArrayBuffer | Blob): Promise<{ tokens_loaded: number; prompt: string }>;
  /** Frees the model: ends its worker. */
  release(): Promise<void>;
  /** Test-only: makes this model's engine panic. */
  _testPanic(message: string): Promise<never>;
  /** Test-only: makes this model's engine run out of memory. */
  _testOutOfMemory(): Promise<never>;
}

/** llama.rn's initLlama: `loadModel(model, params)`; `onProgress` hears whole percents. */
export declare function initLlama(
  params: LoadParams & { model: ModelSource },
  onProgress?: (percent: number) => void,
): Promise<LlamaContext>;

export declare function loadModel(
  source: ModelSource,
  params?: LoadParams,
  options?: LoadOptions,
): Promise<LlamaContext>;

/** llama.rn's parallel status. */
export interface ParallelStatus {
  n_parallel: number;
  active_slots: number;
  queued_requests: number;
  requests: Array<{
    request_id: number;
    state: 'queued' | 'processing_prompt' | 'generating';
    prompt_length: number;
    tokens_generated: number;
  }>;
}

/** llama.rn's toggleNativeLog: the engine's log (model, context, kernel variant) to the listeners, or off. */
export declare function toggleNativeLog(enabled: boolean): Promise<void>;
/** llama.rn's addNativeLogListener: `listener(level, text)` for each engine log line. */
export declare function addNativeLogListener(listener: (level: 'debug' | 'info' | 'warn' | 'error', text: string) => void): {
  remove: () => void;
};
