#pragma once
// The test models, written once per test binary run (fresh seed each run) and shared by tests.
#include <memory>
#include <string>

#include "cuda_runtime/tiny_hf.h"
#include "nibble/model.h"

namespace nibble::cuda::test {

// Llama shape with intermediate size `inter` (688: not a multiple of the group sizes; 768: is).
const TinyHf& llama_model(int inter);
// Llama shape with head_dim 128, 2 query heads on 1 KV head, and down rows (6144) longer than one
// tile of the whole-stack decode kernel (kStackSegK).
const TinyHf& llama_wide_model();
const TinyHf& qwen3_model();   // qk-norm
const TinyHf& qwen2_model();   // q/k/v biases
const TinyHf& tied_model();    // tied embeddings: logits with large top-2 margins
uint32_t model_seed();         // the seed the models were drawn with (printed on failure)

std::unique_ptr<Model> load(const TinyHf& m, const std::string& weight_format = "",
                            const std::string& act_format = "", const std::string& kv_cache = "");

}  // namespace nibble::cuda::test
