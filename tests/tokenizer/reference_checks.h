#pragma once
// Checks shared by the tokenizer tests: a tokenizer against a section of tokenizer_reference.json.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nibble/tokenizer.h"
#include "tokenizer/reference_data.h"
#include "tokenizer/sha256.h"

namespace nibble::test {

// Every tricky case both ways: encode gives the reference ids, decode gives the reference text.
inline void expect_reference_cases(const Tokenizer& tok, const nlohmann::json& section) {
  ASSERT_GT(section.at("cases").size(), 0u);
  for (const auto& c : section.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    const auto want = c.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(text), want) << "encode of \"" << text << "\"";
    EXPECT_EQ(tok.decode(want), c.at("decoded").get<std::string>()) << "decode of \"" << text << "\"";
  }
}

// A whole text file: id count and SHA-256 always, first/last 64 ids where the reference has them.
inline void expect_reference_file(const Tokenizer& tok, const nlohmann::json& section,
                                  const std::string& file_name) {
  const nlohmann::json& ref = section.at(file_name);
  const std::string text = read_file_bytes(data_dir() / "text" / "wikitext-2-raw" / file_name);
  const std::vector<int32_t> ids = tok.encode(text);
  ASSERT_EQ(ids.size(), ref.at("count").get<size_t>()) << file_name;
  if (ref.contains("first64")) {
    const auto first = ref.at("first64").get<std::vector<int32_t>>();
    const auto last = ref.at("last64").get<std::vector<int32_t>>();
    EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + first.size()), first) << file_name;
    EXPECT_EQ(std::vector<int32_t>(ids.end() - last.size(), ids.end()), last) << file_name;
  }
  EXPECT_EQ(sha256_ids_u32le(ids), ref.at("sha256_u32le").get<std::string>()) << file_name;
}

}  // namespace nibble::test
