// CLI11 validators for the flag values kvindex takes beyond CLI11's own (CLI::Range,
// CLI::IsMember, CLI::PositiveNumber...): capacities with the words `inf` and `none`, counts
// where 0 means off, engine hashes in the spellings engines print, decimal integers that CLI11
// 2.1 would read as octal, and the comma-list form of a vector option. A validator's message
// becomes the usage error "kvindex: --FLAG: MESSAGE".
//
// Thread safety: the validators keep no state; use them from the parsing thread.
#ifndef KVINDEX_TOOLS_CLI_VALIDATORS_H_
#define KVINDEX_TOOLS_CLI_VALIDATORS_H_

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace kvindex::cli {

// Makes the vector option `option` a comma list: each occurrence takes one argument, which is
// split at ',' (empty items are skipped), and repeated occurrences add their items. Returns
// `option`.
CLI::Option* CommaList(CLI::Option* option);

// A transform that keeps "010" ten: CLI11 2.1's integer conversion reads a leading 0 as octal,
// while kvindex's number lists are decimal. Drops the leading zeros of a decimal integer (after
// an optional '-') and the blanks around it; any other text ("0x1f", words) passes for the
// checks after it.
CLI::Validator Decimal();

// A transform for a capacity list item: a positive integer or `inf` (sim::kInfiniteCapacity),
// and with `allow_none` also `none` or an empty item (0: no such tier), rewritten as the number.
// Anything else fails with "'ITEM' is not a positive integer".
CLI::Validator Capacity(bool allow_none);

// A transform for an engine or prefix hash: decimal, 0x hex, or a negative decimal (64-bit two's
// complement, as SGLang prints its hashes), blanks around it ignored, rewritten as the unsigned
// decimal value. Anything else, or a value beyond 64 bits, fails with "'ITEM' is not a number".
CLI::Validator Hash();

// A check for a count where 0 means off and any other value must be at least `min`; `why`
// (may be empty) says why, in the message.
CLI::Validator ZeroOrAtLeast(uint64_t min, std::string why);

// Checks for a number that must be finite and positive (Positive) or finite and not negative
// (NonNegative): "'X' is not a positive number" / "... a non-negative number". In place of
// CLI::PositiveNumber and CLI::NonNegativeNumber, whose message for a floating-point option prints
// the largest double in 300 digits, and which let `nan` and `inf` through.
CLI::Validator Positive();
CLI::Validator NonNegative();

// The longest duration a flag in seconds takes: 10^9 s (about 31 years). Durations become
// millisecond or nanosecond counts, which a larger value would overflow.
inline constexpr double kMaxSeconds = 1e9;

// A check for a duration in seconds: a finite number, positive (or, with `zero_ok`, not
// negative), at most kMaxSeconds: "'X' is not a positive number of seconds (at most 1e9)".
CLI::Validator Seconds(bool zero_ok);

// A check for a finite number in [min, max] (or, with `zero_ok`, also exactly 0): "'X' is not a
// number in [MIN, MAX][ or 0]". For rates and pace factors whose reciprocal becomes a duration.
CLI::Validator RealIn(double min, double max, bool zero_ok);

// A check for a file that is read to its end (a trace, a query list, a config): a path that
// exists must be a file or a pipe, not a directory or a device (/dev/zero never ends). A missing
// path passes, for the command's own "cannot open" error. Fails with "PATH: is a directory" or
// "PATH: not a regular file".
CLI::Validator InputFile();

// `--warm-from`: an http://HOST:PORT address (a host and a port required), else an existing
// input file (as InputFile(), and it must exist).
CLI::Validator WarmFromInput();

// A check for text that goes into names and JSON (a model, a tenant, a source spec): it must be
// valid UTF-8 (kvindex/core/utf8.h). The message shows the text with its bad bytes replaced.
CLI::Validator Utf8();

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_CLI_VALIDATORS_H_
