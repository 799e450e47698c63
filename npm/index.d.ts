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
  /** Offset from the start of the data section. */
  offset: number;
  bytes: number;
}

export interface ModelInfo {
  version: number;
  alignment: number;
  data_offset: number;
  file_bytes: number;
  metadata: Record<string, MetadataValue>;
  tensors: TensorInfo[];
  totals: { tensors: number; elements: number; bytes: number; by_type: Record<string, number> };
}

export interface LoadOptions {
  /** Called with the fraction (0..1) of the file read so far. */
  onProgress?: (fraction: number) => void;
  signal?: AbortSignal;
}

export interface BuildInfo {
  build: 'single-thread' | 'threaded';
  simd: 'simd128';
}

export function init(): Promise<BuildInfo>;
export function buildInfo(): Promise<BuildInfo>;
export function modelInfo(
  source: ArrayBuffer | Uint8Array | Blob | string | URL,
  options?: LoadOptions,
): Promise<ModelInfo>;

/** Low-level chunked loader: push the file's bytes in order, then finish(). */
export class GgufStreamLoader {
  constructor(totalBytes: number);
  push(chunk: Uint8Array): void;
  readonly received: number;
  readonly headerReady: boolean;
  finish(): ModelInfo;
  free(): void;
}
