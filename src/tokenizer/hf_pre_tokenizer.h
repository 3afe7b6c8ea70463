#pragma once
// A Hugging Face tokenizer.json "pre_tokenizer": Sequence, Split (regex or string pattern, every
// SplitDelimiterBehavior, invert), Digits and ByteLevel, applied as the tokenizers library does.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace nibble::tok {

class HfPreTokenizer {
 public:
  // `spec` is the "pre_tokenizer" field (null: no splitting); `file` names tokenizer.json in
  // errors. An unsupported type throws nibble::Error naming the file and the type.
  HfPreTokenizer(const nlohmann::json& spec, const std::string& file);
  ~HfPreTokenizer();

  // Splits `text` (valid UTF-8) into words, appended to `words`; empty words are dropped.
  void split(std::string_view text, std::vector<std::string>& words) const;

  struct Step;

 private:
  std::vector<std::unique_ptr<Step>> steps_;
};

}  // namespace nibble::tok
