// The kvindex subcommands. Each lives in its own file with an options struct, an Add<Name>Command()
// that registers its flags and callback, and a Run<Name>(options) -> Status that does the work.
// A subcommand is registered here only once it works.
#ifndef KVINDEX_TOOLS_COMMANDS_H_
#define KVINDEX_TOOLS_COMMANDS_H_

#include <string>

#include <CLI/CLI.hpp>

#include "kvindex/core/status.h"

namespace kvindex::cli {

// What a subcommand's callback leaves for main(): the Status of its run. A non-ok Status becomes
// exit 1 (or 2 for kInvalidArgument: a usage error found after parsing) with one stderr line.
struct CommandOutcome {
  std::string command;
  Status status;
};

// Registration functions, one per subcommand file, are declared here as they arrive, e.g.
//   void AddReplayCommand(CLI::App& app, CommandOutcome& outcome);
void AddPublishFakeCommand(CLI::App& app, CommandOutcome& outcome);

// `replay`: request traces through the simulator (replay.cpp).
void AddReplayCommand(CLI::App& app, CommandOutcome& outcome);
void AddQueryCommand(CLI::App& app, CommandOutcome& outcome);
// `record` and `subscribe`: the live path (record.cpp, subscribe.cpp, live.cpp).
void AddRecordCommand(CLI::App& app, CommandOutcome& outcome);
void AddSubscribeCommand(CLI::App& app, CommandOutcome& outcome);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_COMMANDS_H_
