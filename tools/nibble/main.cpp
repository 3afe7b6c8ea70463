// nibble: the command-line tool. Commands register themselves (see command.h).
#include <cstdio>
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
