// nibble compare: one model, many number formats: perplexity on WikiText-2 and on the house
// model's in-domain text, plus each format's weight relative MSE, in one table.
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cmd_model_options.h"
#include "command.h"
#include "nibble/paths.h"
#include "nibble/perplexity.h"

namespace {

struct Row {
  const char* label;
  const char* weights;  // weight format
  const char* acts;     // activation format ("" = FP32)
};

// FP32 and BF16 are "quantized" from the stored weights exactly like the others, so every row
// runs the same code path.
constexpr Row kRows[] = {
    {"FP32", "fp32", ""},
    {"BF16", "bf16", ""},
    {"INT4-g128", "int4-g128", ""},
    {"NF4", "nf4", ""},
    {"MXFP4", "mxfp4", ""},
    {"NVFP4", "nvfp4", ""},
    {"NVFP4-4over6", "nvfp4-4over6", ""},
    {"NVFP4-RaZeR W4A16", "nvfp4-razer", ""},
    {"NVFP4-RaZeR W4A4", "nvfp4-razer", "nvfp4-razer-act"},
    {"RaZeR-FP4-g128", "razer-fp4-g128", ""},
    {"RaZeR-FP3-g128", "razer-fp3-g128", ""},
    {"NestedFP8 W8A8", "nestedfp8", "fp8-e4m3"},
};

struct CompareFlags {
  std::string model, device = "cpu", kv_cache;
  int ctx = 0, max_windows = 0;
  bool json = false;
};

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw nibble::Error(p.string() + ": cannot open text file");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string fmt_ppl(const nlohmann::json& v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v.get<double>());
  return buf;
}

void print_table(const nlohmann::json& out) {
  std::printf("| format | weights | activations | weight rel. MSE | MB | WikiText-2 ppl | house-val ppl | note |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const nlohmann::json& r : out["rows"]) {
    if (r.contains("error")) {
      std::printf("| %s | %s | %s | - | - | - | - | %s |\n", r["label"].get<std::string>().c_str(),
                  r["weights"].get<std::string>().c_str(), r["activations"].get<std::string>().c_str(),
                  r["error"].get<std::string>().c_str());
      continue;
    }
    std::printf("| %s | %s | %s | %.3e | %.1f | %s | %s | %s |\n", r["label"].get<std::string>().c_str(),
                r["weights"].get<std::string>().c_str(), r["activations"].get<std::string>().c_str(),
                r["weight_rel_mse"].get<double>(), r["weight_bytes"].get<double>() / 1e6,
                fmt_ppl(r["wikitext2_ppl"]).c_str(), fmt_ppl(r["house_val_ppl"]).c_str(),
                r["note"].get<std::string>().c_str());
  }
  std::printf("\nctx %d, %d windows per text (%s, device %s, KV cache %s)\n", out["ctx"].get<int>(),
              out["windows"].get<int>(), out["model"].get<std::string>().c_str(),
              out["device"].get<std::string>().c_str(), out["kv_cache"].get<std::string>().c_str());
}

void run_compare(const CompareFlags& f) {
  nibble::cli::require_device(f.device);
  const std::filesystem::path data = nibble::data_dir();
  const std::string wiki_text = read_text(data / "text/wikitext-2-raw/wiki.test.gptq_join.txt");
  const std::string house_text = read_text(data / "text/house-val/house-val.txt");
  std::vector<int32_t> wiki, house;  // tokenized once, by the first model loaded
  nibble::PerplexityOptions opt;
  opt.ctx = f.ctx;
  opt.max_windows = f.max_windows;
  nlohmann::json out = {{"model", f.model}, {"device", f.device},
                        {"kv_cache", f.kv_cache.empty() ? (f.device == "cuda" ? "fp16" : "fp32") : f.kv_cache},
                        {"rows", nlohmann::json::array()}};
  nibble::cli::DeviceRuntime rt;
  for (const Row& row : kRows) {
    nlohmann::json r = {{"label", row.label}, {"weights", row.weights},
                        {"activations", *row.acts ? row.acts : "fp32"}};
    nibble::LoadOptions o;
    o.weight_format = row.weights;
    o.act_format = row.acts;
    o.kv_cache = f.kv_cache;
    std::unique_ptr<nibble::Model> m;
    try {
      rt = {};  // the previous row's device weights go before this row's model is loaded
      m = nibble::Model::load(f.model, o);
      opt.make_sequence = nibble::cli::sequence_factory(f.device, *m, rt);
    } catch (const nibble::Error& e) {
      r["error"] = e.what();
      out["rows"].push_back(r);
      continue;
    }
    if (wiki.empty()) {
      wiki = m->tokenizer().encode(wiki_text);
      house = m->tokenizer().encode(house_text);
    }
    const nibble::PerplexityResult pw = nibble::perplexity(*m, wiki, opt);
    const nibble::PerplexityResult ph = nibble::perplexity(*m, house, opt);
    std::string note;
    if (!m->ineligible_layers().empty())
      note = std::to_string(m->ineligible_layers().size()) +
             " linears not NestedFP-eligible (|w| >= 1.875), kept unquantized";
    r.update({{"weight_rel_mse", m->weight_rel_mse()},
              {"weight_bytes", double(m->weight_bytes())},
              {"wikitext2_ppl", pw.ppl},
              {"house_val_ppl", ph.ppl},
              {"tokens_per_second", (pw.tokens_per_second + ph.tokens_per_second) / 2},
              {"note", note}});
    out["ctx"] = pw.ctx;
    out["windows"] = pw.windows;
    out["house_val_windows"] = ph.windows;
    out["rows"].push_back(r);
    std::fprintf(stderr, "%-18s wiki %.3f  house-val %.3f\n", row.label, pw.ppl, ph.ppl);
  }
  if (f.json)
    std::printf("%s\n", out.dump(2).c_str());
  else
    print_table(out);
}

void setup_compare(CLI::App& app) {
  auto f = std::make_shared<CompareFlags>();
  auto* cmd = app.add_subcommand("compare", "Perplexity and weight error of a model in every format");
  cmd->add_option("-m,--model", f->model, "HF model directory or llama2.c .bin")->required();
  cmd->add_option("--ctx", f->ctx, "window length (default: 2048, or half the model's maximum)");
  cmd->add_option("--max-windows", f->max_windows, "evaluate only the first N windows of each text");
  cmd->add_flag("--json", f->json, "print JSON");
  nibble::cli::add_device_flag(cmd, f->device);
  nibble::cli::add_kv_flag(cmd, f->kv_cache);
  cmd->callback([f] { run_compare(*f); });
}

}  // namespace

NIBBLE_COMMAND(setup_compare);
