#include <cstdio>

#include "command.h"

static void setup_version(CLI::App& app) {
  auto* cmd = app.add_subcommand("version", "Print nibble's version and build features");
  cmd->callback([] {
    std::printf("nibble 0.1.0\n");
#ifdef NIBBLE_HAVE_CUDA
    std::printf("cuda: built\n");
#else
    std::printf("cuda: not built\n");
#endif
  });
}
NIBBLE_COMMAND(setup_version);
