// Reference outputs for lamina's goldens, from llama.cpp's C API: the prompt
// (tokenized with special tokens added and parsed) goes through one decode,
// then greedy steps one token at a time. Writes <out>.json (prompt ids,
// generated ids, top-5 per step, the smallest top-1/top-2 gap) and
// <out>.last_prompt_logits.f32 (every logit at the last prompt position).
// Settings: 1 thread, n_ctx = n_batch = n_ubatch = 512, f16 KV cache,
// flash attention off (lamina's attention numerics), no GPU.
//
// Usage: probe MODEL PROMPT_FILE N_PREDICT OUT_PREFIX
// (PROBE_LORA=ADAPTER.gguf and PROBE_LORA_SCALE=S apply a LoRA adapter.)
#include "llama.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static void fail(const char * what) {
    fprintf(stderr, "probe: %s\n", what);
    exit(1);
}

int main(int argc, char ** argv) {
    if (argc != 5) fail("usage: probe MODEL PROMPT_FILE N_PREDICT OUT_PREFIX");
    std::ifstream in(argv[2], std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string prompt = ss.str();
    const int n_predict = atoi(argv[3]);
    const std::string out = argv[4];

    llama_backend_init();
    auto mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) fail("cannot load the model");
    auto cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 512;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    // Variability studies only (the goldens use the defaults above).
    if (const char * e = getenv("PROBE_UBATCH")) cp.n_ubatch = atoi(e);
    if (const char * e = getenv("PROBE_THREADS")) cp.n_threads = cp.n_threads_batch = atoi(e);
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) fail("cannot create a context");
    // A LoRA adapter at a scale (the LoRA goldens).
    if (const char * lora_path = getenv("PROBE_LORA")) {
        llama_adapter_lora * lora = llama_adapter_lora_init(model, lora_path);
        if (!lora) fail("cannot load the LoRA adapter");
        const char * s = getenv("PROBE_LORA_SCALE");
        float scale = s ? (float) atof(s) : 1.0f;
        if (llama_set_adapters_lora(ctx, &lora, 1, &scale) != 0) fail("cannot apply the LoRA adapter");
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    std::vector<llama_token> ids(prompt.size() + 8);
    int n = llama_tokenize(vocab, prompt.data(), prompt.size(), ids.data(), ids.size(), true, true);
    if (n < 0) fail("tokenize");
    ids.resize(n);

    FILE * js = fopen((out + ".json").c_str(), "w");
    fprintf(js, "{\n  \"prompt_ids\": [");
    for (int i = 0; i < n; i++) fprintf(js, "%s%d", i ? ", " : "", ids[i]);
    fprintf(js, "],\n");

    std::vector<llama_token> gen;
    std::vector<std::string> top5;
    float min_gap = 1e30f;
    int min_gap_step = -1;
    llama_batch batch = llama_batch_get_one(ids.data(), n);
    for (int step = 0; step < n_predict; step++) {
        if (llama_decode(ctx, batch) != 0) fail("decode");
        const float * logits = llama_get_logits_ith(ctx, -1);
        if (step == 0) {
            FILE * f = fopen((out + ".last_prompt_logits.f32").c_str(), "wb");
            fwrite(logits, sizeof(float), n_vocab, f);
            fclose(f);
        }
        std::vector<int> order(n_vocab);
        for (int i = 0; i < n_vocab; i++) order[i] = i;
        // Sorted by logit, ties to the lower id (greedy's choice first).
        std::partial_sort(order.begin(), order.begin() + 5, order.end(), [&](int a, int b) {
            return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
        });
        std::ostringstream t;
        t << "[";
        for (int j = 0; j < 5; j++) {
            char buf[64];
            snprintf(buf, sizeof buf, "%s[%d, %.9g]", j ? ", " : "", order[j], logits[order[j]]);
            t << buf;
        }
        t << "]";
        top5.push_back(t.str());
        const float gap = logits[order[0]] - logits[order[1]];
        if (gap < min_gap) { min_gap = gap; min_gap_step = step; }
        llama_token next = order[0];
        gen.push_back(next);
        if (llama_vocab_is_eog(vocab, next)) break;
        batch = llama_batch_get_one(&gen.back(), 1);
    }
    fprintf(js, "  \"generated_ids\": [");
    for (size_t i = 0; i < gen.size(); i++) fprintf(js, "%s%d", i ? ", " : "", gen[i]);
    fprintf(js, "],\n  \"step_top5\": [\n");
    for (size_t i = 0; i < top5.size(); i++) fprintf(js, "    %s%s\n", top5[i].c_str(), i + 1 < top5.size() ? "," : "");
    fprintf(js, "  ],\n  \"min_top1_top2_gap\": {\"value\": %.9g, \"step\": %d},\n", min_gap, min_gap_step);
    fprintf(js, "  \"n_vocab\": %d\n}\n", n_vocab);
    fclose(js);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
