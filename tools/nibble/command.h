#pragma once
// Each CLI command lives in its own cmd_*.cpp and registers itself with NIBBLE_COMMAND, so adding
// a command touches one new file and nothing else.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nibble::cli {

using CommandSetup = std::function<void(CLI::App& app)>;
bool add_command(CommandSetup setup);

// The `nibble bench` group, made by whichever bench command registers first.
CLI::App* bench_group(CLI::App& app);

// In a build without CUDA, a GPU command `name` under `parent` that accepts the CUDA build's
// options and flags (so its error, not a parse error, is what the user sees) and fails with
// "<label>: nibble was built without CUDA".
void add_cuda_only_command(CLI::App* parent, const std::string& name, const std::string& label,
                           const std::string& description, const std::vector<std::string>& options,
                           const std::vector<std::string>& flags = {});

// Writes text to path (nothing when path is empty); throws nibble::Error "<label>: cannot write
// '<path>'" when it cannot, checked after the flush so that a full disk is caught too.
void save_text(const std::string& path, const std::string& text, const std::string& label);

// "KxN" (two positive integers, nothing after them) as (K, N); nullopt when s is not of that form.
std::optional<std::pair<int64_t, int64_t>> parse_kxn(const std::string& s);

}  // namespace nibble::cli

#define NIBBLE_CONCAT_INNER(a, b) a##b
#define NIBBLE_CONCAT(a, b) NIBBLE_CONCAT_INNER(a, b)
#define NIBBLE_COMMAND(setup_fn) \
  static const bool NIBBLE_CONCAT(nibble_cmd_registered_, __LINE__) = ::nibble::cli::add_command(setup_fn)
