// A C++ program around examples/cobj/extern.scm: an exception thrown below
// Scheme frames is caught above them, glibc's backtrace() called from
// Scheme code lists the Scheme frames, and a Scheme error aborts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <execinfo.h>
#include <stdexcept>
#include <string>

extern "C" int64_t through(int64_t);
extern "C" int64_t walk(int64_t);
extern "C" int64_t fail(int64_t);

extern "C" int64_t cxx_thrower(int64_t n) {
  throw std::runtime_error("thrown below Scheme frames: " + std::to_string(n));
}

extern "C" int64_t c_backtrace(int64_t n) {
  void *pcs[64];
  int k = backtrace(pcs, 64);
  char **names = backtrace_symbols(pcs, k);
  for (int i = 0; i < k; i++) printf("frame %s\n", names[i]);
  free(names);
  return n;
}

int main(int argc, char **) {
  if (argc > 1) {
    fail(21);
    return 0;
  }
  try {
    through(3);
    printf("not caught\n");
  } catch (const std::runtime_error &e) {
    printf("caught: %s\n", e.what());
  }
  printf("walk: %ld\n", (long)walk(2));
  return 0;
}
