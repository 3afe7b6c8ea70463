// The test-only SHA-256 against FIPS 180-4's examples, and chunked against one-shot hashing.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/sha256.h"

using nibble::test::sha256_hex;

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, ChunkedUpdatesEqualOneUpdate) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 50; ++trial) {
    std::string data(std::uniform_int_distribution<int>(0, 300)(rng), '\0');
    for (char& c : data) c = char(rng());
    nibble::test::Sha256 s;
    for (size_t i = 0; i < data.size();) {
      const size_t n = std::min(data.size() - i, size_t(std::uniform_int_distribution<int>(0, 70)(rng)));
      s.update(std::string_view(data).substr(i, n));
      i += n;
    }
    EXPECT_EQ(s.hex(), sha256_hex(data)) << "seed " << seed << " size " << data.size();
  }
}
