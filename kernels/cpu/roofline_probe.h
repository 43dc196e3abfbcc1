// The two ceilings of a CPU matmul on this machine, measured (benches print them beside their
// timings, in the same run): the rate at which `threads` threads read DRAM, and the rate at
// which they issue AVX2 FMAs (8 floats each, two FLOPs a lane). A matmul of m rows that reads
// each weight once is bound by the first at small m and by the second past
// m ~ (GFLOP/s / 2) / (weights per second).
// Not a test and not for serving: each call takes about a second.
#ifndef TPSERVE_KERNELS_CPU_ROOFLINE_PROBE_H_
#define TPSERVE_KERNELS_CPU_ROOFLINE_PROBE_H_

namespace tpserve {

// GB/s read from a 512 MiB array (far past the caches) by `threads` threads, best of 3.
double DramReadGBs(int threads);
// GFLOP/s of independent AVX2 FMA chains on `threads` threads, best of 3; 0 when the CPU has
// no AVX2 FMA.
double FmaPeakGflops(int threads);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CPU_ROOFLINE_PROBE_H_
