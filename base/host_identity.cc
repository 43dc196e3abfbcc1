#include "base/host_identity.h"

#include <unistd.h>

#include <climits>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace tpserve {

std::string LocalHostIdentity() {
  char hostname[HOST_NAME_MAX + 1] = {};
  if (gethostname(hostname, sizeof(hostname) - 1) != 0) hostname[0] = '\0';
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  if (boot_id.empty()) {
    // Unknown: claim a host of this process alone, so auto never assumes a shared /dev/shm.
    boot_id = absl::StrCat("no-boot-id-pid-", getpid());
  }
  return absl::StrCat(hostname, "/", boot_id);
}

}  // namespace tpserve
