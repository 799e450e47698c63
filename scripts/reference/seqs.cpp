// Reference outputs of several sequences sharing one context, from
// llama.cpp's C API: two prompts decoded in one batch (sequences 0 and 1),
// greedy steps with both sequences' tokens in one batch, then sequence 0
// copied to sequence 2, which continues from its runner-up token while
// sequence 0 goes on greedily, again in shared batches. Writes OUT.json:
// every operation in order, each decode with its (token, position,
// sequence, logits wanted) entries and the top-5 [id, logit] of each
// wanted output; each copy with its source and destination.
// Settings as probe.cpp: 1 thread, n_ctx = n_batch = n_ubatch = 512, f16
// KV cache (one cache for all sequences), flash attention off.
//
// Usage: seqs MODEL PROMPT_A_FILE PROMPT_B_FILE STEPS OUT_PREFIX
#include "llama.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static void fail(const char * what) {
    fprintf(stderr, "seqs: %s\n", what);
    exit(1);
}

static std::string read_text(const char * path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

struct Entry {
    llama_token token;
    llama_pos pos;
    llama_seq_id seq;
    bool want;
};

// The best five ids of a row of logits, ties to the lower id.
static std::vector<int> top5(const float * logits, int n_vocab) {
    std::vector<int> order(n_vocab);
    for (int i = 0; i < n_vocab; i++) order[i] = i;
    std::partial_sort(order.begin(), order.begin() + 5, order.end(), [&](int a, int b) {
        return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
    });
    order.resize(5);
    return order;
}

int main(int argc, char ** argv) {
    if (argc != 6) fail("usage: seqs MODEL PROMPT_A_FILE PROMPT_B_FILE STEPS OUT_PREFIX");
    const std::string prompts[2] = {read_text(argv[2]), read_text(argv[3])};
    const int steps = atoi(argv[4]);
    const std::string out = argv[5];

    llama_backend_init();
    auto mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) fail("cannot load the model");
    auto cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 512;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.n_seq_max = 3;
    cp.kv_unified = true;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) fail("cannot create a context");
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    FILE * js = fopen((out + ".json").c_str(), "w");
    fprintf(js, "{\n  \"prompts\": [");
    std::vector<Entry> first;
    for (int s = 0; s < 2; s++) {
        std::vector<llama_token> ids(prompts[s].size() + 8);
        int n = llama_tokenize(vocab, prompts[s].data(), prompts[s].size(), ids.data(), ids.size(), true, true);
        if (n < 0) fail("tokenize");
        for (int i = 0; i < n; i++) first.push_back({ids[i], i, s, i == n - 1});
        std::string escaped;
        for (char c : prompts[s]) {
            if (c == '"' || c == '\\') escaped += '\\';
            escaped += c;
        }
        fprintf(js, "%s\"%s\"", s ? ", " : "", escaped.c_str());
    }
    fprintf(js, "],\n  \"n_vocab\": %d,\n  \"ops\": [\n", n_vocab);

    llama_batch batch = llama_batch_init(512, 0, 1);
    bool first_op = true;
    // Decodes `entries`; returns the top-5 ids of each wanted output.
    auto decode = [&](const std::vector<Entry> & entries) {
        batch.n_tokens = 0;
        for (const Entry & e : entries) {
            const int i = batch.n_tokens++;
            batch.token[i] = e.token;
            batch.pos[i] = e.pos;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = e.seq;
            batch.logits[i] = e.want;
        }
        if (llama_decode(ctx, batch) != 0) fail("decode");
        fprintf(js, "%s    {\"decode\": [", first_op ? "" : ",\n");
        first_op = false;
        for (size_t i = 0; i < entries.size(); i++) {
            const Entry & e = entries[i];
            fprintf(js, "%s[%d, %d, %d, %s]", i ? ", " : "", e.token, e.pos, e.seq, e.want ? "true" : "false");
        }
        fprintf(js, "],\n     \"top5\": [");
        std::vector<std::vector<int>> tops;
        for (size_t i = 0; i < entries.size(); i++) {
            if (!entries[i].want) continue;
            const float * logits = llama_get_logits_ith(ctx, (int) i);
            std::vector<int> t = top5(logits, n_vocab);
            fprintf(js, "%s[", tops.empty() ? "" : ", ");
            for (int j = 0; j < 5; j++) fprintf(js, "%s[%d, %.9g]", j ? ", " : "", t[j], logits[t[j]]);
            fprintf(js, "]");
            tops.push_back(t);
        }
        fprintf(js, "]}");
        return tops;
    };

    // Both prompts in one batch, then both sequences step by step.
    std::vector<std::vector<int>> tops = decode(first);
    llama_pos pos[3] = {(llama_pos) 0, 0, 0};
    for (const Entry & e : first) pos[e.seq] = e.pos + 1;
    for (int step = 0; step < steps; step++) {
        tops = decode({{tops[0][0], pos[0], 0, true}, {tops[1][0], pos[1], 1, true}});
        pos[0]++;
        pos[1]++;
    }
    // Sequence 0 copied to 2; 2 takes 0's runner-up, 0 its best.
    llama_memory_seq_cp(llama_get_memory(ctx), 0, 2, -1, -1);
    fprintf(js, ",\n    {\"copy\": [0, 2]}");
    pos[2] = pos[0];
    std::vector<int> runner_up = tops[0];
    tops = decode({{runner_up[0], pos[0], 0, true}, {runner_up[1], pos[2], 2, true}});
    pos[0]++;
    pos[2]++;
    for (int step = 1; step < steps; step++) {
        tops = decode({{tops[0][0], pos[0], 0, true}, {tops[1][0], pos[2], 2, true}});
        pos[0]++;
        pos[2]++;
    }
    fprintf(js, "\n  ]\n}\n");
    fclose(js);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
