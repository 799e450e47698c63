// The penalties llama.cpp's DRY sampler (2026 reference) gives, for lamina's
// sampling goldens (scripts/reference/sampler-goldens.sh). All logits start
// at 0, the history is accepted token by token, DRY is applied once, and the
// logits that moved are printed as JSON {"id": logit, ...}.
//
//   dry-penalties tokens N_VOCAB MULT BASE ALLOWED LAST_N < INPUT
//       INPUT: the history's ids on the first line, then one sequence breaker
//       per line as token ids (llama.cpp's token-level testing entry point).
//   dry-penalties text MODEL MULT BASE ALLOWED LAST_N TEXT_FILE BREAKER...
//       the history is TEXT_FILE tokenized by MODEL's vocabulary (no BOS),
//       the breakers are strings, processed against that vocabulary.
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

// Declared in the reference's src/llama-sampler.h, which is not installed.
struct llama_sampler * llama_sampler_init_dry_testing(float dry_multiplier, float dry_base, int32_t dry_allowed_length,
                                                      int32_t dry_penalty_last_n,
                                                      const std::vector<std::vector<llama_token>> & seq_breakers);

static std::vector<llama_token> ids(const std::string & line) {
    std::vector<llama_token> out;
    std::istringstream in(line);
    llama_token t;
    while (in >> t) out.push_back(t);
    return out;
}

static void run(llama_sampler * dry, const std::vector<llama_token> & history, int n_vocab) {
    for (llama_token t : history) llama_sampler_accept(dry, t);
    std::vector<llama_token_data> data(n_vocab);
    for (int i = 0; i < n_vocab; i++) data[i] = { i, 0.0f, 0.0f };
    llama_token_data_array cur = { data.data(), data.size(), -1, false };
    llama_sampler_apply(dry, &cur);
    printf("{");
    bool first = true;
    for (size_t i = 0; i < cur.size; i++) {
        if (cur.data[i].logit != 0.0f) {
            printf("%s\"%d\": %.9g", first ? "" : ", ", cur.data[i].id, cur.data[i].logit);
            first = false;
        }
    }
    printf("}\n");
    llama_sampler_free(dry);
}

int main(int argc, char ** argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: see the header\n");
        return 1;
    }
    const std::string mode = argv[1];
    const float mult = atof(argv[3]);
    const float base = atof(argv[4]);
    const int allowed = atoi(argv[5]);
    const int last_n = atoi(argv[6]);
    if (mode == "tokens") {
        const int n_vocab = atoi(argv[2]);
        std::string line;
        std::getline(std::cin, line);
        const auto history = ids(line);
        std::vector<std::vector<llama_token>> breakers;
        while (std::getline(std::cin, line)) {
            if (!line.empty()) breakers.push_back(ids(line));
        }
        run(llama_sampler_init_dry_testing(mult, base, allowed, last_n, breakers), history, n_vocab);
        return 0;
    }
    llama_backend_init();
    auto mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(argv[2], mp);
    if (!model) return 1;
    const llama_vocab * vocab = llama_model_get_vocab(model);
    std::ifstream in(argv[7], std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    std::vector<llama_token> history(text.size() + 8);
    const int n = llama_tokenize(vocab, text.c_str(), text.size(), history.data(), history.size(), false, false);
    history.resize(n);
    std::vector<const char *> breakers;
    for (int i = 8; i < argc; i++) breakers.push_back(argv[i]);
    run(llama_sampler_init_dry(vocab, mult, base, allowed, last_n, breakers.data(), breakers.size()), history,
        llama_vocab_n_tokens(vocab));
    llama_model_free(model);
    return 0;
}
