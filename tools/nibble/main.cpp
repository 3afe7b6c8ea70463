// nibble: the command-line tool. Commands register themselves (see command.h).
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "command.h"
#include "nibble/error.h"

namespace nibble::cli {

static std::vector<CommandSetup>& registry() {
  static std::vector<CommandSetup> commands;
  return commands;
}

bool add_command(CommandSetup setup) {
  registry().push_back(std::move(setup));
  return true;
}

CLI::App* bench_group(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App* a) { return a->get_name() == "bench"; })) return sub;
  return app.add_subcommand("bench", "Benchmarks")->require_subcommand(1);
}

void save_text(const std::string& path, const std::string& text, const std::string& label) {
  if (path.empty()) return;
  std::ofstream out(path);
  out << text;
  if (!out.flush()) throw Error(fmt::format("{}: cannot write '{}'", label, path));
}

std::optional<std::pair<int64_t, int64_t>> parse_kxn(const std::string& s) {
  long long k = 0, n = 0;
  char extra = 0;
  if (std::sscanf(s.c_str(), "%lldx%lld%c", &k, &n, &extra) != 2 || k <= 0 || n <= 0) return std::nullopt;
  return std::pair<int64_t, int64_t>{k, n};
}

void add_cuda_only_command(CLI::App* parent, const std::string& name, const std::string& label,
                           const std::string& description, const std::vector<std::string>& options,
                           const std::vector<std::string>& flags) {
  auto* cmd = parent->add_subcommand(name, description + " (needs a CUDA build)");
  // the option storage lives as long as the callback that holds it
  auto sink = std::make_shared<std::vector<std::string>>();
  auto flag_sink = std::make_shared<bool>();
  for (const auto& o : options) cmd->add_option(o, *sink, "(CUDA build only)");
  for (const auto& f : flags) cmd->add_flag(f, *flag_sink, "(CUDA build only)");
  cmd->callback([sink, flag_sink, label] {
    throw nibble::Error(label + ": nibble was built without CUDA (no nvcc at build time)");
  });
}

}  // namespace nibble::cli

int main(int argc, char** argv) {
  CLI::App app{"nibble: low-bit LLM inference (RaZeR, NVFP4, NF4, NestedFP, ...)"};
  app.require_subcommand(1);
  app.fallthrough();
  for (auto& setup : nibble::cli::registry()) setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const nibble::Error& e) {
    std::fprintf(stderr, "nibble: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nibble: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
