// The kvindex subcommands. Each lives in its own file with an options struct, an Add<Name>Command()
// that registers its flags and callback, and a Run<Name>(options) -> Status that does the work.
// Thread safety: registration and parsing happen on main()'s thread.
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

// Registration functions, one per subcommand: each adds its subcommand and flags to `app` and a
// callback that runs it and leaves its Status in `outcome`, which must outlive app.parse().
// `publish-fake`: the fake publisher (fake/publish_fake.cpp).
void AddPublishFakeCommand(CLI::App& app, CommandOutcome& outcome);

// `replay`: request traces through the simulator, or captures into the index (replay.cpp).
void AddReplayCommand(CLI::App& app, CommandOutcome& outcome);
// `query`: one prompt asked of a capture or a server (query.cpp).
void AddQueryCommand(CLI::App& app, CommandOutcome& outcome);
// `record` and `subscribe`: the live path (record.cpp, subscribe.cpp, live.cpp).
void AddRecordCommand(CLI::App& app, CommandOutcome& outcome);
void AddSubscribeCommand(CLI::App& app, CommandOutcome& outcome);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_COMMANDS_H_
