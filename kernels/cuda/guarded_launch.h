// A launch of library kernels (FlashInfer's, CUTLASS's) as an absl::Status that names the
// kernel and the shape. FlashInfer's launchers throw (flashinfer::Error, a std::exception) on a
// batch they refuse, and nothing in a rank may reach std::terminate: the throw becomes
// INTERNAL with the library's message; a returned cudaError_t becomes CudaCallStatus's code.
// Plain C++.
//
//   TP_RETURN_IF_ERROR(GuardedLaunch("FlashInfer FA2", ShapeText(batch),
//                                    [&] { return fi::RunFa2(types, batch, plan, stream); }));
//
// Thread-safe: stateless.
#ifndef TPSERVE_KERNELS_CUDA_GUARDED_LAUNCH_H_
#define TPSERVE_KERNELS_CUDA_GUARDED_LAUNCH_H_

#include <exception>
#include <source_location>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "base/str_cat.h"
#include "kernels/cuda/cuda_status.h"

namespace tpserve::cuda {

// `launch` returns a cudaError_t as int (0: queued).
template <typename Launch>
absl::Status GuardedLaunch(std::string_view kernel, std::string_view shape, Launch&& launch,
                           std::source_location where = std::source_location::current()) {
  const std::string what = StrCat(kernel, " (", shape, ")");
  int code = 0;
  try {
    code = launch();
  } catch (const std::exception& e) {
    return absl::InternalError(StrCat(what, " threw: ", e.what()));
  } catch (...) {
    return absl::InternalError(StrCat(what, " threw a non-standard exception"));
  }
  return CudaCallStatus(code, what.c_str(), where.file_name(), static_cast<int>(where.line()));
}

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_GUARDED_LAUNCH_H_
