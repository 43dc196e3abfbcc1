// Options and suppressions that every --config=tsan binary carries, so that a test, a fuzzer
// run by hand and a launcher started from pytest all report the same way without TSAN_OPTIONS.

extern "C" {

// halt_on_error: the first report fails the test (a report that only prints is missed).
// second_deadlock_stack: both stacks of a lock-order inversion.
// ignore_noninstrumented_modules: the libraries Debian compiled without TSan (gRPC core, the rest
// of Abseil, protobuf, Gloo, libstdc++) hand memory between their threads through atomics and
// lock-free queues TSan cannot see, so the memcpy, free and sendmsg they make on it would look
// unordered. This drops the accesses of intercepted calls made from inside those libraries
// (their locking still counts); every access made by code we compile is still checked.
const char* __tsan_default_options() {
  return "halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1";
}

// Only Abseil's own bookkeeping below absl::Mutex, where no code of ours runs. A thread makes its
// per-thread semaphore (synchronization_internal::Waiter) and takes memory from LowLevelAlloc's
// arena while it queues on a Mutex; the queue is a word changed inside the Mutex's annotated
// region, where TSan ignores synchronization by design, so it cannot see that the waker's Post
// comes after the Waiter's construction. A suppression matches a frame in either stack of a
// report, and none of these functions calls back into user code, so a race on our data is never
// hidden by them (tsan_reports_race_test checks one is still found). Mutex's own functions are
// not suppressed: they run our Condition functions. Function names, not files, so that reports
// match with or without debug information.
const char* __tsan_default_suppressions() {
  return "race:absl::*::synchronization_internal::\n"
         "race:absl::*::base_internal::LowLevelAlloc::\n"
         "race:absl::*::base_internal::DoAllocWithArena\n"
         "race:absl::*::base_internal::*ArenaLock::\n"
         // gRPC's hand-over between its threads (see ignore_noninstrumented_modules above) seen
         // from its inline header code, which is compiled into our stubs and reactors and so is
         // instrumented: a call's ops and callback tag are filled on the thread that starts an
         // operation (a reactor's Write or Finish, a stub's async call) and read by gRPC's
         // executor when it completes; the ordering is gRPC core's completion queue.
         // race_top: only where gRPC's own code made the access; our reactors and callbacks,
         // which that code calls, stay checked.
         "race_top:grpc::internal::\n"
         // The same for a unary async call's completion lambda, whose captures are moved into
         // the tag by CallbackUnaryCallImpl's constructor (the access is std::function's); that
         // frame only moves the callback.
         "race:grpc::internal::CallbackUnaryCallImpl\n";
}

}  // extern "C"
