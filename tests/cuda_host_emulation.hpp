// Just enough of CUDA C to run benchmarks/tag_cuda_c's kernel on the host, for a test without a
// GPU: a block's threads are std::threads, __syncthreads is a std::barrier, __shared__ arrays are
// statics (the blocks of a launch run one after another, so one block owns them at a time).
#include <algorithm>
#include <barrier>
#include <thread>
#include <vector>

struct CudaIndex {
    int x, y, z;
};
thread_local CudaIndex threadIdx, blockIdx;
static std::barrier<>* block_barrier = nullptr;

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__ static

inline void __syncthreads() { block_barrier->arrive_and_wait(); }
inline int atomicAdd(int* address, int value) { return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST); }
using std::max;
using std::min;
