/* rank_launcher.h: the launcher of the multi-process test programs, as torchrun starts a job:
 * `launch_ranks` re-executes the program (/proc/self/exe with its argv) as `n` ranks (at most 64),
 * each with RANK and LOCAL_RANK set (LOCAL_RANK = RANK % per_node, or RANK when per_node <= 0),
 * waits for all of them and returns the first non-zero exit status (128 + signal for a rank a signal
 * ended), 0 when all succeeded, or 6 when a fork failed. The caller sets WORLD_SIZE and whatever
 * else the ranks read before calling it. */
#ifndef TPROF_TEST_RANK_LAUNCHER_H
#define TPROF_TEST_RANK_LAUNCHER_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static inline int launch_ranks(int n, char **argv, int per_node)
{
  pid_t pids[64];
  if (n < 1 || n > 64) return 6;
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    if (pids[r] < 0) return 6;
    if (pids[r] == 0) {
      char rk[16];
      snprintf(rk, sizeof rk, "%d", r);
      setenv("RANK", rk, 1);
      snprintf(rk, sizeof rk, "%d", per_node > 0 ? r % per_node : r);
      setenv("LOCAL_RANK", rk, 1);
      execv("/proc/self/exe", argv);
      _exit(127);
    }
  }
  int code = 0;
  for (int r = 0; r < n; r++) {
    int st = 0;
    while (waitpid(pids[r], &st, 0) < 0 && errno == EINTR) {
    }
    int c = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (c && !code) code = c;
  }
  return code;
}

#endif
