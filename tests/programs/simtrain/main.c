/* simtrain: options, the torchrun-like launcher, small host utilities. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "simtrain.h"

rank_info g_rank = {-1, 1, 0, 1};

/* ---------------------------------------------------------------- utilities */

double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void sleep_ms(double ms) {
  if (ms <= 0) return;
  struct timespec ts = {(time_t)(ms / 1000.0), (long)(((ms / 1000.0) - (time_t)(ms / 1000.0)) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void spin_us(double us) {
  if (us <= 0) return;
  double end = now_s() + us * 1e-6;
  while (now_s() < end) {
  }
}

void logf_rank(const rank_info *ri, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (ri && ri->rank >= 0)
    fprintf(stderr, "simtrain rank %d: %s\n", ri->rank, buf);
  else
    fprintf(stderr, "simtrain: %s\n", buf);
  fflush(stderr);
}

void check_cuda(cudaError_t e, const char *what, const char *file, int line) {
  if (e == cudaSuccess) return;
  logf_rank(&g_rank, "CUDA error %d %s: %s at %s:%d (%s)", (int)e, cudaGetErrorName(e),
            cudaGetErrorString(e), file, line, what);
  fflush(NULL);
  exit(EXIT_CUDA);
}

/* ---------------------------------------------------------------- options */

static void usage(FILE *f) {
  options d;
  char *argv0[] = {"simtrain", NULL};
  parse_options(1, argv0, &d);
  fprintf(f,
"usage: simtrain [options]\n"
"A data-parallel training job (CUDA runtime + NCCL + NVTX v3) for the simulated GPU stack.\n"
"Run it with the mocks first in the library path: scripts/simgpu.sh tests/programs/build/simtrain\n"
"\n"
"job:\n"
"  --ranks N             rank processes, launched like torchrun (default %d; 1 runs in-process)\n"
"  --steps N             training steps (default %d)\n"
"  --layers N            transformer layers (default %d; ~%.1f ms of modelled GPU time per step)\n"
"  --buckets N           gradient all-reduce buckets per step (default %d)\n"
"  --bucket-mb MB        bucket size, fp32 gradients (default %g)\n"
"  --batch-mb MB         input batch copied host->device each step (default %g)\n"
"  --batch-ms MS         host data-loading time per batch (default %g)\n"
"  --log-every N         loss read-back (D2H 4 bytes + sync) every N steps (default 0: never)\n"
"  --max-inflight N      steps the host may run ahead of the GPU (default %d)\n"
"  --quiet               only the final line per rank\n"
"pathologies (each switches on one):\n"
"  --data-stall MS       input pipeline stall before each step (GPU idles at step starts)\n"
"  --launch-bound        eager mode: thousands of tiny elementwise kernels per step, each behind\n"
"                        --op-overhead-us of host time (default %g)\n"
"  --sync-every-step     .item() inside forward: D2H copy of 4 bytes + cudaStreamSynchronize, then 2 ms of host work on the value\n"
"  --pageable            batch copied from pageable (malloc) memory instead of pinned\n"
"  --no-overlap          all-reduce after backward, on the compute stream\n"
"  --slow-link           link bandwidth 10x lower (sets SIMGPU_LINK_GBPS for every rank)\n"
"  --straggler RANK      that rank's host is slower each step by --straggler-ms (default %g)\n"
"  --hang-at STEP        rank --hang-rank (default: last) skips the all-reduce at STEP and stalls;\n"
"                        its peers block in the collective\n"
"  --desync-at STEP      rank --desync-rank (default: last) all-reduces a different size at STEP\n"
"                        (--desync-kind count: half the count [default]; dtype: bf16 not fp32)\n"
"  --oom-at STEP         cudaMalloc growth each step until cudaErrorMemoryAllocation at ~STEP;\n"
"                        prints torch.OutOfMemoryError and exits 1\n"
"  --amp-overflow-every K  every Kth step the AMP non-finite check finds inf/nan (read back\n"
"                        with a D2H copy each step) and the optimizer kernels are skipped\n"
"  --slowdown-at STEP    from STEP on, rank --slowdown-rank (default: last) has a GPU --slowdown-pct\n"
"                        (default 20) percent slower: one more GEMM per step of that share of its\n"
"                        measured step time (fail-slow: thermal throttling, a degraded GPU)\n"
"  --workers N           DataLoader-style forked worker processes feed batches over pipes\n"
"  --batch-work KIND     what making a batch (--batch-ms) does, in the workers or else the main\n"
"                        thread: sleep (default), cpu (that much CPU time computing), io (1 MiB\n"
"                        read from a file in 16 reads behind sleeps: a slow filesystem)\n"
"  --host-mb MB          hold MB of host memory (written at start, an eighth of its pages\n"
"                        rewritten every step: a dataset cached in RAM); run it under a memory\n"
"                        limit to make host memory pressure\n"
"  --graphs              capture forward into a CUDA graph once, replay it with cudaGraphLaunch\n"
"  --scalable-init N     create the communicator with ncclCommInitRankScalable from N unique ids\n"
"                        (PyTorch's default above 128 ranks) instead of ncclCommInitRank\n"
"\n"
"Each rank uses device LOCAL_RANK; ranks get RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,\n"
"MASTER_ADDR, MASTER_PORT and " SIMTRAIN_ID_FILE_ENV " (where rank 0 leaves the hex ncclUniqueIds\n"
"for the others; " SIMTRAIN_ID_ENV " given directly takes precedence) in the environment.\n"
"Output: one line per rank, 'simtrain rank=R world=W device=D steps=N wall_s=S steps_per_s=X\n"
"optimizer_skipped=K worker_batches=B'.\n"
"Exit codes: 0 ok, 1 CUDA out of memory, 2 usage, 3 CUDA error, 4 NCCL error, 5 libnccl.so.2\n"
"missing with --ranks > 1, 6 system error; the launcher exits with the first failing rank's\n"
"code (128+signal if killed) and stops the other ranks with SIGTERM.\n",
          d.ranks, d.steps, d.layers, model_step_ns(&d) / 1e6, d.buckets, d.bucket_mb, d.batch_mb,
          d.batch_ms, d.max_inflight, d.op_overhead_us, d.straggler_ms);
}

static int parse_int(const char *opt, const char *s) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < -1 || v > 1000000000) {
    fprintf(stderr, "simtrain: bad value for %s: '%s'\n", opt, s);
    exit(EXIT_USAGE);
  }
  return (int)v;
}

static double parse_num(const char *opt, const char *s) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || v < 0) {
    fprintf(stderr, "simtrain: bad value for %s: '%s'\n", opt, s);
    exit(EXIT_USAGE);
  }
  return v;
}

enum {
  O_RANKS = 256, O_STEPS, O_LAYERS, O_BUCKETS, O_BUCKET_MB, O_BATCH_MB, O_BATCH_MS, O_LOG_EVERY,
  O_MAX_INFLIGHT, O_QUIET, O_DATA_STALL, O_LAUNCH_BOUND, O_OP_OVERHEAD, O_SYNC, O_PAGEABLE,
  O_NO_OVERLAP, O_SLOW_LINK, O_STRAGGLER, O_STRAGGLER_MS, O_HANG_AT, O_HANG_RANK, O_DESYNC_AT,
  O_DESYNC_RANK, O_DESYNC_KIND, O_OOM_AT, O_AMP, O_WORKERS, O_GRAPHS, O_SCALABLE, O_SLOW_AT,
  O_SLOW_RANK, O_SLOW_PCT, O_BATCH_WORK, O_HOST_MB
};

void parse_options(int argc, char **argv, options *o) {
  memset(o, 0, sizeof *o);
  o->ranks = 1;
  o->steps = 50;
  o->layers = 8;
  o->buckets = 4;
  o->bucket_mb = 25;
  o->batch_mb = 4;
  o->batch_ms = 2;
  o->max_inflight = 2;
  o->op_overhead_us = 15;
  o->straggler_rank = -1;
  o->straggler_ms = 100;
  o->hang_at = o->hang_rank = -1;
  o->desync_at = o->desync_rank = -1;
  o->oom_at = -1;
  o->slowdown_at = o->slowdown_rank = -1;
  o->slowdown_pct = 20;
  static const struct option longopts[] = {
      {"ranks", required_argument, 0, O_RANKS},
      {"steps", required_argument, 0, O_STEPS},
      {"layers", required_argument, 0, O_LAYERS},
      {"buckets", required_argument, 0, O_BUCKETS},
      {"bucket-mb", required_argument, 0, O_BUCKET_MB},
      {"batch-mb", required_argument, 0, O_BATCH_MB},
      {"batch-ms", required_argument, 0, O_BATCH_MS},
      {"log-every", required_argument, 0, O_LOG_EVERY},
      {"max-inflight", required_argument, 0, O_MAX_INFLIGHT},
      {"quiet", no_argument, 0, O_QUIET},
      {"data-stall", required_argument, 0, O_DATA_STALL},
      {"launch-bound", no_argument, 0, O_LAUNCH_BOUND},
      {"op-overhead-us", required_argument, 0, O_OP_OVERHEAD},
      {"sync-every-step", no_argument, 0, O_SYNC},
      {"pageable", no_argument, 0, O_PAGEABLE},
      {"no-overlap", no_argument, 0, O_NO_OVERLAP},
      {"slow-link", no_argument, 0, O_SLOW_LINK},
      {"straggler", required_argument, 0, O_STRAGGLER},
      {"straggler-ms", required_argument, 0, O_STRAGGLER_MS},
      {"hang-at", required_argument, 0, O_HANG_AT},
      {"hang-rank", required_argument, 0, O_HANG_RANK},
      {"desync-at", required_argument, 0, O_DESYNC_AT},
      {"desync-rank", required_argument, 0, O_DESYNC_RANK},
      {"desync-kind", required_argument, 0, O_DESYNC_KIND},
      {"oom-at", required_argument, 0, O_OOM_AT},
      {"amp-overflow-every", required_argument, 0, O_AMP},
      {"slowdown-at", required_argument, 0, O_SLOW_AT},
      {"slowdown-rank", required_argument, 0, O_SLOW_RANK},
      {"slowdown-pct", required_argument, 0, O_SLOW_PCT},
      {"workers", required_argument, 0, O_WORKERS},
      {"batch-work", required_argument, 0, O_BATCH_WORK},
      {"host-mb", required_argument, 0, O_HOST_MB},
      {"graphs", no_argument, 0, O_GRAPHS},
      {"scalable-init", required_argument, 0, O_SCALABLE},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    const char *name = optind > 1 ? argv[optind - 1] : "?";
    switch (c) {
    case O_RANKS: o->ranks = parse_int(name, optarg); break;
    case O_SCALABLE: o->scalable_ids = parse_int(name, optarg); break;
    case O_STEPS: o->steps = parse_int(name, optarg); break;
    case O_LAYERS: o->layers = parse_int(name, optarg); break;
    case O_BUCKETS: o->buckets = parse_int(name, optarg); break;
    case O_BUCKET_MB: o->bucket_mb = parse_num(name, optarg); break;
    case O_BATCH_MB: o->batch_mb = parse_num(name, optarg); break;
    case O_BATCH_MS: o->batch_ms = parse_num(name, optarg); break;
    case O_LOG_EVERY: o->log_every = parse_int(name, optarg); break;
    case O_MAX_INFLIGHT: o->max_inflight = parse_int(name, optarg); break;
    case O_QUIET: o->quiet = 1; break;
    case O_DATA_STALL: o->data_stall_ms = parse_num(name, optarg); break;
    case O_LAUNCH_BOUND: o->launch_bound = 1; break;
    case O_OP_OVERHEAD: o->op_overhead_us = parse_num(name, optarg); break;
    case O_SYNC: o->sync_every_step = 1; break;
    case O_PAGEABLE: o->pageable = 1; break;
    case O_NO_OVERLAP: o->no_overlap = 1; break;
    case O_SLOW_LINK: o->slow_link = 1; break;
    case O_STRAGGLER: o->straggler_rank = parse_int(name, optarg); break;
    case O_STRAGGLER_MS: o->straggler_ms = parse_num(name, optarg); break;
    case O_HANG_AT: o->hang_at = parse_int(name, optarg); break;
    case O_HANG_RANK: o->hang_rank = parse_int(name, optarg); break;
    case O_DESYNC_AT: o->desync_at = parse_int(name, optarg); break;
    case O_DESYNC_RANK: o->desync_rank = parse_int(name, optarg); break;
    case O_BATCH_WORK:
      if (strcmp(optarg, "sleep") == 0)
        o->batch_work = WORK_SLEEP;
      else if (strcmp(optarg, "cpu") == 0)
        o->batch_work = WORK_CPU;
      else if (strcmp(optarg, "io") == 0)
        o->batch_work = WORK_IO;
      else {
        fprintf(stderr, "simtrain: --batch-work is sleep, cpu or io\n");
        exit(EXIT_USAGE);
      }
      break;
    case O_DESYNC_KIND:
      if (strcmp(optarg, "count") == 0)
        o->desync_kind = DESYNC_COUNT;
      else if (strcmp(optarg, "dtype") == 0)
        o->desync_kind = DESYNC_DTYPE;
      else {
        fprintf(stderr, "simtrain: --desync-kind is count or dtype\n");
        exit(EXIT_USAGE);
      }
      break;
    case O_OOM_AT: o->oom_at = parse_int(name, optarg); break;
    case O_AMP: o->amp_overflow_every = parse_int(name, optarg); break;
    case O_SLOW_AT: o->slowdown_at = parse_int(name, optarg); break;
    case O_SLOW_RANK: o->slowdown_rank = parse_int(name, optarg); break;
    case O_SLOW_PCT: o->slowdown_pct = parse_num(name, optarg); break;
    case O_WORKERS: o->workers = parse_int(name, optarg); break;
    case O_HOST_MB: o->host_mb = parse_num(name, optarg); break;
    case O_GRAPHS: o->graphs = 1; break;
    case 'h': usage(stdout); exit(EXIT_OK);
    default:
      fprintf(stderr, "simtrain: try --help\n");
      exit(EXIT_USAGE);
    }
  }
  if (optind < argc) {
    fprintf(stderr, "simtrain: unexpected argument '%s' (try --help)\n", argv[optind]);
    exit(EXIT_USAGE);
  }
#define REQUIRE(cond, msg)                         \
  do {                                             \
    if (!(cond)) {                                 \
      fprintf(stderr, "simtrain: %s\n", msg);      \
      exit(EXIT_USAGE);                            \
    }                                              \
  } while (0)
  REQUIRE(o->ranks >= 1 && o->ranks <= 64, "--ranks must be 1..64");
  REQUIRE(o->steps >= 0, "--steps must be >= 0");
  REQUIRE(o->layers >= 1, "--layers must be >= 1");
  REQUIRE(o->buckets >= 1, "--buckets must be >= 1");
  REQUIRE(o->max_inflight >= 1 && o->max_inflight <= 8, "--max-inflight must be 1..8");
  REQUIRE(o->workers >= 0 && o->workers <= 64, "--workers must be 0..64");
  REQUIRE(o->host_mb >= 0 && o->host_mb <= 1 << 20, "--host-mb must be 0..1048576");
  REQUIRE(o->amp_overflow_every >= 0, "--amp-overflow-every must be >= 1");
  REQUIRE(o->log_every >= 0, "--log-every must be >= 0");
  REQUIRE(o->scalable_ids >= 0 && o->scalable_ids <= SIMTRAIN_MAX_IDS, "--scalable-init must be 1..8");
  if (o->hang_at >= 0 && o->hang_rank < 0) o->hang_rank = o->ranks - 1;
  if (o->desync_at >= 0 && o->desync_rank < 0) o->desync_rank = o->ranks - 1;
  if (o->slowdown_at >= 0 && o->slowdown_rank < 0) o->slowdown_rank = o->ranks - 1;
  REQUIRE(o->slowdown_rank < o->ranks, "--slowdown-rank must be < --ranks");
  REQUIRE(o->hang_at < 0 || (o->ranks >= 2 && o->hang_rank < o->ranks),
          "--hang-at needs --ranks >= 2 and --hang-rank < --ranks");
  REQUIRE(o->desync_at < 0 || (o->ranks >= 2 && o->desync_rank < o->ranks),
          "--desync-at needs --ranks >= 2 and --desync-rank < --ranks");
  REQUIRE(o->straggler_rank < 0 || (o->ranks >= 2 && o->straggler_rank < o->ranks),
          "--straggler needs --ranks >= 2 and RANK < --ranks");
#undef REQUIRE
}

/* ---------------------------------------------------------------- launcher */

static pid_t g_children[64];
static int g_nchildren;
static volatile sig_atomic_t g_signal;

static void forward_signal(int sig) {
  g_signal = sig;
  for (int i = 0; i < g_nchildren; i++)
    if (g_children[i] > 0) kill(g_children[i], sig);
}

static int status_code(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return 1;
}

static void setenv_int(const char *k, int v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%d", v);
  setenv(k, buf, 1);
}

static int launch_ranks(const options *o, char **argv) {
  nccl_lib nccl;
  char err[512];
  if (nccl_load(&nccl, err, sizeof err) != 0) {
    logf_rank(NULL, "--ranks %d needs libnccl.so.2: %s", o->ranks, err);
    return EXIT_NO_NCCL;
  }
  /* rank 0 makes the unique ids and leaves them in this file for the others */
  char id_file[256];
  const char *tmp = getenv("TMPDIR");
  snprintf(id_file, sizeof id_file, "%s/simtrain-%d-%lld.ncclid", tmp && *tmp ? tmp : "/tmp", (int)getpid(),
           (long long)(now_s() * 1e6));
  unlink(id_file);
  setenv(SIMTRAIN_ID_FILE_ENV, id_file, 1);
  setenv_int("WORLD_SIZE", o->ranks);
  setenv_int("LOCAL_WORLD_SIZE", o->ranks);
  setenv("GROUP_RANK", "0", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 0);
  setenv("MASTER_PORT", "29500", 0);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);

  fflush(NULL);
  for (int rk = 0; rk < o->ranks; rk++) {
    pid_t pid = fork();
    if (pid < 0) {
      logf_rank(NULL, "fork: %s", strerror(errno));
      forward_signal(SIGTERM);
      return EXIT_SYSTEM;
    }
    if (pid == 0) {
      signal(SIGTERM, SIG_DFL);
      signal(SIGINT, SIG_DFL);
      signal(SIGHUP, SIG_DFL);
      setenv_int("RANK", rk);
      setenv_int("LOCAL_RANK", rk);
      setenv_int("ROLE_RANK", rk);
      execv("/proc/self/exe", argv);
      fprintf(stderr, "simtrain: exec /proc/self/exe: %s\n", strerror(errno));
      _exit(EXIT_SYSTEM);
    }
    g_children[g_nchildren++] = pid;
  }
  if (!o->quiet) logf_rank(NULL, "launched %d ranks", o->ranks);

  int first_bad = 0, live = g_nchildren;
  double kill_deadline = 0;
  while (live > 0) {
    int st;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid < 0 && errno != EINTR) break;
    if (pid <= 0) {
      if (kill_deadline > 0 && now_s() > kill_deadline) {
        for (int i = 0; i < g_nchildren; i++)
          if (g_children[i] > 0) kill(g_children[i], SIGKILL);
        kill_deadline = 0;
      }
      sleep_ms(5);
      continue;
    }
    for (int i = 0; i < g_nchildren; i++) {
      if (g_children[i] != pid) continue;
      g_children[i] = 0;
      live--;
      int code = status_code(st);
      if (code != 0 && first_bad == 0) {
        first_bad = code;
        if (!g_signal) logf_rank(NULL, "rank %d (pid %d) failed with exit code %d; stopping the others", i, (int)pid, code);
        forward_signal(SIGTERM);
        kill_deadline = now_s() + 10.0;
      }
    }
  }
  unlink(id_file);
  if (first_bad) return first_bad;
  return g_signal ? 128 + g_signal : EXIT_OK;
}

int main(int argc, char **argv) {
  options o;
  parse_options(argc, argv, &o);

  const char *id = getenv(SIMTRAIN_ID_ENV);
  if (!id) id = getenv(SIMTRAIN_ID_FILE_ENV);
  if (o.slow_link && !getenv("SIMTRAIN_SLOW_LINK")) {
    /* The mocks read SIMGPU_LINK_GBPS when they initialise (before main: the kernel
     * registration already loaded them): set it, then the ranks (or this process, re-executed
     * when it is the only rank) start with it. */
    const char *cur = getenv("SIMGPU_LINK_GBPS");
    double base = cur ? atof(cur) : SIMTRAIN_DEFAULT_LINK_GBPS;
    if (base <= 0) base = SIMTRAIN_DEFAULT_LINK_GBPS;
    char buf[64];
    snprintf(buf, sizeof buf, "%g", base / 10.0);
    setenv("SIMGPU_LINK_GBPS", buf, 1);
    setenv("SIMTRAIN_SLOW_LINK", buf, 1);
    if (o.ranks == 1) {
      execv("/proc/self/exe", argv);
      fprintf(stderr, "simtrain: exec /proc/self/exe: %s\n", strerror(errno));
      return EXIT_SYSTEM;
    }
  }
  if (o.ranks > 1 && !id) return launch_ranks(&o, argv);

  rank_info ri = {0, 1, 0, 1};
  if (id) {
    const char *e;
    ri.rank = (e = getenv("RANK")) ? atoi(e) : 0;
    ri.world = (e = getenv("WORLD_SIZE")) ? atoi(e) : o.ranks;
    ri.local_rank = (e = getenv("LOCAL_RANK")) ? atoi(e) : ri.rank;
    ri.local_world = (e = getenv("LOCAL_WORLD_SIZE")) ? atoi(e) : ri.world;
  }
  g_rank = ri;
  return run_rank(&o, &g_rank);
}
