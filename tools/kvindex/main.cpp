// kvindex: one binary, five subcommands over libindex (docs/cli.md "Conventions"). main() only builds the CLI,
// registers the subcommands and maps failures to exit codes: 0 ok, 1 data or runtime error,
// 2 usage error.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "kvindex/core/log.h"
#include "kvindex/core/version.h"
#include "report.h"

int main(int argc, char** argv) {
  using kvindex::cli::CommandOutcome;
  CLI::App app{"kvindex: a KV-cache event index, recorder and hit-rate simulator for LLM serving",
               "kvindex"};
  app.set_version_flag("--version", std::string("kvindex ") + std::string(kvindex::Version()) +
                                        " (" + std::string(kvindex::GitCommit()) + ")");
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "Diagnostics on stderr: error, warn, info, debug, trace")
      ->check([](const std::string& value) {
        return kvindex::ParseLogLevel(value) ? std::string() : "unknown log level '" + value + "'";
      })
      ->each([](const std::string& value) { kvindex::SetLogLevel(*kvindex::ParseLogLevel(value)); });
  app.require_subcommand(1, 1);

  CommandOutcome outcome;
  // kvindex::cli::Add<Name>Command(app, outcome) for each working subcommand.
  kvindex::cli::AddReplayCommand(app, outcome);
  kvindex::cli::AddQueryCommand(app, outcome);
  kvindex::cli::AddRecordCommand(app, outcome);
  kvindex::cli::AddSubscribeCommand(app, outcome);
  kvindex::cli::AddPublishFakeCommand(app, outcome);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);  // --help, --version
    std::fprintf(stderr, "kvindex: %s\n", error.what());
    std::string sub;
    for (const CLI::App* parsed : app.get_subcommands()) sub = parsed->get_name() + " ";
    std::fprintf(stderr, "Run 'kvindex %s--help' for usage.\n", sub.c_str());
    return 2;
  }
  // Results lost on the way to stdout (a full device, a closed pipe) are a runtime error.
  if (outcome.status.ok()) outcome.status = kvindex::cli::FlushStdout();
  if (!outcome.status.ok()) {
    std::fprintf(stderr, "kvindex %s: %s\n", outcome.command.c_str(),
                 outcome.status.message().c_str());
    return outcome.status.code() == kvindex::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}
