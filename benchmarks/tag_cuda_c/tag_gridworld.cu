// TagGridWorld with WarpDrive's partial observation, hand-written in WarpDrive's design:
// one launch per step, one block per env, one thread per agent, a shared-memory tag count.
// A benchmark baseline for kernelgym's TagGridWorld-v0 (use_full_observation=False): the
// same rules, observation and output layout (obs, rewards, terminated, truncated), and the
// same NEXT_STEP autoreset, so both produce equal arrays from equal actions.
//
// The params are compile-time constants (-D), as kernelgym compiles its params into its
// kernels: NUM_TAGGERS, NUM_RUNNERS, GRID_LENGTH, EPISODE_LENGTH, WALL_HIT_PENALTY,
// TAG_REWARD_FOR_TAGGER, TAG_PENALTY_FOR_RUNNER, STEP_COST_FOR_TAGGER.
//
// Rewards are computed in double and stored as float after each rule, as kernelgym's
// kernels do (it widens every stored float32 reward to float64 before the next update), so
// the float32 results round alike. Compile with --fmad=false: kernelgym's cuda build does
// not contract a * b + c either.

#define NUM_AGENTS (NUM_TAGGERS + NUM_RUNNERS)
#define OBS_SIZE 6

// the agent of ids first .. last - 1 nearest to (x, y) by squared grid distance, ties to
// the lowest id; with in_game_only only agents still in the game count; -1 if none does
__device__ __forceinline__ int nearest_agent(int x, int y, int first, int last, const int* sx, const int* sy,
                                             const int* s_in_game, bool in_game_only) {
    int best = -1;
    long long best_distance = 0;
    for (int other = first; other < last; ++other) {
        if (in_game_only && !s_in_game[other]) continue;
        const long long dx = (long long)sx[other] - x;
        const long long dy = (long long)sy[other] - y;
        const long long distance = dx * dx + dy * dy;
        if (best < 0 || distance < best_distance) {
            best = other;
            best_distance = distance;
        }
    }
    return best;
}

// actions: (num_envs, NUM_AGENTS) int64; obs: (num_envs, NUM_AGENTS, 6) float32; rewards:
// (num_envs, NUM_AGENTS) float32; terminated, truncated, done: (num_envs) bool (one byte).
// An env whose done flag is set is reset in this launch (NEXT_STEP): start cells, reward 0,
// neither flag, the first observation; its actions are ignored.
extern "C" __global__ void tag_gridworld_step(int* __restrict__ loc_x, int* __restrict__ loc_y,
                                              bool* __restrict__ in_game, int* __restrict__ timestep,
                                              int* __restrict__ runners_left, bool* __restrict__ done,
                                              const long long* __restrict__ actions, float* __restrict__ obs,
                                              float* __restrict__ rewards, bool* __restrict__ terminated,
                                              bool* __restrict__ truncated) {
    __shared__ int sx[NUM_AGENTS];
    __shared__ int sy[NUM_AGENTS];
    __shared__ int s_in_game[NUM_AGENTS];
    __shared__ int tags;

    const int env = blockIdx.x;
    const int agent = threadIdx.x;
    const bool active = agent < NUM_AGENTS;
    const bool is_tagger = agent < NUM_TAGGERS;
    const size_t slot = (size_t)env * NUM_AGENTS + agent;
    // every thread reads the env's flags and clock before thread 0 rewrites them below
    const bool reset = done[env];
    const int t = reset ? 0 : timestep[env] + 1;
    const int left_before = runners_left[env];

    int x = 0, y = 0;
    bool in = true;
    float reward = 0.0f;
    if (agent == 0) tags = 0;
    if (reset) {
        if (active) {
            x = y = is_tagger ? GRID_LENGTH / 2 : 0;
        }
    } else if (active) {
        x = loc_x[slot];
        y = loc_y[slot];
        in = in_game[slot];
        if (in) {  // move
            const long long action = actions[slot];
            const int new_x = x + (action == 1) - (action == 2);
            const int new_y = y + (action == 3) - (action == 4);
            x = min(max(new_x, 0), GRID_LENGTH);
            y = min(max(new_y, 0), GRID_LENGTH);
            reward = (x != new_x || y != new_y) ? (float)(-WALL_HIT_PENALTY) : 0.0f;
        }
    }
    if (active) {
        sx[agent] = x;
        sy[agent] = y;
    }
    __syncthreads();  // every agent has moved (and tags is 0)

    if (!reset && active && !is_tagger && in) {  // tag: a tagger on the runner's cell
        for (int tagger = 0; tagger < NUM_TAGGERS; ++tagger) {
            if (sx[tagger] == x && sy[tagger] == y) {
                in = false;
                reward = (float)((double)reward - TAG_PENALTY_FOR_RUNNER);
                atomicAdd(&tags, 1);
                break;
            }
        }
    }
    if (active) s_in_game[agent] = in;
    __syncthreads();  // the step's tags and every agent's final state are known

    const int tag_count = tags;
    if (!reset && active) {  // end of step reward
        if (is_tagger) {
            reward = tag_count > 0 ? (float)((double)reward + TAG_REWARD_FOR_TAGGER * tag_count)
                                   : (float)((double)reward - STEP_COST_FOR_TAGGER);
        } else if (in && tag_count == 0) {
            reward = (float)((double)reward + STEP_COST_FOR_TAGGER);
        }
    }
    if (active) {
        int target;
        if (is_tagger) {
            target = nearest_agent(x, y, NUM_TAGGERS, NUM_AGENTS, sx, sy, s_in_game, true);
            // no runner left: the nearest of the tagged-out runners (kernelgym's rule)
            if (target < 0) target = nearest_agent(x, y, NUM_TAGGERS, NUM_AGENTS, sx, sy, s_in_game, false);
        } else {
            target = nearest_agent(x, y, 0, NUM_TAGGERS, sx, sy, s_in_game, false);
        }
        float* row = obs + slot * OBS_SIZE;
        row[0] = (float)((double)x / GRID_LENGTH);
        row[1] = (float)((double)y / GRID_LENGTH);
        row[2] = (float)((double)sx[target] / GRID_LENGTH);
        row[3] = (float)((double)sy[target] / GRID_LENGTH);
        row[4] = is_tagger ? 0.0f : 1.0f;
        row[5] = (float)((double)t / EPISODE_LENGTH);
        rewards[slot] = reward;
        loc_x[slot] = x;
        loc_y[slot] = y;
        in_game[slot] = in;
    }
    if (agent == 0) {
        const int left = reset ? NUM_RUNNERS : left_before - tag_count;
        const bool ended = !reset && left == 0;
        const bool out_of_time = !reset && t >= EPISODE_LENGTH;
        timestep[env] = t;
        runners_left[env] = left;
        terminated[env] = ended;
        truncated[env] = out_of_time;
        done[env] = ended || out_of_time;
    }
}
