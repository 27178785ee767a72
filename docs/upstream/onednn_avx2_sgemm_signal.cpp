// Standalone reproducer for upstream oneDNN (docs/upstream/onednn-avx2-sgemm-signal.md): a
// signal handled on a thread inside oneDNN 3.2's AVX2 sgemm corrupts the heap.
//
//   g++ -O2 -std=c++17 onednn_avx2_sgemm_signal.cpp -ldnnl -lpthread -o repro
//   OMP_NUM_THREADS=1 ./repro            # on an AVX2 CPU (or ONEDNN_MAX_CPU_ISA=AVX2): aborts
//   NO_SIGNALS=1 OMP_NUM_THREADS=1 ./repro           # the same sgemms without signals: passes
//   ONEDNN_MAX_CPU_ISA=AVX OMP_NUM_THREADS=1 ./repro  # the AVX kernel keeps its stack: passes
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

volatile sig_atomic_t handled = 0;
void on_signal(int) { handled = handled + 1; }

int main(int argc, char** argv) {
  const dnnl_dim_t m = argc > 1 ? atol(argv[1]) : 27, n = argc > 2 ? atol(argv[2]) : 64,
                   k = argc > 3 ? atol(argv[3]) : 32768;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  std::vector<float> a(m * k, 1.f), b(k * n, 1.f), c(m * n);
  const pthread_t compute = pthread_self();
  std::atomic<bool> done{false};
  std::thread sender([&] {
    while (!done && !std::getenv("NO_SIGNALS")) {
      pthread_kill(compute, SIGUSR1);
      usleep(20);
    }
  });
  for (int i = 0; i < 3000; ++i) {
    std::vector<char> churn(1000 + i % 300);  // heap traffic next to the workspace
    dnnl_sgemm('N', 'N', m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, c.data(), n);
  }
  done = true;
  sender.join();
  std::printf("%d signals handled during %lldx%lldx%lld sgemms, c[0] = %g\n", int(handled),
              (long long)m, (long long)n, (long long)k, c[0]);
}
