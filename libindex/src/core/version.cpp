#include "kvindex/core/version.h"

namespace kvindex {

std::string_view Version() { return KVINDEX_VERSION_STRING; }
std::string_view GitCommit() { return KVINDEX_GIT_COMMIT_STRING; }

}  // namespace kvindex
