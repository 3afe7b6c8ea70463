#pragma once
// Each CLI command lives in its own cmd_*.cpp and registers itself with NIBBLE_COMMAND, so adding
// a command touches one new file and nothing else.
#include <CLI/CLI.hpp>

#include <functional>

namespace nibble::cli {

using CommandSetup = std::function<void(CLI::App& app)>;
bool add_command(CommandSetup setup);

}  // namespace nibble::cli

#define NIBBLE_CONCAT_INNER(a, b) a##b
#define NIBBLE_CONCAT(a, b) NIBBLE_CONCAT_INNER(a, b)
#define NIBBLE_COMMAND(setup_fn) \
  static const bool NIBBLE_CONCAT(nibble_cmd_registered_, __LINE__) = ::nibble::cli::add_command(setup_fn)
