// The host launch of tag_gridworld_step (see cuda_host_emulation.hpp): blocks in turn, a thread per CUDA thread.
#include "cuda_host_emulation.hpp"
#include KERNEL_SOURCE

extern "C" void launch_tag_gridworld_step(int blocks, int threads, int* loc_x, int* loc_y, bool* in_game,
                                          int* timestep, int* runners_left, bool* done, const long long* actions,
                                          float* obs, float* rewards, bool* terminated, bool* truncated) {
    for (int block = 0; block < blocks; ++block) {
        std::barrier<> barrier(threads);
        block_barrier = &barrier;
        std::vector<std::thread> team;
        for (int thread = 0; thread < threads; ++thread) {
            team.emplace_back([=] {
                blockIdx = {block, 0, 0};
                threadIdx = {thread, 0, 0};
                tag_gridworld_step(loc_x, loc_y, in_game, timestep, runners_left, done, actions, obs, rewards,
                                   terminated, truncated);
            });
        }
        for (auto& member : team) member.join();
    }
}
