// save_quantized + load: the reloaded directory computes exactly the logits of the in-memory
// quantized model, and quantized weights actually change the model (within reason).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "model/tiny_model.h"
#include "nibble/error.h"
#include "nibble/model.h"
#include "nibble/paths.h"

namespace nibble {
namespace {

using test::tiny_options;

std::vector<float> logits_of(const Model& m, const std::vector<int32_t>& ids) {
  Session s(m, 16);
  return s.forward(ids, true);
}

struct Case {
  std::string format, act;
  bool tied, embeddings, lm_head;
  float sv_a = 0, sv_b = 0;
};

void check_reload(const Case& c) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(c.format + "/" + c.act + " seed " + std::to_string(seed));
  std::mt19937 gen(seed);
  test::TinySpec spec;
  spec.hidden = 64;
  spec.inter = 128;
  spec.tied = c.tied;
  const test::TinyModel tm = test::make_tiny_model(spec, gen);
  LoadOptions o = tiny_options();
  o.weight_format = c.format;
  o.act_format = c.act;
  o.quantize_embeddings = c.embeddings;
  o.quantize_lm_head = c.lm_head;
  o.quant.sv_a = c.sv_a;
  o.quant.sv_b = c.sv_b;
  const auto q = Model::load(tm.dir, o);
  EXPECT_GT(q->weight_rel_mse(), 0.0);
  EXPECT_LT(q->weight_rel_mse(), 0.2);
  const std::filesystem::path out = test::fresh_temp_dir("quantized");
  q->save_quantized(out);
  const auto r = Model::load(out, tiny_options());  // act format comes from config.json
  EXPECT_EQ(r->options().act_format, c.act);
  EXPECT_EQ(r->weight_bytes(), q->weight_bytes());
  std::vector<int32_t> ids = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  const std::vector<float> a = logits_of(*q, ids), b = logits_of(*r, ids);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "logit " << i;
  // The quantized model differs from the original, as it must.
  const auto f = Model::load(tm.dir, tiny_options());
  const std::vector<float> orig = logits_of(*f, ids);
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, double(std::fabs(a[i] - orig[i])));
  EXPECT_GT(diff, 0.0);
  std::ifstream cfg(out / "config.json");
  const nlohmann::json j = nlohmann::json::parse(cfg);
  EXPECT_EQ(j["quantization_config"]["quant_method"], "nibble");
  EXPECT_EQ(j["quantization_config"]["format"], c.format);
  std::filesystem::remove_all(out);
}

TEST(QuantizedReload, Nvfp4RazerW4A4Untied) {
  check_reload({"nvfp4-razer", "nvfp4-razer-act", false, false, false, 5.0f, 8.0f});
}
TEST(QuantizedReload, Int4TiedWithEmbeddings) { check_reload({"int4-g128", "", true, true, false}); }
TEST(QuantizedReload, Nf4TiedLmHeadOnly) { check_reload({"nf4", "", true, false, true}); }
TEST(QuantizedReload, MxFp4AllQuantized) { check_reload({"mxfp4", "", false, true, true}); }

TEST(QuantizedReload, SavingAnUnquantizedModelThrows) {
  std::mt19937 gen(std::random_device{}());
  const test::TinyModel tm = test::make_tiny_model({}, gen);
  const auto m = Model::load(tm.dir, tiny_options());
  EXPECT_THROW(m->save_quantized(tm.dir / "out"), Error);
}

}  // namespace
}  // namespace nibble
