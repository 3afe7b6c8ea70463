#include "tokenizer/hf_token_texts.h"

#include <fmt/format.h>

#include "nibble/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace nibble::tok {
namespace {

constexpr int32_t kMaxId = 1 << 24;  // far above any real vocab; stops absurd ids early

std::string decoded_bytes(const std::string& token) {
  std::string out;
  for (size_t i = 0; i < token.size();) {
    const Utf8Step st = utf8_step(token, i);
    const int b = st.ok ? char_to_byte(utf8_decode_at(token, i)) : -1;
    if (b < 0) return token;
    out.push_back(char(b));
    i += st.len;
  }
  return out;
}

}  // namespace

HfTokenTexts::HfTokenTexts(const TokenMap& vocab, const std::vector<AddedToken>& added,
                           const std::string& file) {
  // Added tokens win over the model's vocab for the same id, as in the tokenizers library.
  auto set = [&](int32_t id, const std::string& text) {
    if (id < 0 || id >= kMaxId)
      throw Error(fmt::format("{}: token \"{}\" has id {}, outside [0, {})", file, text, id, kMaxId));
    if (size_t(id) >= bytes_.size()) {
      bytes_.resize(size_t(id) + 1);
      present_.resize(size_t(id) + 1);
    }
    bytes_[id] = decoded_bytes(text);
    present_[id] = true;
  };
  for (const auto& [text, id] : vocab) set(id, text);
  for (const AddedToken& t : added) set(t.id, t.content);
}

const std::string& HfTokenTexts::bytes(int32_t id) const {
  if (id < 0 || id >= size() || !present_[id])
    throw Error(fmt::format("token id {} is not in the tokenizer's vocab of {}", id, size()));
  return bytes_[id];
}

}  // namespace nibble::tok
