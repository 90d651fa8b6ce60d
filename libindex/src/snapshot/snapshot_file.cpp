// Snapshot files (snapshot.h): the atomic write (temporary file, fsync, rename, fsync of the
// folder), the chunked read, and the snapshot folder of `subscribe --snapshot-dir`.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kvindex/snapshot/snapshot.h"

namespace kvindex {

namespace {

std::string Errno() { return std::strerror(errno); }

constexpr std::string_view kPrefix = "snapshot-";
constexpr std::string_view kSuffix = ".kvsnap";

// Writes all of `s` to `fd`; false on an error (errno set).
bool WriteAll(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    s.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

InstanceTrustMap SnapshotTrusts(const SnapshotInfo& info) {
  InstanceTrustMap out;
  for (size_t i = 0; i < info.sources.size() && i < info.seq.size(); ++i) {
    SourceTrust trust;
    trust.Restore(info.seq[i].trust);
    const auto [it, first] = out.try_emplace(info.sources[i].name);
    AddSourceTrust(it->second, trust, first);
  }
  return out;
}

Result<uint64_t> WriteSnapshotFile(const std::string& path, const IndexState& state,
                                   std::span<const SourceSeqState> seq, int64_t created_ns) {
  // The rename replaces whatever `path` names: never a device, a pipe or a folder.
  if (struct stat st {}; ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return Status::IoError(path + ": not a regular file (a snapshot file is replaced whole)");
  }
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError(tmp + ": open: " + Errno());
  // Writes go through a 1 MiB buffer: the frames are small.
  std::string pending;
  int write_errno = 0;
  auto flush = [&] {
    if (write_errno == 0 && !WriteAll(fd, pending)) write_errno = errno;
    pending.clear();
    return write_errno == 0;
  };
  auto written = WriteSnapshot(state, seq, created_ns, [&](std::string_view chunk) {
    pending.append(chunk);
    return pending.size() < (size_t{1} << 20) || flush();
  });
  flush();
  Status failed;
  if (write_errno != 0) {
    failed = Status::IoError(tmp + ": write: " + std::strerror(write_errno));
  } else if (!written.ok()) {
    failed = written.status();
  } else if (::fsync(fd) != 0) {
    failed = Status::IoError(tmp + ": fsync: " + Errno());
  }
  if (::close(fd) != 0 && failed.ok()) failed = Status::IoError(tmp + ": close: " + Errno());
  if (failed.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    failed = Status::IoError(path + ": rename: " + Errno());
  }
  if (!failed.ok()) {
    ::unlink(tmp.c_str());
    return failed;
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // best effort: the rename is durable once the folder is
    ::close(dfd);
  }
  return *written;
}

Result<SnapshotInfo> ReadSnapshotFile(const std::string& path, PrefixIndex* into) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const bool missing = errno == ENOENT;
    const std::string msg = path + ": open: " + Errno();
    return missing ? Status::NotFound(msg) : Status::IoError(msg);
  }
  SnapshotReader reader(path, into);
  std::vector<char> buf(size_t{1} << 20);
  Status status;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      status = Status::IoError(path + ": read: " + Errno());
      break;
    }
    if (n == 0) break;
    status = reader.Feed(std::string_view(buf.data(), static_cast<size_t>(n)));
    if (!status.ok()) break;
  }
  ::close(fd);
  if (!status.ok()) return status;
  return reader.Finish();
}

std::string SnapshotPath(const std::string& dir, int64_t created_ns) {
  // Zero-padded, so that the names sort by time.
  std::string n = std::to_string(created_ns < 0 ? 0 : created_ns);
  if (n.size() < 20) n.insert(0, 20 - n.size(), '0');
  return (std::filesystem::path(dir) / (std::string(kPrefix) + n + std::string(kSuffix))).string();
}

std::vector<std::string> ListSnapshots(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > kPrefix.size() + kSuffix.size() && name.starts_with(kPrefix) &&
        name.ends_with(kSuffix)) {
      out.push_back(entry.path().string());
    }
  }
  std::sort(out.begin(), out.end(), std::greater<>());
  return out;
}

void PruneSnapshots(const std::string& dir, size_t keep) {
  const std::vector<std::string> all = ListSnapshots(dir);
  std::error_code ec;
  for (size_t i = keep; i < all.size(); ++i) std::filesystem::remove(all[i], ec);
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(kPrefix) && name.ends_with(std::string(kSuffix) + ".tmp")) {
      std::filesystem::remove(entry.path(), ec);
    }
  }
}

}  // namespace kvindex
