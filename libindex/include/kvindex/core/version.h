// The kvindex version and the commit it was built from.
#ifndef KVINDEX_CORE_VERSION_H_
#define KVINDEX_CORE_VERSION_H_

#include <string_view>

namespace kvindex {

// Returns e.g. "0.1.0".
std::string_view Version();
// Returns the abbreviated git commit the build was configured at, or "unknown".
std::string_view GitCommit();

}  // namespace kvindex

#endif  // KVINDEX_CORE_VERSION_H_
