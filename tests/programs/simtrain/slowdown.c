/* --slowdown-at STEP: from STEP on, rank --slowdown-rank's GPU runs --slowdown-pct percent slower,
 * the way a GPU does after thermal throttling or with a degraded clock: the same step needs more
 * GPU time. Modelled as one more weight-gradient GEMM per step whose duration is PCT% of the
 * rank's mean step time over the (up to) 20 steps before STEP, measured while running; the
 * simulated GPU executes it in real time, so the rank's steps (and, through the all-reduce, its
 * peers') take longer from then on. */
#include <math.h>

#include "simtrain.h"

#define WINDOW 20

static double g_starts[WINDOW]; /* host start of step s at [s % WINDOW] */
static double g_extra_ns = -1;

void slowdown_step(const options *o, const rank_info *ri, int step, cudaStream_t s) {
  if (o->slowdown_at < 0 || ri->rank != o->slowdown_rank) return;
  double t = now_s();
  if (step < o->slowdown_at) {
    g_starts[step % WINDOW] = t;
    return;
  }
  if (g_extra_ns < 0) {
    int n = o->slowdown_at < WINDOW ? o->slowdown_at : WINDOW;
    double step_ns = n > 0 ? (t - g_starts[(o->slowdown_at - n) % WINDOW]) * 1e9 / n : model_step_ns(o);
    g_extra_ns = step_ns * o->slowdown_pct / 100.0;
    if (!o->quiet)
      logf_rank(ri, "--slowdown-at %d: GPU %.0f%% slower from now on (+%.3f ms per step of %.3f ms)",
                o->slowdown_at, o->slowdown_pct, g_extra_ns / 1e6, step_ns / 1e6);
  }
  /* gemm kernels take 1500 ns + 2 ns per thread (tests/simgpu README, duration model) */
  double threads = (g_extra_ns - 1500) / 2;
  if (threads < 256) return;
  unsigned gx = (unsigned)ceil(threads / 256);
  launch_dims(K_GEMM_WGRAD, gx, 1, 256, s);
}
