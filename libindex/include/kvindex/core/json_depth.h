// The nesting limit of every JSON text kvindex reads from outside: HTTP bodies, `--config`,
// `replay --queries` lines, `publish-fake --batches` and trace lines, answers read by
// `query --server`. JSON trees are copied, compared and destroyed level by level, so a text nested
// a hundred thousand levels deep exhausts the stack; such a text is refused before it is parsed.
// No real input comes near the limit (a query body nests 3 levels, a configuration 4).
//
// Thread safety: a plain function of its arguments.
#ifndef KVINDEX_CORE_JSON_DEPTH_H_
#define KVINDEX_CORE_JSON_DEPTH_H_

#include <cstddef>
#include <string_view>

namespace kvindex {

inline constexpr size_t kMaxJsonDepth = 64;

// The byte offset of the first '[' or '{' that opens a level deeper than `max_depth` in `text`,
// or npos when none does. Brackets inside strings (escapes included) do not count. Linear, no
// allocation; says nothing else about whether `text` is valid JSON.
size_t JsonTooDeepAt(std::string_view text, size_t max_depth = kMaxJsonDepth);

}  // namespace kvindex

#endif  // KVINDEX_CORE_JSON_DEPTH_H_
