// Failure modes of a data-parallel job, run by tests/distributed.cmake under `mpirun -np 2`; each
// mode must end the whole job with a clear message, never hang:
//   die       rank 1 exits abruptly while rank 0 waits in an all-reduce
//   hang      rank 1 stops participating; rank 0's collective times out (2 s)
//   init      run with a WORLD_SIZE that contradicts mpirun's
#include <mantissa.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "distributed/dist.h"

namespace mt = mantissa;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    mt::dist::init({.timeout_s = 2});
    mt::Tensor t = mt::ones({16});
    mt::dist::all_reduce(t);  // a first collective both ranks join
    if (mode == "die" && mt::dist::rank() == 1) {
      std::cerr << "rank 1: exiting abruptly\n";
      _exit(3);
    }
    if (mode == "hang" && mt::dist::rank() == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(60));  // the job is aborted long before
      return 0;
    }
    mt::dist::all_reduce(t);
    std::cout << "rank " << mt::dist::rank() << ": finished (unexpected)\n";
  } catch (const mt::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;  // finalize at exit aborts the job if a collective timed out
  }
  return 0;
}
