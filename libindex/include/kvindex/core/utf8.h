// The project's one invalid-UTF-8 policy (docs/architecture.md "Text that is not UTF-8").
// Text reaches kvindex from publishers (a medium, a LoRA name, a Mooncake key), command lines,
// files and servers, and every JSON writer requires valid UTF-8. Where such text is written out,
// each maximal ill-formed subsequence is replaced by U+FFFD (the Unicode Standard's recommended
// practice, chapter 3 "U+FFFD Substitution of Maximal Subparts"; Python's
// `bytes.decode("utf-8", "replace")` does the same), so one bad byte costs one replacement
// character and the rest of the text survives. Valid text, NUL included, passes unchanged.
//
// Thread safety: plain functions of their arguments.
#ifndef KVINDEX_CORE_UTF8_H_
#define KVINDEX_CORE_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace kvindex {

// The byte offset of the first ill-formed subsequence in `text`, or npos when `text` is valid
// UTF-8 (overlong forms, surrogates and code points above U+10FFFF are ill-formed). Linear.
size_t InvalidUtf8At(std::string_view text);

inline bool IsValidUtf8(std::string_view text) {
  return InvalidUtf8At(text) == std::string_view::npos;
}

// `text` with every maximal ill-formed subsequence replaced by U+FFFD (EF BF BD). Returns a copy
// of `text` when it is valid.
std::string ToValidUtf8(std::string_view text);

// Replaces in place; returns whether anything was replaced. No allocation when `text` is valid.
bool MakeValidUtf8(std::string& text);

}  // namespace kvindex

#endif  // KVINDEX_CORE_UTF8_H_
