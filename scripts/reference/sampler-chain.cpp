// Runs llama.cpp's sampler chain (the order of common_sampler: penalties,
// top-n-sigma, top-k, typical, top-p, min-p, XTC, temperature) over
// generated logits and prints, as JSON, each step's logits and the tokens
// left for the draw with a finite logit (sorted by id). The lowest of them is accepted (for the
// penalties): the draw itself is left out, so that the test compares the
// stages, XTC's own seeded generator included. Written for lamina's sampling goldens
// (scripts/reference/sampler-goldens.sh); no model is involved.
//
//   sampler-chain N_VOCAB STEPS SEED TOP_N_SIGMA TOP_K TYPICAL TOP_P MIN_P
//                 XTC_P XTC_T TEMP LAST_N REPEAT FREQ PRESENT MIN_KEEP [draw]
//
// With `draw`, the chain ends with llama.cpp's seeded draw (the `dist`
// sampler) and each step prints the token it selects (which is accepted)
// and, for up to 64 candidates, their order before the draw, instead of the
// logits (the test makes them again from the same generator).
#include "llama.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <string>
#include <vector>

int main(int argc, char ** argv) {
    if (argc != 17 && !(argc == 18 && std::string(argv[17]) == "draw")) {
        fprintf(stderr, "usage: see the header\n");
        return 1;
    }
    int a = 1;
    const int n_vocab = atoi(argv[a++]);
    const int steps = atoi(argv[a++]);
    const uint32_t seed = (uint32_t) strtoul(argv[a++], nullptr, 10);
    const float top_n_sigma = atof(argv[a++]);
    const int top_k = atoi(argv[a++]);
    const float typical = atof(argv[a++]);
    const float top_p = atof(argv[a++]);
    const float min_p = atof(argv[a++]);
    const float xtc_p = atof(argv[a++]);
    const float xtc_t = atof(argv[a++]);
    const float temp = atof(argv[a++]);
    const int last_n = atoi(argv[a++]);
    const float repeat = atof(argv[a++]);
    const float freq = atof(argv[a++]);
    const float present = atof(argv[a++]);
    const size_t min_keep = (size_t) atoi(argv[a++]);

    llama_sampler * chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(chain, llama_sampler_init_penalties(n_vocab, last_n, repeat, freq, present));
    llama_sampler_chain_add(chain, llama_sampler_init_top_n_sigma(top_n_sigma));
    llama_sampler_chain_add(chain, llama_sampler_init_top_k(top_k));
    llama_sampler_chain_add(chain, llama_sampler_init_typical(typical, min_keep));
    llama_sampler_chain_add(chain, llama_sampler_init_top_p(top_p, min_keep));
    llama_sampler_chain_add(chain, llama_sampler_init_min_p(min_p, min_keep));
    llama_sampler_chain_add(chain, llama_sampler_init_xtc(xtc_p, xtc_t, min_keep, seed));
    llama_sampler_chain_add(chain, llama_sampler_init_temp(temp));
    const bool draw = argc == 18;
    if (draw) {
        llama_sampler_chain_add(chain, llama_sampler_init_dist(seed));
    }

    // Logits from a 64-bit LCG: roughly -8..8, a few ties and a few far
    // below, so every stage has something to cut.
    uint64_t state = 0x9e3779b97f4a7c15ull ^ seed;
    auto next = [&]() {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return (uint32_t) (state >> 33);
    };
    printf("{\"steps\": [");
    for (int s = 0; s < steps; s++) {
        std::vector<llama_token_data> data(n_vocab);
        if (!draw) {
            printf(s ? ", {\"logits\": [" : "{\"logits\": [");
        }
        for (int i = 0; i < n_vocab; i++) {
            uint32_t r = next();
            float logit = (float) ((int) (r % 1601) - 800) / 100.0f;
            if (r % 17 == 0) logit = -30.0f;
            data[i] = { i, logit, 0.0f };
            if (!draw) {
                printf(i ? ", %.9g" : "%.9g", logit);
            }
        }
        llama_token_data_array cur = { data.data(), data.size(), -1, false };
        llama_sampler_apply(chain, &cur);
        if (draw) {
            const llama_token selected = cur.data[cur.selected].id;
            printf(s ? ", {\"selected\": %d" : "{\"selected\": %d", selected);
            if (cur.size <= 64) {
                printf(", \"order\": [");
                for (size_t i = 0; i < cur.size; i++) {
                    printf(i ? ", %d" : "%d", cur.data[i].id);
                }
                printf("]");
            }
            printf("}");
            llama_sampler_accept(chain, selected);
            continue;
        }
        std::vector<llama_token> left;
        for (size_t i = 0; i < cur.size; i++) {
            if (cur.data[i].logit != -INFINITY) {
                left.push_back(cur.data[i].id);
            }
        }
        std::sort(left.begin(), left.end());
        llama_sampler_accept(chain, left[0]);
        printf("], \"left\": [");
        for (size_t i = 0; i < left.size(); i++) {
            printf(i ? ", %d" : "%d", left[i]);
        }
        printf("]}");
    }
    printf("]}\n");
    llama_sampler_free(chain);
    return 0;
}
