// The launcher's last step: serve what the plan decided (flags -> plan -> serve; the flags are
// deploy/launch_flags.h, the plan deploy/cluster_plan.h, and deploy/launch_main.cc runs the
// three).
//
//   LaunchSetup setup;  // flags, the loaded bundle, the request and its plan
//   return Serve(argv[0], setup);
#ifndef TPSERVE_DEPLOY_SERVE_H_
#define TPSERVE_DEPLOY_SERVE_H_

#include <string>

#include "coordinator/model_bundle.h"
#include "deploy/cluster_plan.h"
#include "deploy/launch_flags.h"

namespace tpserve {

// Everything a launch has decided before it starts processes.
struct LaunchSetup {
  LaunchFlags flags;
  ModelBundle* bundle = nullptr;
  ClusterRequest request;  // what the plan was made for, and what the ranks open
  ClusterPlan plan;
  int ranks = 1;
  std::string backend = "cpu";
  std::string comm_kind = "auto";
};

// Checks what the flags ask of the processes and the public API first (exit 2, nothing
// started); then spawns, joins and loads the ranks, serves, supervises (draining on SIGINT or
// SIGTERM) and stops. Returns the launcher's exit code: 0 after a drain, 1 when a rank died or
// stalled (named on stderr) or a step failed, 2 for a bad flag.
int Serve(const char* argv0, const LaunchSetup& setup);

// Prints "launch: <message>" on stderr and returns `code` (the launcher's exit code).
int LaunchFail(const std::string& message, int code = 1);

}  // namespace tpserve

#endif  // TPSERVE_DEPLOY_SERVE_H_
