// The CPUs a process may compute on, and how many threads each rank of a node takes by default.
//
// Why not std::thread::hardware_concurrency: it counts the node's online CPUs, while a rank
// that srun (--cpus-per-task with its default binding), mpirun --bind-to, taskset or a
// container's cpuset confines to fewer may run on only those. Four ranks bound to 8 cores each
// of a 128-core node would each start 32 threads on 8 cores, and OpenMP's spinning threads
// slow down severalfold when they outnumber their cores.
#pragma once

namespace crest {

// The node's online CPUs, at least 1.
int online_cpus();

// The CPUs the calling thread may run on (its affinity mask: on the main thread, the process's as
// it was launched), at least 1; the online CPUs where the mask cannot be read.
int usable_cpus();

// Default compute threads for one of `local_ranks` ranks on a node: the CPUs this rank may run
// on, divided among the ranks that share them. Which ranks share its CPUs is not known here, so
// the ranks are taken to spread evenly over the node's online CPUs: ceil(local_ranks × usable /
// online) share each rank's set. Unbound ranks (every rank may run on every CPU) get the node's
// CPUs divided by its ranks; ranks bound to CPUs of their own (srun's default binding, mpirun
// --bind-to core, taskset) get those; ranks bound to a socket share its CPUs. Never more than
// the node's CPUs divided by its ranks, and at least 1. Ranks that share a set smaller than the
// node without being bound (a container's cpuset) read as bound: set crest.threads there.
int threads_per_rank(int local_ranks);
// The same rule for given counts (threads_per_rank reads them from the calling thread).
int threads_per_rank(int local_ranks, int usable, int online);

// The thread count an OMP_NUM_THREADS value asks for: its first entry (the outermost level of a
// nested list such as "8,2"), or 0 where the value is null or blank. Throws a usage error naming
// the variable where the entry is not a positive integer.
int parse_omp_num_threads(const char* value);

// Compute threads per rank where crest.threads (or --threads) is 0: OMP_NUM_THREADS where it is
// set, as OpenMP itself reads it (per process: a job script's `export OMP_NUM_THREADS=8` with
// `srun -c 16` on cores with two hardware threads keeps one thread per core), otherwise
// threads_per_rank(local_ranks).
int default_threads_per_rank(int local_ranks);

}  // namespace crest
