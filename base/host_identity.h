// Which kernel this process runs under, so ranks can tell whether they share /dev/shm (the
// auto communicator) and the coordinator whether a rank is on its own host. Apart from the
// communicator factory so that the coordinator can ask without linking any communicator.
//
//   if (LocalHostIdentity() == peer_identity) { /* same kernel: shared memory works */ }
//
// Thread-safe.
#ifndef TPSERVE_BASE_HOST_IDENTITY_H_
#define TPSERVE_BASE_HOST_IDENTITY_H_

#include <string>

namespace tpserve {

// "<hostname>/<boot id>": ranks with equal identities share a kernel, hence /dev/shm. A host
// without a readable boot id gets an identity unique to this process (auto then picks gloo).
std::string LocalHostIdentity();

}  // namespace tpserve

#endif  // TPSERVE_BASE_HOST_IDENTITY_H_
