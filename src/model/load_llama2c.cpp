// llama2.c checkpoint: the io helper converts it to HF names/shapes (FP32); its tokenizer.bin is
// the one given in LoadOptions, else tokenizer.bin beside the checkpoint, else the one tok*.bin.
#include "model/build_weights.h"
#include "model/loaders.h"
#include "nibble/error.h"
#include "nibble/llama2c.h"

namespace nibble {
namespace {

std::filesystem::path find_tokenizer_bin(const std::filesystem::path& ckpt) {
  const std::filesystem::path dir = ckpt.parent_path().empty() ? "." : ckpt.parent_path();
  if (std::filesystem::exists(dir / "tokenizer.bin")) return dir / "tokenizer.bin";
  std::vector<std::filesystem::path> found;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.starts_with("tok") && e.path().extension() == ".bin")
      found.push_back(e.path());
  }
  if (found.size() != 1)
    throw Error(ckpt.string() + ": no unique llama2.c tokenizer (tokenizer.bin or tok*.bin) beside "
                "the checkpoint; give one explicitly");
  return found[0];
}

}  // namespace

void load_llama2c_checkpoint(const std::filesystem::path& file, ModelWeights& w) {
  const Llama2cModel src = load_llama2c(file);
  w.cfg = src.config;
  w.tokenizer_file = w.opts.tokenizer.empty() ? find_tokenizer_bin(file) : w.opts.tokenizer;
  w.tokenizer = load_llama2c_tokenizer(w.tokenizer_file, w.cfg.vocab_size);
  std::map<std::string, TensorView> views;
  for (const auto& [name, t] : src.tensors) {
    TensorView v;
    v.name = name;
    v.dtype = DType::F32;
    v.shape = t.shape;
    v.data = reinterpret_cast<const uint8_t*>(t.data.data());
    v.nbytes = t.data.size() * sizeof(float);
    v.file = file.string();
    views.emplace(name, std::move(v));
  }
  WeightSource ws;
  ws.where = file.string();
  ws.find = [&views](const std::string& name) -> const TensorView* {
    auto it = views.find(name);
    return it == views.end() ? nullptr : &it->second;
  };
  build_weights(ws, w);
}

}  // namespace nibble
