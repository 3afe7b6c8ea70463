#include "tokenizer/hf_pre_tokenizer.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "nibble/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"

namespace nibble::tok {

// One stage: every piece in, its sub-pieces out (in order).
struct HfPreTokenizer::Step {
  virtual ~Step() = default;
  virtual void apply(const std::string& piece, std::vector<std::string>& out) const = 0;
};

namespace {

using json = nlohmann::json;

// GPT-2's pattern. \s is widened by U+0085 so it means Unicode White_Space, as in Oniguruma,
// which the tokenizers library runs it with (PCRE2's UCP \s leaves NEL out).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\x{85}\p{L}\p{N}]+)"
    R"(|[\s\x{85}]+(?![^\s\x{85}])|[\s\x{85}]+)";

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct Segment {
  size_t begin, end;
  bool is_match;
};

// The tokenizers library's SplitDelimiterBehavior applied to the match/non-match segments.
std::vector<Segment> apply_behavior(const std::vector<Segment>& segs, Behavior b) {
  std::vector<Segment> out;
  bool prev_match = false;
  switch (b) {
    case Behavior::Isolated:
      return segs;
    case Behavior::Removed:
      for (const Segment& s : segs)
        if (!s.is_match) out.push_back(s);
      return out;
    case Behavior::MergedWithPrevious:
      for (const Segment& s : segs) {
        if (s.is_match && !prev_match && !out.empty())
          out.back().end = s.end;
        else
          out.push_back(s);
        prev_match = s.is_match;
      }
      return out;
    case Behavior::MergedWithNext:
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
        if (it->is_match && !prev_match && !out.empty())
          out.back().begin = it->begin;
        else
          out.push_back(*it);
        prev_match = it->is_match;
      }
      return {out.rbegin(), out.rend()};
    case Behavior::Contiguous:
      for (const Segment& s : segs) {
        if (s.is_match == prev_match && !out.empty())
          out.back().end = s.end;
        else
          out.push_back(s);
        prev_match = s.is_match;
      }
      return out;
  }
  return out;
}

// Cuts `text` at the matches of `re` into covering segments and emits the non-empty pieces.
void split_on(const Regex& re, std::string_view text, Behavior b, bool invert,
              std::vector<std::string>& out) {
  std::vector<Span> spans;
  re.find_all(text, spans);
  std::vector<Segment> segs;
  size_t prev = 0;
  for (const Span& m : spans) {
    if (m.begin != prev) segs.push_back({prev, m.begin, invert});
    segs.push_back({m.begin, m.end, !invert});
    prev = m.end;
  }
  if (prev != text.size()) segs.push_back({prev, text.size(), invert});
  for (const Segment& s : apply_behavior(segs, b))
    if (s.end > s.begin) out.emplace_back(text.substr(s.begin, s.end - s.begin));
}

struct SplitStep : HfPreTokenizer::Step {
  SplitStep(std::string_view pattern, bool literal, Behavior b, bool inv, const std::string& what)
      : re(pattern, literal, what), behavior(b), invert(inv) {}
  void apply(const std::string& piece, std::vector<std::string>& out) const override {
    split_on(re, piece, behavior, invert, out);
  }
  Regex re;
  Behavior behavior;
  bool invert;
};

struct ByteLevelStep : HfPreTokenizer::Step {
  ByteLevelStep(bool prefix_space, bool use_regex, const std::string& what)
      : add_prefix_space(prefix_space) {
    if (use_regex) re = std::make_unique<Regex>(kGpt2Pattern, false, what);
  }
  void apply(const std::string& piece, std::vector<std::string>& out) const override {
    std::string spaced;
    std::string_view text = piece;
    if (add_prefix_space && (piece.empty() || piece[0] != ' ')) {
      spaced = " " + piece;
      text = spaced;
    }
    const size_t first = out.size();
    if (re)
      split_on(*re, text, Behavior::Isolated, false, out);
    else if (!text.empty())
      out.emplace_back(text);
    for (size_t i = first; i < out.size(); ++i) out[i] = bytes_to_chars(out[i]);
  }
  bool add_prefix_space;
  std::unique_ptr<Regex> re;
};

Behavior parse_behavior(const json& j, const std::string& what) {
  const std::string name = j.is_string() ? j.get<std::string>() : "";
  if (name == "Removed") return Behavior::Removed;
  if (name == "Isolated") return Behavior::Isolated;
  if (name == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::MergedWithNext;
  if (name == "Contiguous") return Behavior::Contiguous;
  throw Error(fmt::format("{}: unsupported Split behavior {}", what, j.dump()));
}

std::unique_ptr<HfPreTokenizer::Step> make_split(const json& j, const std::string& what) {
  const json& pat = j.at("pattern");
  const bool literal = pat.contains("String");
  if (!literal && !pat.contains("Regex"))
    throw Error(fmt::format("{}: Split pattern must be String or Regex, got {}", what, pat.dump()));
  const std::string text = pat.at(literal ? "String" : "Regex").get<std::string>();
  return std::make_unique<SplitStep>(text, literal, parse_behavior(j.at("behavior"), what),
                                     j.value("invert", false), what);
}

void add_steps(const json& j, const std::string& file,
               std::vector<std::unique_ptr<HfPreTokenizer::Step>>& steps) {
  if (j.is_null()) return;
  const std::string type = j.value("type", "");
  const std::string what = fmt::format("{}: pre_tokenizer {}", file, type);
  if (type == "Sequence") {
    for (const json& sub : j.at("pretokenizers")) add_steps(sub, file, steps);
  } else if (type == "Split") {
    steps.push_back(make_split(j, what));
  } else if (type == "Digits") {
    // Rust's char::is_numeric is the Unicode N category: one piece per digit, or per run.
    const bool single = j.value("individual_digits", false);
    steps.push_back(std::make_unique<SplitStep>(single ? R"(\p{N})" : R"(\p{N}+)", false,
                                                Behavior::Isolated, false, what));
  } else if (type == "ByteLevel") {
    steps.push_back(std::make_unique<ByteLevelStep>(j.value("add_prefix_space", true),
                                                    j.value("use_regex", true), what));
  } else {
    throw Error(fmt::format("{}: unsupported pre_tokenizer type \"{}\"", file, type));
  }
}

}  // namespace

HfPreTokenizer::HfPreTokenizer(const nlohmann::json& spec, const std::string& file) {
  try {
    add_steps(spec, file, steps_);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed pre_tokenizer: {}", file, e.what()));
  }
}

HfPreTokenizer::~HfPreTokenizer() = default;

void HfPreTokenizer::split(std::string_view text, std::vector<std::string>& words) const {
  if (text.empty()) return;
  std::vector<std::string> pieces{std::string(text)}, next;
  for (const auto& step : steps_) {
    next.clear();
    for (const std::string& p : pieces) step->apply(p, next);
    pieces.swap(next);
  }
  for (std::string& p : pieces)
    if (!p.empty()) words.push_back(std::move(p));
}

}  // namespace nibble::tok
